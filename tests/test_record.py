import pytest

from llm_anchors import ConfigError
from llm_anchors.explain import ProposerRecord, RecordSettings


def test_saved_is_what_the_control_arm_paid_per_feature_less_the_asked_arm_s():
    record = ProposerRecord()
    assert record.saved == 0.0  # no arm yet
    record.add(True, queries=40, features=10, certified=True)
    assert record.saved == 0.0  # no control yet
    record.add(False, queries=120, features=20, certified=False)
    assert record.saved == pytest.approx((120 / 20 - 40 / 10) * 10)  # 6 a feature against 4, over 10 features
    assert (record.asked, record.control, record.certified) == (1, 1, 1)


def test_the_draw_is_seeded_by_the_input_and_the_arms_follow_the_record():
    settings = RecordSettings(explore=0.2, warm_up=2)
    record = ProposerRecord()
    keys = [f"input {i}" for i in range(400)]
    warming = [record.ask(settings, 0, k) for k in keys]
    assert warming == [record.ask(settings, 0, k) for k in keys]  # the same input and seed decide alike
    assert 0.7 < sum(warming) / len(keys) < 0.9  # asked but for explore of them while warming up
    for asked, queries in ((True, 10), (True, 10), (False, 50), (False, 50)):
        record.add(asked, queries, features=5, certified=asked)
    assert record.saved > 0 and 0.7 < sum(record.ask(settings, 0, k) for k in keys) / len(keys) < 0.9
    for _ in range(3):
        record.add(True, 400, features=5, certified=False)  # asking it now costs more than growth alone
    assert record.saved < 0 and 0.1 < sum(record.ask(settings, 0, k) for k in keys) / len(keys) < 0.3


@pytest.mark.parametrize("bad", [{"explore": -0.1}, {"explore": 0.6}, {"warm_up": -1}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        RecordSettings(**bad)
