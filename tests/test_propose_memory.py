"""The memory as a proposer: which of its rules go first, which end the search, how many are asked."""

from llm_anchors.memory import MemoryEntry
from llm_anchors.propose import MemoryRules, Proposals, near

A, B, C = frozenset({1}), frozenset({2, 3}), frozenset({4})


def entry(anchor_keys):
    return MemoryEntry(query="q", features=("a", "b"), label="pos", rule_positions=(), rule_features=(),
                       rule_vectors=(), precision=1.0, coverage=0.5, anchor_keys=anchor_keys)  # fmt: skip


def test_exact_anchors_are_final_and_first_on_a_near_repeat_mapped_ones_after_the_empty_rule():
    rules = MemoryRules(exact=(A, B), mapped=(C,))
    first, later = rules.proposers(first=True)
    assert (first.first, set(first.rules), first.final) == (True, {A, B}, {A, B})
    assert (later.first, list(later.rules), later.final) == (False, [C], frozenset())
    (together,) = rules.proposers(first=False)  # not a near repeat: one proposer, ordered when asked
    assert isinstance(together, Proposals) and not together.first
    assert list(together.rules) == [A, B, C] and together.final == {A, B}
    assert MemoryRules().proposers(first=True) == []


def test_limited_keeps_the_first_rules_exact_ones_first():
    rules = MemoryRules(exact=(A,), mapped=(B, C)).limited(2)
    assert rules == MemoryRules(exact=(A,), mapped=(B,))
    assert MemoryRules(exact=(A, B), mapped=(C,)).limited(1).rules == (A,)


def test_a_near_repeat_needs_an_anchor_made_of_this_input_s_keys_and_the_similarity():
    keys = ["check", "out", "my", "channel"]
    assert near([entry(("check", "out"))], 0.9, keys, tau_first=0.0)
    assert not near([entry(("subscribe",))], 0.9, keys, tau_first=0.0)  # its anchor is not in this input
    assert not near([entry(())], 0.9, keys, tau_first=0.0)  # the nearest input needed no anchor
    assert not near([entry(("check",))], 0.5, keys, tau_first=0.6)  # not similar enough
    assert not near([], 1.0, keys, tau_first=0.0)
