import pytest

from llm_anchors import ConfigError
from llm_anchors.propose import ProposerRecord, RecordParams


def test_saved_is_what_a_control_input_paid_less_an_asked_one_times_the_asked():
    record = ProposerRecord()
    assert record.saved == 0.0  # no arm yet
    record.add(True, queries=40)
    assert record.saved == 0.0  # no control yet
    record.add(False, queries=120)
    assert record.saved == pytest.approx(80.0)
    record.add(True, queries=1_000)  # one costly input counts whole: a stream pays the sum
    assert record.saved == pytest.approx((120 - 520) * 2)
    assert (record.asked, record.control) == (2, 1)


def test_the_draw_is_seeded_by_the_input_and_the_arms_follow_the_record():
    settings = RecordParams(explore=0.2, warm_up=2)
    record = ProposerRecord()
    keys = [f"input {i}" for i in range(400)]
    warming = [record.ask(settings, 0, k) for k in keys]
    assert warming == [record.ask(settings, 0, k) for k in keys]  # the same input and seed decide alike
    assert 0.4 < sum(warming) / len(keys) < 0.6  # half of them while warming up: the arms fill alike
    for asked, queries in ((True, 10), (True, 12), (False, 50), (False, 60)):
        record.add(asked, queries)
    assert record.saved > 0 and record.chance(settings) == 0.8  # clearly cheaper: all but explore
    assert 0.7 < sum(record.ask(settings, 0, k) for k in keys) / len(keys) < 0.9
    for _ in range(3):
        record.add(True, 400)  # asking it now costs more than growth alone
    assert record.saved < 0 and record.chance(settings) == 0.2
    assert 0.1 < sum(record.ask(settings, 0, k) for k in keys) / len(keys) < 0.3


def test_a_record_that_chance_alone_makes_positive_moves_the_share_a_little():
    settings = RecordParams(explore=0.1, warm_up=2)
    record = ProposerRecord()
    for asked, queries in ((True, 20), (True, 400), (False, 30), (False, 420)):  # a little cheaper, all noise
        record.add(asked, queries)
    assert record.saved > 0 and 0.0 < record.gain() < 0.2
    assert 0.15 < record.chance(settings) < 0.5  # below half: not by a standard error
    assert 0.5 < record.chance(RecordParams(warm_up=2, margin=0.0)) < 0.6


def test_a_proposer_that_makes_most_inputs_cheaper_and_a_few_much_dearer_is_not_favoured():
    record = ProposerRecord()
    for i in range(40):
        record.add(True, 2_000 if i % 10 == 0 else 90)  # cheaper 9 times in 10 ...
        record.add(False, 100)
    assert record.saved < 0 and record.gain() < 0  # ... dearer in sum
    assert record.chance(RecordParams()) < 0.5


@pytest.mark.parametrize("bad", [{"explore": -0.1}, {"explore": 0.6}, {"warm_up": -1}, {"margin": -1.0}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        RecordParams(**bad)
