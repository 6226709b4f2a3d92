import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llm_anchors import ConfigError, MemoryEntry, RuleMemory

DIM = 8


def entry(text, label="pos", rule=(0,)):
    words = tuple(text.split())
    return MemoryEntry(text, words, label, tuple(rule), tuple(words[p] for p in rule), 0.85, 0.5)


def unit(seed):
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def filled(n=50):
    memory = RuleMemory(DIM, "emb", "clf")
    for i in range(n):
        memory.add(entry(f"text number {i}", label="pos" if i % 2 else "neg"), unit(i))
    return memory


def test_nearest_is_scoped_by_label():
    memory = filled()
    found, sim = memory.nearest(unit(7), label="pos")
    assert found.text == "text number 7" and sim == pytest.approx(1.0, abs=1e-5)
    found, sim = memory.nearest(unit(7), label="neg")
    assert found.label == "neg" and sim < 0.99
    assert memory.nearest(unit(7), label="other") is None
    assert RuleMemory(DIM, "emb", "clf").nearest(unit(1), label="pos") is None


def test_grows_past_its_initial_capacity():
    memory = filled(1500)
    assert len(memory) == 1500
    assert memory.nearest(unit(1499), label="pos")[0].text == "text number 1499"


def test_save_load_round_trip(tmp_path):
    memory = filled()
    memory.save(tmp_path / "m")
    back = RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")
    assert back.entries == memory.entries
    for i in range(10):
        assert back.nearest(unit(i), label="pos") == memory.nearest(unit(i), label="pos")
    memory.add(entry("one more"), unit(999))
    memory.save(tmp_path / "m")  # a second generation replaces the first
    assert len(RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")) == 51
    assert len(list((tmp_path / "m").glob("gen-*"))) == 1


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"embedder_id": "other"}, "built with"),
        ({"dim": 4}, "built with"),
        ({"scope": "another model"}, "another model"),
    ],
)
def test_loading_a_foreign_memory_is_an_error(tmp_path, kwargs, match):
    filled().save(tmp_path / "m")
    args = {"embedder_id": "emb", "dim": DIM, "scope": "clf", **kwargs}
    with pytest.raises(ConfigError, match=match):
        RuleMemory.load(tmp_path / "m", **args)


def test_loading_nothing_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no saved memory"):
        RuleMemory.load(tmp_path, embedder_id="emb", dim=DIM, scope="clf")


def test_process_killed_during_save_leaves_the_previous_memory(tmp_path):
    target = tmp_path / "m"
    filled(10).save(target)
    # A second process saves a bigger memory and dies at the commit point (os.replace).
    script = textwrap.dedent(
        f"""
        import os, numpy as np
        from tests.test_memory import filled
        memory = filled(40)
        os.replace = lambda *a, **k: os._exit(9)
        memory.save({str(target)!r})
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert done.returncode == 9
    back = RuleMemory.load(target, embedder_id="emb", dim=DIM, scope="clf")
    assert len(back) == 10
    # and the next save still works
    filled(20).save(target)
    assert len(RuleMemory.load(target, embedder_id="emb", dim=DIM, scope="clf")) == 20
