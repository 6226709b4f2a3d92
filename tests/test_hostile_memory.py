"""A memory and a cache damaged or in use: refused, set aside and rebuilt, never a crash or a lost entry."""

import json

import pytest

from llm_anchors import ConfigError
from tests.test_manchors import STREAM

pytestmark = pytest.mark.filterwarnings("ignore:the prompt cannot be cached")


@pytest.fixture(scope="module")
def embedder():
    from llm_anchors.samplers import SentenceEmbedder

    return SentenceEmbedder()


async def run_into(out, memory, texts, embedder, answer=None):
    """A MAnchors run of ``texts`` into ``out`` with its memory in ``memory``."""
    from llm_anchors import FunctionClassifier, MAnchorsExplainer
    from llm_anchors.run import ResultsFile, explain_resumable
    from tests.conftest import needs_all

    clf = FunctionClassifier(answer or needs_all("good", "great"), name="good-and-great")
    with ResultsFile(out) as results:
        async with MAnchorsExplainer(clf, seed=0, embedder=embedder) as explainer:
            return await explain_resumable(explainer, texts, results, memory_dir=memory)


def recorded_entries(out) -> int:
    from llm_anchors.run import read_results

    return sum(len(r.get("memory_entries", ())) for r in read_results(out).values())


async def test_a_second_run_on_a_memory_in_use_is_refused_before_it_spends_and_no_entry_is_lost(tmp_path, embedder):
    import asyncio

    from llm_anchors import ConfigError
    from llm_anchors.memory.store import saved_entries
    from llm_anchors.money import read_journal
    from tests.conftest import needs_all

    memory, first, second = tmp_path / "memory", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    started = asyncio.Event()

    async def slow(texts):  # the first run's model: slow enough for the second to start meanwhile
        started.set()
        await asyncio.sleep(0.01)
        return needs_all("good", "great")(texts)

    running = asyncio.ensure_future(run_into(first, memory, STREAM[:4], embedder, slow))
    await started.wait()
    with pytest.raises(ConfigError, match="another run is using the memory"):
        await run_into(second, memory, STREAM[4:], embedder)
    await running
    assert read_journal(f"{second}.budget.jsonl").reservations == 0  # refused before it spent
    await run_into(second, memory, STREAM[4:], embedder)  # once the first is done
    assert saved_entries(memory) == recorded_entries(first) + recorded_entries(second) > 0


def _rewrite_entries(change):
    def damage(root):
        gen = root / (root / "CURRENT").read_text().strip()
        meta = json.loads((gen / "entries.json").read_text())
        change(gen, meta)
        (gen / "entries.json").write_text(json.dumps(meta))

    return damage


def _nan_vectors(gen, meta):
    import hashlib

    import numpy as np

    vectors = np.load(gen / "vectors.npy")
    vectors[0, 0] = np.nan
    np.save(gen / "vectors.npy", vectors)
    meta["checksums"]["vectors.npy"] = hashlib.sha256((gen / "vectors.npy").read_bytes()).hexdigest()


def _flip_a_byte(root):
    index = next(root.glob("gen-*/index-0.bin"))
    raw = bytearray(index.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    index.write_bytes(bytes(raw))


MEMORY_DAMAGES = {
    "entries cut": lambda root: (lambda p: p.write_bytes(p.read_bytes()[:80]))(next(root.glob("gen-*/entries.json"))),
    "an index byte flipped": _flip_a_byte,
    "CURRENT escaping": lambda root: (root / "CURRENT").write_text("../../etc"),
    "CURRENT empty": lambda root: (root / "CURRENT").write_text(""),
    "another format": _rewrite_entries(lambda gen, meta: meta.update(format_version=99)),
    "a generation gone": lambda root: __import__("shutil").rmtree(next(root.glob("gen-*"))),
    "NaN vectors": _rewrite_entries(_nan_vectors),
}


@pytest.mark.parametrize("name", sorted(MEMORY_DAMAGES))
async def test_a_damaged_memory_is_set_aside_said_and_rebuilt_from_the_results_file(tmp_path, embedder, name):
    from llm_anchors.memory.store import saved_entries
    from llm_anchors.run import SetAsideWarning

    memory, out = tmp_path / "memory", tmp_path / "out.jsonl"
    await run_into(out, memory, STREAM[:5], embedder)
    MEMORY_DAMAGES[name](memory)
    with pytest.warns(SetAsideWarning, match="cannot be read.*set aside.*rebuilt"):
        report = await run_into(out, memory, STREAM, embedder)  # the same run goes on: 3 inputs more
    assert report.done_now == 3
    assert saved_entries(memory) == recorded_entries(out) > 0
    assert len(list(memory.glob("memory.damaged-*"))) == 1  # kept for the user to look at, not deleted


CACHE_DAMAGES = {
    "cut": lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]),
    "garbage": lambda path: path.write_bytes(b"not a database " * 300),
    "a directory": lambda path: (path.unlink(), path.mkdir()),
}


@pytest.mark.parametrize("name", sorted(CACHE_DAMAGES))
def test_a_run_s_damaged_query_cache_is_set_aside_said_and_begun_again(tmp_path, name):
    from llm_anchors import QueryCache
    from llm_anchors.run import SetAsideWarning

    path = tmp_path / "out.jsonl.cache.sqlite"
    cache = QueryCache(path)
    cache.put_many("clf", [(f"text {i} " * 20, "positive") for i in range(2000)])
    cache.close()
    CACHE_DAMAGES[name](path)
    with pytest.raises(ConfigError, match="cannot use .* as a query cache"):
        QueryCache(path)  # a cache the user named: refused, as before
    with pytest.warns(SetAsideWarning, match="set aside as out.jsonl.cache.sqlite.damaged-"):
        again = QueryCache(path, if_damaged="set aside")
    again.put("clf", "a text", "negative")
    assert again.get("clf", "a text") == (True, "negative") and len(list(tmp_path.glob("*.damaged-*"))) >= 1
    again.close()


# -- a hand-edited results file (item 12) -----------------------------------------------------------------


def _edit(lines, change):
    edited = [json.loads(line) for line in lines]
    change(edited)
    return [json.dumps(line) for line in edited if line is not None]


def _set(line, *path_and_value):
    *path, value = path_and_value

    def change(lines):
        where = lines[line]
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value

    return change


HAND_EDITS = {
    "a dict label": (_set(2, "explanation", "data", "label", {"x": 1}), "label is {'x': 1}"),
    "negative queries": (_set(2, "explanation", "meta", "queries", -5), "queries is -5, below zero"),
    "an index explained twice": (lambda lines: lines.append(lines[2]), "was explained already, on line 3"),
    "a negative index": (_set(2, "index", -1), "input -1 cannot come here"),
    "an index of 10**9": (_set(2, "index", 10**9), "input 1000000000 cannot come here"),
    "no header line": (lambda lines: lines.__setitem__(0, None), ":1 is not a run's configuration"),
}


@pytest.fixture(scope="module")
def results_lines(tmp_path_factory):
    from llm_anchors import AnchorsExplainer, FunctionClassifier
    from llm_anchors.run import ResultsFile, explain_resumable
    from tests.conftest import needs_all

    out = tmp_path_factory.mktemp("run") / "out.jsonl"

    async def run():
        with ResultsFile(out) as results:
            async with AnchorsExplainer(FunctionClassifier(needs_all("good"), name="good"), seed=0) as explainer:
                await explain_resumable(explainer, ["a good film", "a dull film", "a good plot"], results)

    import asyncio

    asyncio.run(run())
    return out.read_text().splitlines()


@pytest.mark.parametrize("name", sorted(HAND_EDITS))
def test_a_hand_edited_results_line_is_refused_by_the_report_naming_it(tmp_path, capsys, results_lines, name):
    from llm_anchors.cli import main

    change, said = HAND_EDITS[name]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(_edit(results_lines, change)) + "\n")
    assert main(["report", str(edited), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and "Traceback" not in err, err
    assert not (tmp_path / "r.html").exists()
