"""Paragraphs and documents: BBC News (5 topics), explained by the default explainers.

    python -m benchmarks.documents bbc --split train --n 40          # tuning stream
    python -m benchmarks.documents bbc --split val --n 100           # the reported rows
    python -m benchmarks.documents curve --words 10,30,100,300,1000,2000 --per-length 3
    python -m benchmarks.documents llm --split val --n 10 --words 150  # the embedded LLM, 5 label words

``bbc``: a TF-IDF random forest trained on the train split explains articles of a split, with
``MAnchorsExplainer(clf)`` and ``AnchorsExplainer(clf)`` as they come (no argument): per article, paid
queries, the explainer's CPU per query (the process's CPU less the model's), the anchor's level and size,
and its precision on fresh samples of the explainer's own distribution (``estimate_precision``).

``curve``: the same on texts of 10 to 2,000 words (the first words of val articles; articles of one
topic joined for the longest), each point in a fresh process so its peak memory is its own.

``llm``: the embedded local LLM (Gemma 3 270M) with a five-label few-shot prompt, on val articles cut
to their first ``--words`` words: its accuracy on them, then MAnchors' explanations (success, paid
queries, wall time per article).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer
from llm_anchors.datasets import BBC_TOPICS, load_bbc_news, shuffled
from llm_anchors.samplers.words import WORD

from ._common import ci, markdown_table, write_json
from ._models import train_bbc_rf

LEVELS = ("words in sentences", "sentences", "words")
"""An anchor's level: words inside the sentences found first, the sentences, or words (a short text)."""
EXPLAINERS: dict[str, Callable[..., AnchorsExplainer]] = {"manchors": MAnchorsExplainer, "anchors": AnchorsExplainer}
LLM_TOPICS = ("business", "entertainment", "politics", "sport", "technology")
"""The label words the LLM answers with: the BBC topics, "tech" as the word Gemma says first ("technology")."""
TOPIC_PROMPT = """Give the topic of each news article: business, entertainment, politics, sport or technology.

Article: Shares in the bank rose 3% after it reported record annual profits and raised its dividend.
Topic: business

Article: The singer's new album went straight to number one in the charts, and her tour sold out.
Topic: entertainment

Article: The prime minister told MPs the election would be fought on the economy and public services.
Topic: politics

Article: The striker scored twice as the champions won the cup final in front of a record crowd.
Topic: sport

Article: The firm unveiled a faster mobile phone chip and new software for broadband networks.
Topic: technology

Article: {text}
Topic:"""


class TimedModel:
    """The forest's predict as a classifier function, with the CPU it used counted apart."""

    def __init__(self, model: Any) -> None:
        self.model, self.cpu_s = model, 0.0

    def __call__(self, texts: list[str]) -> list[str]:
        started = time.process_time()
        labels = [str(label) for label in self.model.predict(texts)]
        self.cpu_s += time.process_time() - started
        return labels


async def explain_articles(
    kind: str, model: Any, texts: Sequence[str], topics: Sequence[str], fresh: int, seed: int = 0
) -> list[dict[str, Any]]:
    """One row per article: the explainer's default settings, its CPU less the model's."""
    timed = TimedModel(model)
    clf = FunctionClassifier(timed, name="bbc-rf")
    rows = []
    async with EXPLAINERS[kind](clf, seed=seed) as explainer:
        for text, topic in zip(texts, topics, strict=True):
            cpu, model_cpu, started = time.process_time(), timed.cpu_s, time.perf_counter()
            exp = await explainer.explain(text)
            wall = time.perf_counter() - started
            explainer_cpu = time.process_time() - cpu - (timed.cpu_s - model_cpu)
            rows.append(await _row(explainer, exp, text, topic, explainer_cpu, wall, fresh))
            r = rows[-1]
            print(f"{kind} {len(rows)}/{len(texts)} {r['words']}w {r['level']}: {r['length']} features, "
                  f"{r['queries']} queries, {r['explainer_cpu_s']:.1f}s CPU, fresh {r['fresh_precision']}",
                  file=sys.stderr, flush=True)  # fmt: skip
    return rows


async def _row(
    explainer: AnchorsExplainer, exp: Any, text: str, topic: str, cpu: float, wall: float, fresh: int
) -> dict[str, Any]:
    d, m = exp.data, exp.meta
    coarse = d.coarse.positions if d.coarse is not None else None
    precision = await explainer.estimate_precision(text, d.positions, coarse=coarse, n=fresh) if fresh else None
    level = (
        "words in sentences" if d.coarse is not None else "sentences" if "each sentence" in d.perturbation else "words"
    )
    return {
        "words": sum(1 for _ in WORD.finditer(text)),
        "topic": topic,
        "label": d.label,
        "level": level,
        "coarse": list(d.coarse.anchor) if d.coarse is not None else None,
        "coarse_length": len(d.coarse.anchor) if d.coarse is not None else None,
        "anchor": list(d.anchor),
        "length": len(d.anchor),
        "success": d.success,
        "queries": m.queries,
        "samples": m.samples,
        "explainer_cpu_s": cpu,
        "cpu_ms_per_query": 1000 * cpu / max(m.queries, 1),
        "wall_s": wall,
        "fresh_precision": precision,
        "coverage": d.coverage,
        "claim": exp.claim,
    }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The targets' figures: non-empty share, median size, fresh precision ≥ 0.90, queries, CPU."""
    non_empty = [r for r in rows if r["length"]]
    fresh = [r["fresh_precision"] for r in rows if r["fresh_precision"] is not None]
    return {
        "n": len(rows),
        "non_empty": len(non_empty) / len(rows),
        "empty": 1 - len(non_empty) / len(rows),
        "median_length": statistics.median(r["length"] for r in rows),
        "median_length_non_empty": statistics.median(r["length"] for r in non_empty) if non_empty else None,
        "length_non_empty": ci([r["length"] for r in non_empty]),
        "coverage_non_empty": ci([r["coverage"] for r in non_empty]),
        "fresh_at_least_0.90": float(np.mean([p >= 0.90 for p in fresh])) if fresh else None,
        "fresh_at_least_0.95": float(np.mean([p >= 0.95 for p in fresh])) if fresh else None,
        "queries": ci([r["queries"] for r in rows]),
        "cpu_ms_per_query": sum(r["explainer_cpu_s"] for r in rows) * 1000 / max(sum(r["queries"] for r in rows), 1),
        "levels": {level: sum(r["level"] == level for r in rows) for level in LEVELS},
        "success": float(np.mean([r["success"] for r in rows])),
    }


def bbc_table(runs: dict[str, dict[str, Any]], title: str) -> str:
    lines = [
        f"### {title}",
        "",
        "| explainer | N | non-empty | median size (non-empty) | coverage, non-empty | fresh ≥ 0.90 | fresh ≥ 0.95 "
        "| paid queries / article | CPU ms / query | levels: words in sentences / sentences / words |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for kind, run in runs.items():
        s = run["summary"]
        lv = s["levels"]
        lines.append(
            f"| {kind} | {s['n']} | {s['non_empty']:.0%} | {s['median_length_non_empty']} "
            f"| {s['coverage_non_empty']['mean']:.3f} | {s['fresh_at_least_0.90']:.0%} "
            f"| {s['fresh_at_least_0.95']:.0%} "
            f"| {s['queries']['mean']:,.0f} ± {s['queries']['ci95']:,.0f} | {s['cpu_ms_per_query']:.2f} "
            f"| {lv['words in sentences']} / {lv['sentences']} / {lv['words']} |"
        )
    return "\n".join(lines)


def run_bbc(args: argparse.Namespace) -> None:
    model, accuracy = train_bbc_rf(data=args.data)
    texts, topics = load_bbc_news(args.split, args.data)
    order = [int(i) for i in shuffled(len(texts), args.shuffle_seed)[: args.n]]
    runs: dict[str, dict[str, Any]] = {}
    for kind in args.explainers.split(","):
        rows = asyncio.run(
            explain_articles(kind, model, [texts[i] for i in order], [topics[i] for i in order], args.fresh_samples)
        )
        runs[kind] = {"rows": rows, "summary": summary(rows)}
    title = f"BBC News {args.split}, N={len(order)} articles, random forest (val accuracy {accuracy:.3f}), defaults"
    print(bbc_table(runs, title))
    path = write_json(
        f"documents_bbc_{args.split}_n{args.n}", {"params": vars(args), "accuracy": accuracy, "runs": runs}
    )
    print(f"\nwrote {path}")


# -- the cost curve ------------------------------------------------------------------------


def texts_of_length(words: int, count: int, data: str | None, mixed: bool = False) -> list[tuple[str, str]]:
    """``count`` texts of ``words`` words (and the topic they start with): the first words of val articles of
    one topic each, joined by blank lines when one is too short; ``mixed``: the val articles in file order
    (topics mixed), from the ``count``-th article on, so that a long text's label rests on some of it."""
    articles, topics = load_bbc_news("val", data)
    out = []
    for k, topic in enumerate(BBC_TOPICS[:count]):
        joined = "\n\n".join(a for a, t in zip(articles, topics, strict=True) if t == topic)
        if mixed:
            joined, topic = "\n\n".join(articles[k * 7 :]), topics[k * 7]
        ends = [m.end() for m in WORD.finditer(joined)]
        out.append((joined[: ends[min(words, len(ends)) - 1]], topic))
    return out


def curve_point(args: argparse.Namespace) -> dict[str, Any]:
    """One (explainer, length) point, in this process: its rows and its peak memory."""
    model, _ = train_bbc_rf(data=args.data)
    pairs = texts_of_length(args.point_words, args.per_length, args.data, args.texts == "mixed")
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = asyncio.run(explain_articles(args.point_kind, model, [t for t, _ in pairs], [c for _, c in pairs], 1000))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"words": args.point_words, "explainer": args.point_kind, "rows": rows, "peak_rss_mb": peak,
            "baseline_rss_mb": baseline}  # fmt: skip


def run_curve(args: argparse.Namespace) -> None:
    points = []
    for kind in args.explainers.split(","):
        for words in (int(w) for w in args.words.split(",")):
            command = [sys.executable, "-m", "benchmarks.documents", "curve", "--point-kind", kind, "--point-words",
                       str(words), "--per-length", str(args.per_length), "--texts", args.texts]  # fmt: skip
            if args.data:
                command += ["--data", args.data]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            point = json.loads(done.stdout.strip().splitlines()[-1])
            points.append(point)
            print(f"{kind:9s} {words:5d} words: {_curve_cells(point)}", flush=True)
    print(curve_table(points))
    path = write_json(f"documents_curve_{args.texts}_{args.per_length}", {"params": vars(args), "points": points})
    print(f"\nwrote {path}")
    plot_curve(points, path.with_suffix(".png"))


def _curve_cells(point: dict[str, Any]) -> str:
    rows = point["rows"]
    queries = np.mean([r["queries"] for r in rows])
    cpu = sum(r["explainer_cpu_s"] for r in rows) * 1000 / max(sum(r["queries"] for r in rows), 1)
    sizes = "/".join(str(r["length"]) for r in rows)
    levels = "/".join({"words in sentences": "w∈s", "sentences": "s", "words": "w"}[r["level"]] for r in rows)
    fresh = "/".join(f"{r['fresh_precision']:.2f}" for r in rows)
    cpu_s = max(r["explainer_cpu_s"] for r in rows)
    return (f"{queries:,.0f} | {cpu:.2f} | {cpu_s:.1f} | {point['peak_rss_mb']:,.0f} | {sizes} | {levels} "
            f"| {fresh}")  # fmt: skip


CURVE_HEADER = (
    "| explainer | words | paid queries (mean) | explainer CPU ms / query | most explainer CPU s | peak RSS MB "
    "| anchor sizes | levels | fresh precision |",
    "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
)


def curve_table(points: Sequence[dict[str, Any]]) -> str:
    return markdown_table(CURVE_HEADER, (f"| {p['explainer']} | {p['words']:,} | {_curve_cells(p)} |" for p in points))


def plot_curve(points: Sequence[dict[str, Any]], path: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for kind in sorted({p["explainer"] for p in points}):
        mine = [p for p in points if p["explainer"] == kind]
        words = [p["words"] for p in mine]
        queries = [np.mean([r["queries"] for r in p["rows"]]) for p in mine]
        cpu = [sum(r["explainer_cpu_s"] for r in p["rows"]) * 1000 / max(sum(r["queries"] for r in p["rows"]), 1)
               for p in mine]  # fmt: skip
        for ax, values in zip(axes, (queries, cpu, [p["peak_rss_mb"] for p in mine]), strict=True):
            ax.plot(words, values, marker="o", label=kind)
    for ax, title in zip(axes, ("paid queries / text", "explainer CPU ms / query", "peak RSS MB"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("words")
        ax.set_title(title, fontsize=10)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)


# -- the embedded LLM ------------------------------------------------------------------------


def first_words(text: str, words: int) -> str:
    ends = [m.end() for m in WORD.finditer(text)]
    return text[: ends[min(words, len(ends)) - 1]]


async def llm_rows(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    from llm_anchors.backends.llamacpp import embedded_classifier

    texts, topics = load_bbc_news(args.split, args.data)
    order = [int(i) for i in shuffled(len(texts), args.shuffle_seed)[: args.n]]
    cut = [first_words(texts[i], args.words) for i in order]
    clf = embedded_classifier(base_url, prompt=TOPIC_PROMPT, labels=LLM_TOPICS)
    predicted = [str(label) for i in range(0, len(cut), 8) for label in (await clf.classify(cut[i : i + 8])).labels]
    accuracy = float(
        np.mean([p.replace("technology", "tech") == topics[i] for p, i in zip(predicted, order, strict=True)])
    )
    rows = []
    async with MAnchorsExplainer(clf, seed=args.seed, max_concurrency=8) as explainer:
        for text, i in zip(cut, order, strict=True):
            cpu, started = time.process_time(), time.perf_counter()
            exp = await explainer.explain(text)
            row = await _row(
                explainer, exp, text, topics[i], time.process_time() - cpu, time.perf_counter() - started, 0
            )
            rows.append(row)
            print(f"{len(rows)}/{len(cut)} {row['wall_s']:.0f}s {exp}", flush=True)
    return {"accuracy": accuracy, "predicted": predicted, "rows": rows}


def run_llm(args: argparse.Namespace) -> None:
    from llm_anchors.backends.llamacpp import LlamaServer

    with LlamaServer(ctx=args.ctx) as server:
        result = asyncio.run(llm_rows(args, server.base_url))
    rows = result["rows"]
    s = summary(rows) if rows else {}
    print(
        f"\n| model | articles | accuracy | certified | non-empty | median size (non-empty) | paid queries / article "
        "| wall s / article |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        f"| Gemma 3 270M, 5 labels, first {args.words} words | {len(rows)} | {result['accuracy']:.0%} "
        f"| {s['success']:.0%} | {s['non_empty']:.0%} | {s['median_length_non_empty']} "
        f"| {s['queries']['mean']:,.0f} | {np.mean([r['wall_s'] for r in rows]):.0f} |"
    )
    path = write_json(f"documents_llm_{args.split}_n{args.n}_w{args.words}", {"params": vars(args), **result,
                                                                             "summary": s})  # fmt: skip
    print(f"\nwrote {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["bbc", "curve", "llm"])
    parser.add_argument("--split", default="val", choices=["train", "val"])
    parser.add_argument("--n", type=int, default=100, help="articles (bbc, llm)")
    parser.add_argument("--explainers", default="manchors,anchors")
    parser.add_argument("--fresh-samples", type=int, default=1000)
    parser.add_argument("--shuffle-seed", type=int, default=42)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--words", default="10,30,100,300,1000,2000", help="curve: lengths; llm: one length")
    parser.add_argument("--per-length", type=int, default=3, help="curve: texts per length (one topic each)")
    parser.add_argument(
        "--texts", default="one-topic", choices=["one-topic", "mixed"], help="curve: articles of one topic, or mixed"
    )
    parser.add_argument("--point-kind", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--point-words", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ctx", type=int, default=8192, help="llm: llama-server's context (shared by 8 slots)")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    if args.what == "curve" and args.point_kind is not None:
        print(json.dumps(curve_point(args), default=float))
    elif args.what == "curve":
        run_curve(args)
    elif args.what == "llm":
        args.words = int(args.words.split(",")[0]) if "," not in args.words else 150
        run_llm(args)
    else:
        run_bbc(args)


if __name__ == "__main__":
    main()
