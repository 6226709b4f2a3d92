"""Shared pieces of the benchmarks: summaries, tables, JSON output."""

from __future__ import annotations

import argparse
import json
import math
import platform
import resource
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, fields
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from llm_anchors import AnchorsExplainer, ConfigError, MAnchorsExplainer, SearchParams
from llm_anchors.datasets import shuffled
from llm_anchors.explain import ProgressBar
from llm_anchors.money import Charge, price_for
from llm_anchors.propose import MemoryParams

RESULTS = Path(__file__).resolve().parent / "results"
FIDELITY = ("fresh_precision", "coverage", "length")
TAU = 0.95  # the benchmarks' precision threshold (the explainers' default)


def short_order(texts: Sequence[str], seed: int, max_words: int) -> list[int]:
    """The indices of ``texts`` in the seeded order, keeping texts of at most ``max_words`` words."""
    return [int(i) for i in shuffled(len(texts), seed) if len(texts[i].split()) <= max_words]


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% normal confidence interval."""
    arr = np.asarray(values, dtype=float)
    if len(arr) == 0:
        return math.nan, math.nan
    half = 1.96 * arr.std(ddof=1) / math.sqrt(len(arr)) if len(arr) > 1 else math.nan
    return float(arr.mean()), float(half)


def ci(values: Sequence[float]) -> dict[str, float]:
    """`mean_ci` as the summaries record it: {"mean", "ci95"}."""
    mean, half = mean_ci(values)
    return {"mean": mean, "ci95": half}


def summarize(rows: list[dict[str, Any]], keys: Sequence[str]) -> dict[str, dict[str, float]]:
    return {key: ci([r[key] for r in rows]) for key in keys}


def empty_share(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The share of rows whose anchor is empty, with its CI."""
    return ci([float(not r["length"]) for r in rows])


def anchor_shape(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The share of empty anchors, and coverage and length over the non-empty ones (beside the overall means)."""
    non_empty = [r for r in rows if r["length"]]
    return {
        "empty": empty_share(rows),
        **{f"{k}_non_empty": ci([r[k] for r in non_empty]) for k in ("coverage", "length")},
    }


def markdown_table(header: Sequence[str], rows: Iterable[str]) -> str:
    """A markdown table: its header lines (the titles, the alignment), then a line per row."""
    return "\n".join([*header, *rows])


def table(summary: dict[str, dict[str, float]], title: str) -> str:
    """A markdown table of metric | mean ± 95% CI."""
    lines = [f"### {title}", "", "| metric | mean | ± 95% CI |", "| --- | ---: | ---: |"]
    for key, value in summary.items():
        lines.append(f"| {key} | {value['mean']:.4g} | {value['ci95']:.2g} |")
    return "\n".join(lines)


def result_path(filename: str, out: Path | None = None) -> Path:
    """Where a result file goes: ``out`` (or benchmarks/results, which a fresh checkout does not have),
    the folder made if missing, so that a long run is not lost at its end."""
    folder = out or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    return folder / filename


def write_json(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        **payload,
    }
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    return path


def add_comparison_args(parser: argparse.ArgumentParser) -> None:
    """The options every Anchors-vs-MAnchors benchmark shares (seeds, τ_sim, τ_mid, fresh samples)."""
    parser.add_argument("--seed", type=int, default=0, help="explainer seed")
    parser.add_argument("--shuffle-seed", type=int, default=42, help="seed of the input order")
    parser.add_argument("--tau-sim", type=float, default=None, help="default: the strategy's (guided 0.4, paper 0.6)")
    parser.add_argument("--tau-mid", type=float, default=0.8)
    parser.add_argument("--fresh-samples", type=int, default=1000, help="samples per anchor to re-estimate precision")
    parser.add_argument("--reference", action="store_true", help="the reference Anchors settings (root 1, all arms)")
    parser.add_argument("--certify", choices=["default", "strict"], default="default", help="the explainers' certify")
    parser.add_argument("--arms", choices=["top", "plausible"], default="top", help="the explainers' arms")


def with_memory(options: dict[str, Any]) -> dict[str, Any]:
    """MAnchors' keywords from a benchmark's flat options: the memory's (``tau_sim``, ``tau_mid``,
    ``record``, ...) gathered into ``memory=MemoryParams(...)``, ``use_memory=False`` as ``memory=None``."""
    names = {f.name for f in fields(MemoryParams)}
    out = {k: v for k, v in options.items() if k not in names and k != "use_memory"}
    on = options.get("use_memory", True)
    out["memory"] = MemoryParams(**{k: v for k, v in options.items() if k in names}) if on else None
    return out


def tau_sim(args: argparse.Namespace, strategy: str) -> float:
    """τ_sim of a run: ``--tau-sim``, else the strategy's default."""
    return float(args.tau_sim) if args.tau_sim is not None else MAnchorsExplainer.default_tau_sim[strategy]


def run_suffix(args: argparse.Namespace) -> str:
    """What sets a run apart from the default one, for its file names: "_paper", "_reference"."""
    paper = "_paper" if getattr(args, "strategy", "guided") == "paper" else ""
    strict = "_strict" if getattr(args, "certify", "default") == "strict" else ""
    plausible = "_plausible" if getattr(args, "arms", "top") == "plausible" else ""
    tuned = "".join(f"_{item.replace('=', '')}" for item in getattr(args, "set", []))
    return paper + ("_reference" if getattr(args, "reference", False) else "") + strict + plausible + tuned


def search_overrides(parser: argparse.ArgumentParser, items: Sequence[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` items as `SearchParams` fields, every value checked before anything runs;
    one that is not a field, not a value or refused by `SearchParams` is a usage error (exit 2)."""
    search: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            if name not in SearchParams.__dataclass_fields__:
                raise ValueError(name)
            search[name] = parse_value(value)
            SearchParams(**search)
        except (ValueError, TypeError, ConfigError) as e:
            parser.error(f"--set takes NAME=VALUE for a SearchParams field, got {item!r} ({e})")
    return search


def parse_value(text: str) -> Any:
    """A ``--set NAME=VALUE``'s value: "none" is None, "true" and "false" booleans, else an int or a float
    (a `ValueError` when it is none of these)."""
    words = {"none": None, "true": True, "false": False}
    if text.lower() in words:
        return words[text.lower()]
    try:
        return int(text)
    except ValueError:
        return float(text)


def search_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The search settings every explainer of a run shares: the defaults, or the reference implementation's."""
    reference: dict[str, Any] = {"min_samples_start": 1, "max_arms": None} if getattr(args, "reference", False) else {}
    chosen: dict[str, Any] = {"certify": getattr(args, "certify", "default"), "arms": getattr(args, "arms", "top")}
    return {"search": SearchParams(**reference, **chosen)}


def rss_mb() -> float:
    """This process's resident set size now (Linux), in MB; NaN where it cannot be read."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
    except OSError:
        return math.nan
    return int(fields[1]) * resource.getpagesize() / 2**20


ROW_METRICS = ("time_s", "samples", "queries", "cache_hits", "fresh_precision", "coverage", "length")


async def explain_rows(
    explainer: AnchorsExplainer,
    texts: Sequence[Any],
    indices: Sequence[int],
    fresh_samples: int = 1000,
    checkpoint: Path | None = None,
    *,
    label: str = "",
    verbose: bool = False,
    server_rss: Callable[[], float] | None = None,
) -> list[dict[str, Any]]:
    """Explain each text in turn; one row of measurements per explanation.

    The anchor's precision is re-estimated on ``fresh_samples`` perturbations
    drawn with another seed (their queries are not counted in the row).
    With ``checkpoint`` the rows so far are rewritten there after each one,
    so a long run that is stopped still leaves its measurements. A progress
    bar goes to stderr; ``verbose`` also prints one line per explanation.
    """
    rows = []
    bar = ProgressBar(len(texts), label=label)
    for i, (index, text) in enumerate(zip(indices, texts, strict=True)):
        started = time.perf_counter()
        exp = await explainer.explain(text)
        elapsed = time.perf_counter() - started
        coarse = exp.data.coarse.positions if exp.data.coarse is not None else None
        fresh = await explainer.estimate_precision(text, exp.data.positions, coarse=coarse, n=fresh_samples)
        row: dict[str, Any] = {
            "index": int(index),
            "text": exp.data.query,
            "words": len(exp.data.features),
            "anchor": list(exp.data.anchor),
            "success": exp.data.success,
            "label": exp.data.label,
            "time_s": elapsed,
            "samples": exp.meta.samples,
            "queries": exp.meta.queries,
            "cache_hits": exp.meta.cost.cache_hits,
            "prompt_tokens": exp.meta.cost.settled.prompt_tokens,
            "unparsed": exp.meta.unparsed,
            "precision": exp.data.precision,
            "fresh_precision": fresh,
            "coverage": exp.data.coverage,
            "length": len(exp.data.anchor),
            "memory_hit": exp.meta.memory_hit,
            "memory_similarity": exp.meta.memory.similarity if exp.meta.memory else None,
            "memory_repeat": bool(exp.meta.memory and exp.meta.memory.repeat),
            "memory_asked": exp.meta.memory.asked if exp.meta.memory else None,
            "memory_certified": bool(exp.meta.memory and exp.meta.memory.certified),
            "memory_saved": exp.meta.memory.saved if exp.meta.memory else 0.0,
            "memory_lookup_s": exp.meta.memory.lookup_s if exp.meta.memory else None,
            "memory_size": len(explainer.memory_proposer.local)
            if isinstance(explainer, MAnchorsExplainer) and explainer.memory_proposer
            else None,
            "completion_tokens": exp.meta.cost.settled.completion_tokens,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_mb": rss_mb(),
            "server_rss_mb": server_rss() if server_rss is not None else None,
            "cache_entries": len(explainer.cache),
            "stages": {name: asdict(stage) for name, stage in exp.meta.stages.items()},
            "certification_samples": exp.data.certified_samples or exp.data.n_samples,
            "tested": exp.data.tested,
        }
        rows.append(row)
        if checkpoint is not None:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            checkpoint.write_text(json.dumps(rows, indent=1, default=str) + "\n")
        bar.update(i, exp)
        if verbose:
            print(f"[{i + 1}/{len(texts)}] {elapsed:7.2f}s {exp.meta.samples:6d} samples  {exp}", flush=True)
    bar.close()
    return rows


def stage_group(stage: str) -> str:
    """The row of the per-stage table a stage name belongs to ("round-4" → "rounds 3+")."""
    kind, _, number = stage.partition("-")
    if kind == "round":
        return f"round {number}" if int(number) <= 2 else "rounds 3+"
    if kind == "verify":
        return "verification"
    if number == "probe":
        return f"{kind} probe"
    return kind


STAGE_ORDER = (
    "root", "start", "prune", "round 1", "round 2", "rounds 3+", "verification", "memory probe", "memory",
    "growth", "certify", "fallback",
)  # fmt: skip


def stage_totals(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Samples and paid queries per stage group, summed over rows (groups in `STAGE_ORDER` first)."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for stage, counts in row.get("stages", {}).items():
            group = out.setdefault(stage_group(stage), {"samples": 0, "queries": 0})
            group["samples"] += counts["samples"]
            group["queries"] += counts["queries"]
    known = [g for g in STAGE_ORDER if g in out]
    return {g: out[g] for g in [*known, *sorted(set(out) - set(known))]}


def stage_markdown(runs: Mapping[str, Sequence[dict[str, Any]]]) -> str:
    """A per-stage table: samples (share) and paid queries per stage, one column pair per run."""
    totals = {name: stage_totals(rows) for name, rows in runs.items()}
    groups = list(dict.fromkeys(g for t in totals.values() for g in t))
    head = " | ".join(f"{name}: samples (share) | paid queries" for name in runs)
    lines = [f"| stage | {head} |", "| --- |" + " ---: | ---: |" * len(runs)]
    for g in [*groups, "total"]:
        cells = []
        for name, rows in runs.items():
            t = totals[name]
            n = max(len(rows), 1)
            all_samples = sum(v["samples"] for v in t.values())
            v = t.get(g) if g != "total" else {
                "samples": all_samples, "queries": sum(v["queries"] for v in t.values())
            }  # fmt: skip
            if v is None:
                cells += ["", ""]
                continue
            share = v["samples"] / all_samples if all_samples else 0.0
            cells += [f"{v['samples'] / n:,.0f} ({share:.0%})", f"{v['queries'] / n:,.0f}"]
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n(per input: mean over the run's inputs)"


def compare(a: list[dict[str, Any]], m: list[dict[str, Any]], price_model: str) -> dict[str, Any]:
    """Paper metrics, cost and fidelity of one Anchors/MAnchors pair of runs."""
    price = price_for(price_model)

    def dollars(rows: list[dict[str, Any]]) -> str:
        prompt = sum(r["prompt_tokens"] for r in rows)
        completion = sum(r["completion_tokens"] for r in rows)
        usage = Charge(prompt_tokens=prompt, completion_tokens=completion)
        return str(price.cost(usage).quantize(Decimal("0.000001")))

    both = [(x, y) for x, y in zip(a, m, strict=True) if x["length"] and y["length"]]  # both anchors non-empty
    out: dict[str, Any] = {
        "both_non_empty": len(both),
        "speedup": sum(r["time_s"] for r in a) / sum(r["time_s"] for r in m),
        "sampling_reduction": 1 - sum(r["samples"] for r in m) / sum(r["samples"] for r in a),
        "memory_hits": sum(bool(r["memory_hit"]) for r in m),
    }
    for side, (name, rows) in enumerate((("anchors", a), ("manchors", m))):
        paired = [pair[side] for pair in both]
        out[name] = {
            "empty": empty_share(rows),
            **{f"{k}_both_non_empty": ci([r[k] for r in paired]) for k in ("coverage", "length")},
            "time_s": sum(r["time_s"] for r in rows),
            "samples": sum(r["samples"] for r in rows),
            "paid_queries": sum(r["queries"] for r in rows),
            "inputs": len(rows),
            "certification_samples": sum(r.get("certification_samples", 0) for r in rows),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            f"usd_at_{price_model}": dollars(rows),
            "stages": stage_totals(rows),
            **{k: ci([r[k] for r in rows]) for k in FIDELITY},
            "below_tau": ci([float(r["fresh_precision"] < TAU) for r in rows]),
        }
    return out


def plots(a: list[dict[str, Any]], m: list[dict[str, Any]], stem: str, out: Path | None = None) -> list[Path]:
    """Cumulative mean time and samples per input (the paper's appendix figures), and distributions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(1, len(a) + 1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in ((axes[0], "time_s", "time per input (s)"), (axes[1], "samples", "samples per input")):
        for rows, label in ((a, "Anchors"), (m, "MAnchors")):
            values = np.array([r[key] for r in rows], dtype=float)
            ax.plot(x, np.cumsum(values) / x, label=label)
        ax.set_xlabel("inputs explained")
        ax.set_ylabel(f"cumulative mean {title}")
        ax.legend()
    fig.tight_layout()
    first = result_path(f"{stem}_cumulative.png", out)
    fig.savefig(first, dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, bins in ((axes[0], "coverage", np.linspace(0, 1, 21)), (axes[1], "length", None)):
        data = [[r[key] for r in rows] for rows in (a, m)]
        if bins is None:
            bins = np.arange(-0.5, max(max(d) for d in data) + 1.5)
        ax.hist(data, bins=bins, label=["Anchors", "MAnchors"])
        ax.set_xlabel(f"anchor {key}")
        ax.set_ylabel("inputs")
        ax.legend()
    fig.tight_layout()
    second = result_path(f"{stem}_distributions.png", out)
    fig.savefig(second, dpi=110)
    plt.close(fig)
    return [first, second]
