"""``llm-anchors report``: the page's content, and the page in a real headless Chromium."""

import json
import re
import shutil
import struct
import subprocess
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pytest

from llm_anchors import AnchorsExplainer, ConfigError, FunctionClassifier, MAnchorsExplainer
from llm_anchors.cli import main
from llm_anchors.run import ResultsFile, explain_resumable, read_results, write_report

POSITIVE = {"good", "great", "fine"}
TEXTS = [
    f"a {w} film with {v} acting and a {u} plot"
    for w in ("good", "bad", "dull", "great")
    for v in ("fine", "poor")
    for u in ("clever", "thin")
] + ["<script>alert('x')</script> a good & great film"]


def predict(texts):
    return ["pos" if set(t.lower().split()) & POSITIVE else "neg" for t in texts]


async def _results(path: Path, kind: type[AnchorsExplainer]) -> Path:
    async with kind(FunctionClassifier(predict, name="keywords"), seed=0) as explainer:
        with ResultsFile(path) as results:
            await explain_resumable(explainer, TEXTS, results)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A MAnchors run and a plain-Anchors run of the same inputs."""
    import asyncio

    folder = tmp_path_factory.mktemp("runs")
    manchors = asyncio.run(_results(folder / "manchors.jsonl", MAnchorsExplainer))
    anchors = asyncio.run(_results(folder / "anchors.jsonl", AnchorsExplainer))
    return manchors, anchors


class Rows(HTMLParser):
    """The report table's rows as the page holds them: their data attributes and whether hidden."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.marks = 0
        self._in_row = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and any(k == "data-index" for k, _ in attrs):
            self.rows.append(dict(attrs))
            self._in_row = True
        elif tag == "mark" and self._in_row:
            self.marks += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self._in_row = False


def parse(page: str) -> Rows:
    """The rows drawn in a page's DOM (after its script ran)."""
    rows = Rows()
    rows.feed(page)
    return rows


def data(page: str) -> list[dict]:
    """The rows a page carries, as its script reads them (see report._row for their keys)."""
    raw = page.split("<script type=application/json id=rows>")[1].split("</script>")[0]
    assert "</" not in raw and "<!--" not in raw  # nothing that could end the script early
    return json.loads(raw)["rows"]


def test_the_page_has_every_input_its_anchor_marked_and_escapes_what_it_shows(runs, tmp_path):
    manchors, _ = runs
    page = write_report(manchors, tmp_path / "report.html").read_text()
    rows = data(page)
    assert [r["i"] for r in rows] == list(range(len(TEXTS)))
    certified = [r for r in rows if r["n"]]  # certified in default mode: the report said "strict" of every one
    assert certified and {r["k"] for r in certified} == {"default"}
    marks = sum(r["t"].count("<mark>") for r in rows)
    assert marks >= sum(1 for t in TEXTS if set(t.split()) & POSITIVE)  # positive anchors name a word
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert not re.search(r"(src|href)=\"?https?:", page)  # self-contained: nothing fetched
    words = page.split("id=anchor-words")[1].split("</section>")[0]
    assert ">good<" in words and ">great<" in words
    assert "memory hits" in page and "Against plain Anchors" not in page


def test_a_plain_anchors_baseline_measures_the_saving(runs, tmp_path):
    manchors, anchors = runs
    page = write_report(manchors, tmp_path / "report.html", baseline=anchors).read_text()
    saving = page.split("Against plain Anchors")[1].split("</table>")[0]
    ours, theirs = _totals(manchors), _totals(anchors)
    assert f"<td>{ours:,}</td><td>{theirs:,}</td><td>{1 - ours / theirs:.0%} fewer</td>" in saving
    assert page.count("<polyline") == 2  # this run and the baseline, cumulated over the same inputs


def _totals(path: Path) -> int:
    return sum(r["explanation"]["meta"]["queries"] for r in read_results(path).values())


def test_the_command_writes_the_page_and_leaves_a_cut_short_results_file_as_it_is(runs, tmp_path, capsys):
    manchors, _ = runs
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(manchors.read_bytes()[:-40])  # a run killed while writing its last line
    before = cut.read_bytes()
    assert main(["report", str(cut), "-o", str(tmp_path / "r.html")]) == 0
    assert cut.read_bytes() == before
    assert len(data((tmp_path / "r.html").read_text())) == len(TEXTS) - 1
    err = capsys.readouterr().err
    assert "wrote" in err and f"warning: {cut}: leaving out a last line cut short" in err  # one line, no source
    assert "warnings.warn" not in err
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "m.html")]) == 2
    assert "cannot read the results file" in capsys.readouterr().err
    edited = tmp_path / "edited.jsonl"  # a hand-edited precision
    raw = [json.loads(line) for line in manchors.read_text().splitlines()]
    raw[3]["explanation"]["data"]["precision"] = "x"
    edited.write_text("".join(json.dumps(line) + "\n" for line in raw))
    assert main(["report", str(edited), "-o", str(tmp_path / "e.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "the line of input" in err and "precision is 'x'" in err
    assert "Traceback" not in err
    for field, value, said in (("memory_hit", "x", "memory_hit is 'x'"), ("positions", [999], "positions [999]"),
                               ("positions", [-1], "positions[0] is -1, below zero")):  # fmt: skip
        raw = [json.loads(line) for line in manchors.read_text().splitlines()]
        where = raw[3]["explanation"]["meta" if field == "memory_hit" else "data"]
        where[field] = value
        edited.write_text("".join(json.dumps(line) + "\n" for line in raw))
        assert main(["report", str(edited), "-o", str(tmp_path / "e.html")]) == 2  # it was a TypeError, rc 1
        err = capsys.readouterr().err
        assert "edited.jsonl:4: the line of input 2 is" in err and said in err and "Traceback" not in err, err
    head = '{"run": {"config": {}}}\n'
    (tmp_path / "bad.jsonl").write_text(head + '{"index": 0, "failed": "empty"}\nnot json\n{"index": 2}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:3 is not a results line"):
        write_report(tmp_path / "bad.jsonl", tmp_path / "b.html")
    (tmp_path / "bad.jsonl").write_text(
        head + '{"index": 0, "failed": "empty"}\n{"index": 1}\n{"index": 2, "failed": "x"}\n'
    )
    with pytest.raises(ConfigError, match="bad.jsonl:3 is not a results line"):
        write_report(tmp_path / "bad.jsonl", tmp_path / "b.html")


# -- in a real browser ------------------------------------------------------------------

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def chromium(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / "profile"
    command = [str(BROWSER), *FLAGS, f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


@pytest.mark.browser
@pytest.mark.skipif(
    BROWSER is None, reason="no Chromium: scripts/test.sh installs Debian's chromium package (apt-get install chromium)"
)
def test_in_headless_chromium_the_table_sorts_filters_and_the_page_renders(runs, tmp_path):
    manchors, anchors = runs
    report = write_report(manchors, tmp_path / "report.html", baseline=anchors)
    url = report.resolve().as_uri()

    loaded = parse(chromium(tmp_path, "--dump-dom", url))  # the DOM after the page's script ran
    assert len(loaded.rows) == len(TEXTS) and loaded.marks > 0

    view = parse(chromium(tmp_path, "--dump-dom", url + "#label=pos&sort=queries&dir=desc"))
    positives = sum(label == "pos" for label in predict(TEXTS))
    assert len(view.rows) == positives and {r["data-label"] for r in view.rows} == {"pos"}
    queries = [int(r["data-queries"] or 0) for r in view.rows]
    assert queries == sorted(queries, reverse=True)

    shot = tmp_path / "report.png"  # fmt: skip
    chromium(tmp_path, "--window-size=1280,1000", f"--screenshot={shot}", url)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1280, 1000)
    assert len(png) > 20_000  # a page drawn, not a blank one


@pytest.mark.browser
@pytest.mark.skipif(BROWSER is None, reason="no Chromium: scripts/test.sh installs Debian's chromium package")
def test_in_headless_chromium_a_long_run_is_shown_a_page_at_a_time(runs, tmp_path):
    manchors, _ = runs
    raw = [json.loads(line) for line in manchors.read_text().splitlines()]
    head, body = raw[0], raw[1:]
    long = tmp_path / "long.jsonl"  # 250 inputs: the run's lines again under other indices
    copies = [{**body[i % len(body)], "index": i, "input_sha256": f"{i:064x}"} for i in range(250)]
    long.write_text("".join(json.dumps(line) + "\n" for line in [head, *copies]))
    url = write_report(long, tmp_path / "long.html").resolve().as_uri()
    first = chromium(tmp_path, "--dump-dom", url)
    assert [int(r["data-index"]) for r in parse(first).rows] == list(range(100)) and "page 1 of 3" in first
    third = chromium(tmp_path, "--dump-dom", url + "#sort=index&dir=desc&page=3")
    assert [int(r["data-index"]) for r in parse(third).rows] == list(range(49, -1, -1)) and "page 3 of 3" in third
    far = chromium(tmp_path, "--dump-dom", url + "#page=99")  # a page past the end shows the last
    assert len(parse(far).rows) == 50 and "page 3 of 3" in far


async def test_inputs_that_could_not_be_explained_are_counted_and_listed(tmp_path):
    texts = ["a good film", "", "<!-- ?? -->", "a bad film"]
    async with AnchorsExplainer(FunctionClassifier(predict, name="keywords"), seed=0) as explainer:
        with ResultsFile(tmp_path / "r.jsonl") as results:
            await explain_resumable(explainer, texts, results)
    page = write_report(tmp_path / "r.jsonl", tmp_path / "report.html").read_text()
    assert "2 could not be explained" in page and "Inputs that could not be explained (2)" in page
    failed = page.split("id=failed")[1]
    assert "<td>1</td><td>text to explain is empty" in failed and "&lt;!-- ?? --&gt;" in failed
    assert "<!-- ?? -->" not in page  # escaped


async def test_the_report_says_what_the_memory_did(tmp_path):
    texts = TEXTS[:6] + TEXTS[:3]  # three exact repeats
    explainer = MAnchorsExplainer(FunctionClassifier(predict, name="keywords"), seed=0)
    async with explainer:
        with ResultsFile(tmp_path / "r.jsonl") as results:
            await explain_resumable(explainer, texts, results)
    page = write_report(tmp_path / "r.jsonl", tmp_path / "report.html").read_text()
    rows = data(page)
    assert [r["i"] for r in rows if r["m"] == 2] == [6, 7, 8] and all(r["q"] == 0 for r in rows if r["m"] == 2)
    card = page.split("memory hits")[1].split("</div></div>")[0]
    assert (
        "3 exact repeats (no query)" in card
        and "its rules tested on" in card
        and re.search(r"asking it (saved|cost) [\d,]+ queries", card)
    )


def test_anchor_words_rank_by_how_reliably_a_word_anchors_not_how_common_it_is():
    """ "a" in the anchor of 4 of the 40 inputs that hold it ranks below "superb", in the anchor of all 3
    that hold it; each word shows k of n."""
    from types import SimpleNamespace

    from llm_anchors.run.report import _top_words

    common = [SimpleNamespace(label="pos", anchor=("a",) if i < 4 else (), words=frozenset({"a", "film"}))
              for i in range(37)]  # fmt: skip
    telling = [SimpleNamespace(label="pos", anchor=("superb",), words=frozenset({"a", "superb"})) for _ in range(3)]
    shown = _top_words([*common, *telling])
    assert shown.index(">superb<") < shown.index(">a<")
    assert "3 of 3" in shown and "4 of 40" in shown
