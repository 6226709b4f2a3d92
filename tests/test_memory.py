import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llm_anchors import ConfigError
from llm_anchors.extend import MemoryEntry
from llm_anchors.memory import RuleMemory
from llm_anchors.memory.store import nearest_unused

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
    assert found.query == "text number 7" and sim == pytest.approx(1.0, abs=1e-5)
    found, sim = memory.nearest(unit(7), label="neg")
    assert found.label == "neg" and sim < 0.99
    assert memory.nearest(unit(7), label="other") is None
    assert RuleMemory(DIM, "emb", "clf").nearest(unit(1), label="pos") is None


def test_grows_past_its_initial_capacity():
    memory = filled(1500)
    assert len(memory) == 1500
    assert memory.nearest(unit(1499), label="pos")[0].query == "text number 1499"


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


@pytest.mark.parametrize("labels", [("pos", "neg"), (0, 1), (True, False), (("a", 1), ("b", 2))])
def test_every_kind_of_label_saves_and_loads(tmp_path, labels):
    # A label a classifier may give (a name, a number, a flag, a tuple: JSON writes it as a list) is read
    # back as itself by the one rule that reads an explanation's (before, a tuple label's memory was refused).
    memory = RuleMemory(DIM, "emb", "clf")
    for i in range(6):
        memory.add(entry(f"text number {i}", label=labels[i % 2]), unit(i))
    memory.save(tmp_path / "m")
    back = RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")
    assert back.entries == memory.entries
    assert back.nearest(unit(2), label=labels[0]) == memory.nearest(unit(2), label=labels[0])


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


def anchored_entry(text, anchor, label="pos"):
    words = tuple(text.split())
    positions = tuple(words.index(w) for w in anchor)
    return MemoryEntry(text, words, label, positions, anchor, 0.85, 0.5, anchor_positions=positions,
                       anchor_features=anchor, anchor_keys=tuple(w.lower() for w in anchor))  # fmt: skip


def test_neighbours_are_ordered_and_scoped():
    memory = filled()
    found = memory.neighbours(unit(7), label="pos", k=3)
    assert len(found) == 3 and found[0][0].query == "text number 7"
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    assert all(e.label == "pos" for e, _ in found)
    assert len(memory.neighbours(unit(7), label="pos", k=1000)) == 25
    assert memory.neighbours(unit(7), label="other", k=3) == []


def test_anchored_finds_earlier_anchors_made_of_the_inputs_keys():
    memory = RuleMemory(DIM, "emb", "clf")
    memory.add(anchored_entry("a dull and boring film", ("dull",)), unit(1))
    memory.add(anchored_entry("so dull it hurts", ("dull",)), unit(2))
    memory.add(anchored_entry("not funny at all", ("not", "funny")), unit(3))
    memory.add(anchored_entry("a great film", ("great",), label="neg"), unit(4))
    memory.add(entry("no anchor kept here"), unit(5))
    found = memory.anchored({"a", "dull", "not", "funny", "great"}, label="pos")
    assert found == [(("dull",), 2), (("funny", "not"), 1)]  # shortest, then most often found
    assert memory.anchored({"not"}, label="pos") == []  # "funny" is missing
    assert memory.anchored({"great"}, label="neg") == [(("great",), 1)]


def test_anchored_is_what_a_scan_of_every_entry_finds(tmp_path):
    """The anchors filed under one key each give what comparing the input's keys with every entry gives."""
    rng = np.random.default_rng(0)
    vocabulary = [f"w{i}" for i in range(30)]
    memory = RuleMemory(DIM, "emb", "clf")
    for i in range(400):
        keys = tuple(rng.choice(vocabulary, rng.integers(1, 4), replace=False))
        memory.add(anchored_entry(" ".join(keys) + " x", keys, label="pos" if i % 3 else "neg"), unit(i))

    def scan(keys, label):
        found = {}
        for number, e in enumerate(memory.entries):
            anchor = frozenset(e.anchor_keys)
            if e.label == label and anchor and anchor <= keys:
                found.setdefault(anchor, []).append(number)
        ranked = sorted(found.items(), key=lambda kv: (len(kv[0]), -len(kv[1]), kv[1][0]))
        return [(tuple(sorted(a)), len(numbers)) for a, numbers in ranked]

    memory.save(tmp_path / "m")
    back = RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")
    for seed in range(20):
        keys = set(np.random.default_rng(seed).choice(vocabulary, 12, replace=False))
        for label in ("pos", "neg"):
            assert memory.anchored(keys, label=label) == scan(keys, label) == back.anchored(keys, label=label)
    assert len(back.neighbours(unit(5), label="neg", k=500)) == len([e for e in memory.entries if e.label == "neg"])


def test_anchors_and_their_index_survive_save_and_load(tmp_path):
    memory = RuleMemory(DIM, "emb", "clf")
    memory.add(anchored_entry("a dull and boring film", ("dull", "boring")), unit(1))
    memory.save(tmp_path / "m")
    back = RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")
    assert back.entries == memory.entries and back.entries[0].anchor_keys == ("dull", "boring")
    assert back.anchored({"dull", "boring", "x"}, label="pos") == [(("boring", "dull"), 1)]


def _damaged(tmp_path, damage):
    """Save a memory, damage it with ``damage(gen_dir, root)``, load it in a fresh process."""
    filled(30).save(tmp_path / "m")
    other = tmp_path / "other"
    filled(31).save(other)
    gen = next((tmp_path / "m").glob("gen-*"))
    damage(gen, tmp_path / "m", next(other.glob("gen-*")))
    script = textwrap.dedent(
        f"""
        from llm_anchors import ConfigError
        from llm_anchors.memory import RuleMemory
        try:
            RuleMemory.load({str(tmp_path / "m")!r}, embedder_id="emb", dim={DIM}, scope="clf")
            print("LOADED")
        except ConfigError as exc:
            print(type(exc).__name__ + ":", exc)
        """
    )
    root = __import__("pathlib").Path(__file__).parent.parent
    return subprocess.run([sys.executable, "-c", script], cwd=str(root), capture_output=True, text=True, timeout=60)


def _truncate(path, size=100):
    path.write_bytes(path.read_bytes()[:size])


def _edit_entries(change):
    def damage(gen, root, other):
        import json

        meta = json.loads((gen / "entries.json").read_text())
        change(meta)
        (gen / "entries.json").write_text(json.dumps(meta))

    return damage


DAMAGES = {
    "index truncated": (lambda gen, root, other: _truncate(gen / "index-0.bin"), "index-0.bin"),
    "index from another save": (
        lambda gen, root, other: (gen / "index-0.bin").write_bytes((other / "index-0.bin").read_bytes()),
        "index-0.bin",
    ),
    "index missing": (lambda gen, root, other: (gen / "index-0.bin").unlink(), "index-0.bin"),
    "vectors truncated": (lambda gen, root, other: _truncate(gen / "vectors.npy"), "vectors.npy"),
    "entries truncated": (lambda gen, root, other: _truncate(gen / "entries.json", 50), "entries.json"),
    "entry without its query": (_edit_entries(lambda m: m["entries"][3].pop("query")), "entries.json"),
    "entry with a list label": (_edit_entries(lambda m: m["entries"][3].update(label=[1])), "entries.json"),
    "entries not a list": (_edit_entries(lambda m: m.update(entries={"a": 1})), "entries.json"),
    "unknown format": (_edit_entries(lambda m: m.update(format_version=99)), "entries.json"),
    "CURRENT names /etc": (lambda gen, root, other: (root / "CURRENT").write_text("/etc"), "CURRENT"),
    "CURRENT names a parent": (lambda gen, root, other: (root / "CURRENT").write_text("../other"), "CURRENT"),
    "CURRENT names nothing": (lambda gen, root, other: (root / "CURRENT").write_text("gen-000099"), "CURRENT"),
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_a_damaged_memory_is_refused_with_the_file_named_never_a_crash(tmp_path, name):
    damage, file = DAMAGES[name]
    done = _damaged(tmp_path, damage)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # -11 would be a segfault
    assert done.stdout.startswith("DamagedMemoryError:") and file in done.stdout, done.stdout


def test_nearest_unused_gives_each_row_the_best_free_column_first_on_ties():
    scores = np.array([[0.9, 0.8, 0.1], [0.9, 0.2, 0.2], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert nearest_unused(scores) == [0, 1, 2]  # row 1's best is taken; row 2 gets what is left; then none
    assert nearest_unused(np.array([[0.5, 0.5]])) == [0]
    assert nearest_unused(np.zeros((0, 3))) == []


def test_a_key_keeps_its_most_often_found_anchors_and_among_equals_the_latest():
    from llm_anchors.memory.store import _designated

    memory = RuleMemory(DIM, "emb", "clf", per_key=2)
    words = [f"w{i}" for i in range(200)]
    pairs = [("a", w) for w in words if _designated(frozenset({"a", w})) == "a"][:3]  # filed under "a"
    assert len(pairs) == 3
    first, second, third = pairs
    for i, anchor in enumerate([first, first, second, third]):
        memory.add(anchored_entry(" ".join(anchor) + " x", anchor), unit(i))
    found = memory.anchored({"a", "x", *words}, label="pos")
    assert [anchor for anchor, _ in found] == [tuple(sorted(first)), tuple(sorted(third))]  # second: evicted
    memory.add(anchored_entry(" ".join(second) + " x", second), unit(9))  # found again: 2 > 1, back in
    assert [count for _, count in memory.anchored({"a", "x", *words}, label="pos")] == [2, 2]


@pytest.mark.parametrize("per_key", [0, -1, 1.5, True])
def test_a_bound_per_key_that_is_not_a_positive_integer_is_refused(per_key):
    with pytest.raises(ConfigError, match="per_key"):
        RuleMemory(DIM, "emb", "clf", per_key=per_key)


def test_a_save_that_cannot_write_is_a_config_error_and_keeps_the_save_before(tmp_path, monkeypatch):
    import errno

    memory = filled()
    memory.save(tmp_path / "m")
    memory.add(entry("one more"), unit(999))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    with pytest.raises(ConfigError, match="No space left.*gen-000001 is still the save loaded"):
        memory.save(tmp_path / "m")
    monkeypatch.undo()
    # The generation begun is gone; the one before loads; the memory in this process is whole.
    assert [p.name for p in (tmp_path / "m").glob("gen-*")] == ["gen-000001"]
    assert len(RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")) == 50
    memory.save(tmp_path / "m")
    assert len(RuleMemory.load(tmp_path / "m", embedder_id="emb", dim=DIM, scope="clf")) == 51
