"""Anchors vs MAnchors on the same stream, same classifier, same seed, one run.

    python -m benchmarks.stream --n 1000                      # TF-IDF + random forest
    python -m benchmarks.stream --classifier llm --n 40       # the embedded local LLM
    python -m benchmarks.stream --classifier llm --base-url URL --model M   # any OpenAI-compatible server
    python -m benchmarks.stream --n 200 --sweep               # τ_sim × τ_mid heat-maps
    python -m benchmarks.stream --n 2000 --report-at 1000     # a long stream: tables at 1,000 and 2,000
    python -m benchmarks.stream --n 500 --tuning              # the held-out tuning stream (see below)
    python -m benchmarks.stream --n 1000 --reference          # every explainer at the reference Anchors settings
    python -m benchmarks.stream --n 1000 --oracle FILE --set use_memory=false   # what any memory could save

RT-Polarity sentences in a seeded order (seed 42). ``--tuning`` explains
instead the inputs that the first 1,000 of that order (120 for the LLM)
leave out, in another order (seed 7): settings are chosen there, the
tables are reported on the seed-42 stream. MAnchors runs once per
``--strategy`` ("guided" and "paper" by default), against one Anchors run.
Metrics as the paper
defines them: speedup = Σ time Anchors / Σ time MAnchors; sampling
reduction = 1 − Σ samples MAnchors / Σ samples Anchors. Also paid queries
(cache hits excluded), tokens, dollars at a hosted model's price
(``--price-model``), and fidelity: precision on 1,000 fresh samples per
anchor, coverage (10,000-sample pool), anchor length, with 95% CIs. Writes
a markdown table, JSON with every row, and PNG plots; for MAnchors also how
memory size, lookup time, per-input time and RSS grow along the stream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from llm_anchors import AnchorsExplainer, FunctionClassifier, LLMClassifier, MAnchorsExplainer, QueryCache
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.extend import BaseClassifier, Batch, Classifier
from llm_anchors.propose import GrowthParams, GuidedParams, RecordParams
from llm_anchors.samplers import SentenceEmbedder
from llm_anchors.samplers.words import WORD

from ._common import (
    add_comparison_args,
    compare,
    explain_rows,
    parse_value,
    plots,
    run_suffix,
    search_settings,
    short_order,
    tau_sim,
    with_memory,
    write_json,
)
from ._models import train_text_rf, train_youtube_rf
from .ceiling import oracle, oracle_answers, told_length
from .stream_tables import PAPER, growth, growth_markdown, growth_plot, heatmaps, markdown, stages_by_outcome

SWEEP_SIM = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
SWEEP_MID = (0.6, 0.7, 0.8, 0.9)
TUNING_SEED = 7

MakeClassifier = Callable[[str], Classifier]
ServerRss = Callable[[], float] | None


@contextlib.contextmanager
def classifiers(
    args: argparse.Namespace,
) -> Iterator[tuple[MakeClassifier, list[str], list[int], Callable[[], float] | None]]:
    """A factory of classifiers (one per explainer: no shared cache), the texts, the stream's order,
    and the resident memory of the local model server, when one runs here."""
    if args.dataset == "youtube":  # a spam filter trained on two videos; the others' comments, in file order
        if args.classifier != "rf":
            raise SystemExit("--dataset youtube explains the TF-IDF + RF spam filter (--classifier rf)")
        model, texts, _, _ = train_youtube_rf(data=args.data, tuning=args.tuning)
        words = [len(WORD.findall(t)) for t in texts]  # a comment of emoji alone has nothing to explain
        order = [i for i in range(len(texts)) if 0 < words[i] <= args.max_words][: args.n]
        yield (lambda name: forest(model, f"youtube-rf-{name}", args)), texts, order, None
        return
    if args.classifier == "rf":
        model, texts, _ = train_text_rf(data=args.data)
        order = stream_order(texts, args, held_out=1000)
        yield (lambda name: forest(model, f"tfidf-rf-{name}", args)), texts, order, None
        return
    from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT, LlamaServer
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend

    texts, _ = load_rt_polarity(args.data)
    order = stream_order(texts, args, held_out=120)
    with contextlib.ExitStack() as stack:
        server = None if args.base_url else stack.enter_context(LlamaServer())
        url = args.base_url or server.base_url  # type: ignore[union-attr]

        memo = QueryCache(args.memo_labels) if args.memo_labels else None

        def make(name: str) -> Classifier:
            backend = OpenAICompatibleBackend(url, args.model, max_request_size=8)
            llm = LLMClassifier(backend, DEFAULT_PROMPT, DEFAULT_LABELS)
            if memo is not None:
                return MemoLabels(llm, memo, args.labels_only)
            return LabelsOnly(llm) if args.labels_only else llm

        yield make, texts, order, (server.rss_mb if server is not None else None)


def forest(model: Any, name: str, args: argparse.Namespace) -> FunctionClassifier:
    """The random forest as a classifier: its labels, and its probabilities unless ``--labels-only``."""
    proba = None if args.labels_only else model.predict_proba
    return FunctionClassifier(model.predict, predict_proba=proba, name=name)


class Fronted(BaseClassifier):
    """A classifier in front of the LLM: the LLM's identity, request size and close."""

    def __init__(self, llm: LLMClassifier) -> None:
        self.llm = llm

    @property
    def identity(self) -> str:
        return self.llm.identity

    @property
    def max_request_size(self) -> int | None:
        return self.llm.max_request_size

    async def aclose(self) -> None:
        await self.llm.aclose()


class LabelsOnly(Fronted):
    """The LLM's labels without its probabilities (``--labels-only``: the search as for a model that
    gives none)."""

    async def classify(self, texts: Sequence[str]) -> Batch:
        return replace(await self.llm.classify(texts), probabilities=None)


class MemoLabels(Fronted):
    """The LLM behind a persistent label memo, for tuning runs (``--memo-labels``).

    Each explainer still has its own query cache, so its paid queries are
    counted as without the memo; the memo only spares the local LLM from
    answering a text that an earlier run already asked (with its probabilities, unless
    ``labels_only``). Tokens, dollars and times of texts answered by the memo are not measured.
    """

    def __init__(self, llm: LLMClassifier, memo: QueryCache, labels_only: bool = False) -> None:
        super().__init__(llm)
        self.memo, self.labels_only = memo, labels_only

    async def classify(self, texts: Sequence[str]) -> Batch:
        known = {t: self.memo.answer(self.identity, t) for t in texts}
        missing = [t for t, a in known.items() if a is None or (a[1] is None and not self.labels_only)]
        batch = await self.llm.classify(missing) if missing else Batch([])
        given = batch.probabilities or [None] * len(missing)
        self.memo.put_many(self.identity, zip(missing, batch.labels, strict=True), given)
        answers = {t: (label, p) for t, label, p in zip(missing, batch.labels, given, strict=True)}
        answers |= {t: a for t, a in known.items() if a is not None and t not in answers}
        got = [answers[t] for t in texts]
        probabilities = None if self.labels_only else [p for _, p in got]
        return Batch([label for label, _ in got], batch.charge, probabilities=probabilities)


def stream_order(texts: list[str], args: argparse.Namespace, held_out: int) -> list[int]:
    """The inputs to explain: the seeded order (``--shuffle-seed``) of texts of at most
    ``--max-words`` words, or with ``--tuning`` those the first ``held_out`` of it leave
    out, in the order of seed 7."""

    if not args.tuning:
        return short_order(texts, args.shuffle_seed, args.max_words)[: args.n]
    reported = set(short_order(texts, args.shuffle_seed, args.max_words)[:held_out])
    return [i for i in short_order(texts, TUNING_SEED, args.max_words) if i not in reported][: args.n]


async def run_anchors(
    make: MakeClassifier, stream: list[str], order: list[int], args: argparse.Namespace, rss: ServerRss = None
) -> list[dict[str, Any]]:
    """Plain Anchors over the stream (its cache is released before MAnchors runs)."""
    async with AnchorsExplainer(make("anchors"), seed=args.seed, **search_settings(args)) as plain:
        return await explain_rows(
            plain, stream, order, args.fresh_samples, label="Anchors", verbose=args.verbose, server_rss=rss
        )


Setting = tuple[str, float, float]
"""A MAnchors run: (strategy, τ_sim, τ_mid)."""


async def run_manchors(
    make: MakeClassifier,
    stream: list[str],
    order: list[int],
    args: argparse.Namespace,
    setting: Setting,
    rss: ServerRss = None,
    proposers: list[Any] | None = None,
) -> list[dict[str, Any]]:
    strategy, tau_sim, tau_mid = setting
    embedder = SentenceEmbedder(pooling=args.pooling)
    embedder.embed(["warm up"])  # loading the model is a one-off, not a per-input cost
    options = dict(strategy=strategy, tau_sim=tau_sim, tau_mid=tau_mid, embedder=embedder, **search_settings(args))
    options.update(manchors_options(args))
    if proposers:
        options["proposers"] = proposers  # a measuring device's (`measuring_device`)
    name = f"manchors-{strategy}-{tau_sim}-{tau_mid}"
    async with MAnchorsExplainer(make(name), seed=args.seed, **with_memory(options)) as m:
        label = f"MAnchors {strategy} τ_sim {tau_sim} τ_mid {tau_mid}"
        return await explain_rows(
            m, stream, order, args.fresh_samples, label=label, verbose=args.verbose, server_rss=rss
        )


def measuring_device(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Any] | None:
    """The proposer ``--oracle`` or ``--told-length`` asks for (see `benchmarks.ceiling`), its file read
    now: one that is not a stream result is a usage error before any query, not a traceback after
    Anchors' run."""
    path = args.oracle or args.told_length
    if path is None:
        return None
    try:
        answers = oracle_answers(path, seen_only=bool(args.oracle and args.oracle_seen))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        parser.error(f"cannot read the anchors of {path}: {type(exc).__name__}: {exc}")
    return [oracle(answers) if args.oracle else told_length(answers)]


def settings(args: argparse.Namespace, strategies: list[str]) -> list[Setting]:
    """The MAnchors runs: each strategy at its τ_sim (or over the sweep's grid)."""
    if args.sweep:
        return [(strategy, s, mm) for strategy in strategies for s in SWEEP_SIM for mm in SWEEP_MID]
    return [(strategy, tau_sim(args, strategy), args.tau_mid) for strategy in strategies]


def manchors_options(args: argparse.Namespace) -> dict[str, Any]:
    """MAnchors' options of this run: every ``--set name=value`` (numbers parsed; "none"
    is None, "true" and "false" booleans; a `MemoryParams` field (``tau_first=0.5``) and ``record.NAME`` go into
    its ``memory``, ``use_memory=false`` is ``memory=None`` (`with_memory`); ``guided.NAME`` a field of `GuidedParams`,
    ``growth.NAME`` of `GrowthParams`, ``record.NAME`` of `RecordParams`, ``search.NAME`` of the run's
    `SearchParams`)."""
    out: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {"guided": {}, "growth": {}, "record": {}, "search": {}}
    for item in args.set:
        name, _, text = item.partition("=")
        value = parse_value(text)
        group, _, field_name = name.partition(".")
        if field_name and group in nested:
            nested[group][field_name] = value
        else:
            out[name] = value
    if nested["guided"]:
        out["guided"] = GuidedParams(**nested["guided"])
    if nested["growth"]:
        out["growth"] = GrowthParams(**nested["growth"])
    if nested["record"]:
        out["record"] = RecordParams(**nested["record"])
    if nested["search"]:
        out["search"] = replace(search_settings(args)["search"], **nested["search"])
    return out


async def run(args: argparse.Namespace, proposers: list[Any] | None = None) -> dict[str, Any]:
    with classifiers(args) as (make, texts, order, rss):
        stream = [texts[i] for i in order]
        if args.anchors_from:
            a = json.loads(Path(args.anchors_from).read_text())["rows"]["anchors"][: len(order)]
            assert [r["index"] for r in a] == order, "--anchors-from holds another stream"
        else:
            a = await run_anchors(make, stream, order, args, rss)
        strategies = [s.strip() for s in args.strategy.split(",") if s.strip()]
        runs = {}
        for setting in settings(args, strategies):
            print(f"--- manchors {setting}", flush=True)
            runs[setting] = await run_manchors(make, stream, order, args, setting, rss, proposers)
    return {"anchors": a, "manchors": runs}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", choices=["rf", "llm"], default="rf")
    parser.add_argument(
        "--dataset", choices=["rt", "youtube"], default="rt",
        help="rt: RT-Polarity (diverse); youtube: comments a spam filter trained on two videos judges, of the "
        "others (templated; --tuning: LMFAO's, else Eminem's and Shakira's), in file order",
    )  # fmt: skip
    parser.add_argument("--base-url", default=None, help="with --classifier llm: an OpenAI-compatible server")
    parser.add_argument("--model", default="gemma-3-270m-q4_k_m")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--max-words", type=int, default=10_000, help="with llm: only sentences this short")
    add_comparison_args(parser)
    parser.add_argument("--pooling", choices=["sentence", "words"], default="words", help="memory embedding")
    parser.add_argument(
        "--price-model", default="gpt-4o-mini", help="a model genai-prices knows (its price for the table)"
    )
    parser.add_argument("--strategy", default="guided,paper", help="MAnchors strategies to run, comma-separated")
    parser.add_argument(
        "--set", action="append", default=[],
        help="a MAnchors option for tuning: tau_sim=1.0, growth.lookahead=0.9 (none: None)",
    )  # fmt: skip
    parser.add_argument(
        "--anchors-from", default=None, help="Anchors' rows from an earlier run of this stream (JSON), not run again"
    )
    device = parser.add_mutually_exclusive_group()
    device.add_argument(
        "--oracle", default=None,
        help="a result file of this stream: MAnchors is proposed each input's anchor from it first (the ceiling "
        "of any memory; see benchmarks.ceiling)",
    )  # fmt: skip
    device.add_argument(
        "--told-length", default=None,
        help="a result file of this stream: growth is told how many words each input's anchor has in it (see "
        "benchmarks.ceiling)",
    )  # fmt: skip
    parser.add_argument(
        "--oracle-seen", action="store_true", help="with --oracle: only anchors an earlier input of the stream had"
    )
    parser.add_argument("--memo-labels", default=None, help="with llm: a SQLite file of labels reused across runs")
    parser.add_argument(
        "--labels-only",
        action="store_true",
        help="the model's labels alone, not its probabilities (which guide the search on fewer samples)",
    )
    parser.add_argument("--tuning", action="store_true", help="the held-out tuning stream (settings are chosen there)")
    parser.add_argument("--sweep", action="store_true", help="τ_sim × τ_mid grid (the paper's)")
    parser.add_argument("--report-at", default="", help="also tables for these stream prefixes, e.g. 1000")
    parser.add_argument("--growth-every", type=int, default=0, help="growth table window (default N/10)")
    parser.add_argument("--verbose", action="store_true", help="a line per explanation")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    proposers = measuring_device(parser, args)
    started = time.perf_counter()
    rows = asyncio.run(run(args, proposers))
    a = rows["anchors"]
    dataset = "_youtube" if args.dataset == "youtube" else ""
    stem = (f"stream{dataset}_{args.classifier}_{args.pooling}_n{len(a)}" + ("_tuning" if args.tuning else "")
            + run_suffix(args))  # fmt: skip
    stem += "_told_length" if args.told_length else ""
    stem += ("_oracle_seen" if args.oracle_seen else "_oracle") if args.oracle else ""
    stem += "_reference" if args.reference else ""
    stem += "_labelsonly" if args.labels_only else ""
    results = {k: compare(a, m, args.price_model) for k, m in rows["manchors"].items()}
    main_runs = {k[0]: m for k, m in rows["manchors"].items() if k[1:] == (tau_sim(args, k[0]), args.tau_mid)}
    main_runs = main_runs or {f"{k[0]} {k[1]}/{k[2]}": m for k, m in rows["manchors"].items()}
    prefixes = sorted({int(k) for k in args.report_at.split(",") if k.strip() and int(k) < len(a)})
    at = {k: {name: compare(a[:k], m[:k], args.price_model) for name, m in main_runs.items()} for k in prefixes}
    for k, table in at.items():
        print()
        print(markdown(table, args, k))
    print()
    print(markdown({name: compare(a, m, args.price_model) for name, m in main_runs.items()}, args, len(a)))
    print("\nWhere the samples go, per stage (mean per input)\n")
    print(stages_by_outcome(a, main_runs))
    first, m = next(iter(main_runs.items()))
    grown = growth(m, args.growth_every or max(1, len(m) // 10))
    print(f"\nMAnchors ({first}) as the memory grows\n")
    print(growth_markdown(grown))
    path = write_json(
        stem,
        {
            "params": vars(args),
            "total_time_s": time.perf_counter() - started,
            "paper": PAPER[args.classifier],
            "results": [{"strategy": k[0], "tau_sim": k[1], "tau_mid": k[2], **v} for k, v in results.items()],
            "prefixes": [{"n": k, "results": v} for k, v in at.items()],
            "growth": grown,
            "rows": {"anchors": a, "manchors": [{"strategy": k[0], "tau_sim": k[1], "tau_mid": k[2], "rows": v}
                                                 for k, v in rows["manchors"].items()]},
        },
    )  # fmt: skip
    pngs = [*plots(a, m, stem), growth_plot(grown, stem)]  # after the rows are safe
    if args.sweep:
        strategy = next(iter(rows["manchors"]))[0]
        pngs.append(heatmaps({k[1:]: v for k, v in results.items() if k[0] == strategy}, stem))
    print("\nwrote " + ", ".join(str(p) for p in [path, *pngs]))


if __name__ == "__main__":
    main()
