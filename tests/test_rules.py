import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from llm_anchors.search import covers, make_rule


def test_make_rule_is_a_frozenset_of_python_ints():
    rule = make_rule(np.array([3, 1, 3]))
    assert rule == frozenset({1, 3}) and all(type(f) is int for f in rule)


def test_the_empty_rule_covers_every_row():
    present = np.zeros((4, 3), dtype=bool)
    assert covers(frozenset(), present).tolist() == [True] * 4


@given(st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=20), st.sets(st.integers(0, 4)))
def test_covers_is_all_rule_features_present(rows, rule):
    present = np.array(rows, dtype=bool)
    expected = [all(row[f] for f in rule) for row in rows]
    assert covers(make_rule(rule), present).tolist() == expected
