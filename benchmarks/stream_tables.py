"""The tables and figures of `benchmarks.stream`: the comparison table, the samples per stage, the memory's
growth along the stream (table and plot), and the τ_sim × τ_mid heat-maps."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from llm_anchors import MAnchorsExplainer

from ._common import FIDELITY, markdown_table, result_path, stage_markdown, tau_sim

PAPER: dict[str, dict[str, Any]] = {
    "rf": {"speedup": 1.69, "sampling_reduction": 0.32},
    "llm": {"speedup": 8.74, "sampling_reduction": 0.87, "coverage": (0.10, 0.09), "length": (4.34, 5.39)},
}


def markdown(results: dict[str, dict[str, Any]], args: argparse.Namespace, n: int) -> str:
    """The paper's table: Anchors, then one column per MAnchors run (``results``: name → `compare`)."""
    paper = PAPER[args.classifier]
    usd = f"usd_at_{args.price_model}"
    names = list(results)
    a = next(iter(results.values()))["anchors"]
    ms = [results[k]["manchors"] for k in names]
    setup = "reference Anchors settings" if getattr(args, "reference", False) else "default settings"
    stream_name = "tuning stream" if getattr(args, "tuning", False) else "RT-Polarity"
    if getattr(args, "dataset", "rt") == "youtube":
        stream_name = "YouTube spam, " + ("LMFAO's comments (tuning)" if args.tuning else "Eminem's and Shakira's")

    def row(label: str, anchors: str, values: list[str], ref: str = "") -> str:
        return f"| {label} | {anchors} | " + " | ".join(values) + f" | {ref} |"

    lines = [
        f"### Anchors vs MAnchors, {args.classifier.upper()} on {stream_name}, N={n} ({setup}; "
        f"τ_mid {args.tau_mid}, embedding: {args.pooling})",
        "",
        "| | Anchors | " + " | ".join(f"MAnchors ({k}, τ_sim {_tau(args, k)})" for k in names) + " | paper |",
        "| --- | ---: |" + " ---: |" * len(names) + " ---: |",
        row("speedup (Σ time)", "", [f"{results[k]['speedup']:.2f}×" for k in names], f"{paper['speedup']}×"),
        row("sampling reduction", "", [f"{results[k]['sampling_reduction']:.0%}" for k in names],
            f"{paper['sampling_reduction']:.0%}"),
        row("paid-query reduction", "", [f"{1 - m['paid_queries'] / max(a['paid_queries'], 1):.0%}" for m in ms]),
        row("memory hits", "", [f"{results[k]['memory_hits']} / {n}" for k in names]),
        row("Σ time (s)", f"{a['time_s']:.1f}", [f"{m['time_s']:.1f}" for m in ms]),
        row("Σ samples", f"{a['samples']:,}", [f"{m['samples']:,}" for m in ms]),
        row("Σ paid queries", f"{a['paid_queries']:,}", [f"{m['paid_queries']:,}" for m in ms]),
        row("Σ prompt tokens", f"{a['prompt_tokens']:,}", [f"{m['prompt_tokens']:,}" for m in ms]),
        row(f"$ at {args.price_model} prices", a[usd], [m[usd] for m in ms]),
        row("paid queries / samples the anchor was accepted on (per input)", _floor(a), [_floor(m) for m in ms]),
    ]  # fmt: skip
    labels = {
        "below_tau": "share of anchors below τ on fresh samples",
        "empty": "share of empty anchors",
        "coverage_both_non_empty": "coverage, inputs where both anchors are non-empty",
        "length_both_non_empty": "length, inputs where both anchors are non-empty",
    }
    for key in (*FIDELITY, "empty", "coverage_both_non_empty", "length_both_non_empty", "below_tau"):
        ref = paper.get(key)
        ref_text = f"{ref[0]} → {ref[1]}" if isinstance(ref, tuple) else ""
        lines.append(row(labels.get(key, key), _mean(a[key]), [_mean(m[key]) for m in ms], ref_text))
    lines.append(row("inputs where both anchors are non-empty", "", [f"{results[k]['both_non_empty']}" for k in names]))
    return "\n".join(lines)


def _tau(args: argparse.Namespace, name: str) -> str:
    return str(tau_sim(args, name)) if name in MAnchorsExplainer.default_tau_sim else "?"


def _floor(run: dict[str, Any]) -> str:
    """How far a run stands from the certification floor: paid queries per input against the samples
    its anchor was accepted on (fresh ones for the guided search, all that back it for Anchors)."""
    per = run["paid_queries"] / max(run["inputs"], 1)
    return f"{per:,.0f} / {run['certification_samples'] / max(run['inputs'], 1):,.0f}"


def _mean(value: dict[str, float]) -> str:
    return f"{value['mean']:.3f} ± {value['ci95']:.3f}"


def stages_by_outcome(a: list[dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> str:
    """The per-stage table: Anchors, each MAnchors run, and Anchors and the first run on that run's memory hits
    (when it had any: the guided search's memory is off by default)."""
    columns: dict[str, list[dict[str, Any]]] = {"Anchors": a}
    columns |= {f"MAnchors ({name})": m for name, m in runs.items()}
    name, m = next(iter(runs.items()))
    hits = [i for i, r in enumerate(m) if r["memory_hit"]]
    if hits:
        columns[f"Anchors on {name}'s hits"] = [a[i] for i in hits]
        columns[f"{name} on its hits"] = [m[i] for i in hits]
    return stage_markdown(columns)


def growth(rows: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """MAnchors along the stream, per window of ``every`` inputs: memory size, lookup time, time, RSS."""
    out, start = [], 0
    for end in sorted({*range(every, len(rows) + 1, every), len(rows)}):
        window, start = rows[start:end], end
        lookups = np.array([r["memory_lookup_s"] or 0.0 for r in window]) * 1000
        out.append(
            {
                "inputs": end,
                "memory_size": window[-1]["memory_size"],
                "hit_rate": float(np.mean([bool(r["memory_hit"]) for r in window])),
                "lookup_ms_mean": float(lookups.mean()),
                "lookup_ms_p95": float(np.percentile(lookups, 95)),
                "time_s_mean": float(np.mean([r["time_s"] for r in window])),
                "samples_mean": float(np.mean([r["samples"] for r in window])),
                "rss_mb": window[-1]["rss_mb"],
                "server_rss_mb": window[-1].get("server_rss_mb"),
                "cache_entries": window[-1].get("cache_entries"),
            }
        )
    return out


GROWTH_HEADER = (
    "| inputs | memory entries | hit rate | lookup ms (mean / p95) | time per input (s) | samples per input "
    "| query cache entries | RSS (MB) | model server RSS (MB) |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
)


def growth_markdown(table: list[dict[str, Any]]) -> str:
    return markdown_table(GROWTH_HEADER, (
        f"| {g['inputs']:,} | {g['memory_size']:,} | {g['hit_rate']:.0%} | {g['lookup_ms_mean']:.2f} / "
        f"{g['lookup_ms_p95']:.2f} | {g['time_s_mean']:.3f} | {g['samples_mean']:,.0f} "
        f"| {g['cache_entries'] or 0:,} | {g['rss_mb']:.0f} | {_mb(g.get('server_rss_mb'))} |" for g in table
    ))  # fmt: skip


def _mb(value: float | None) -> str:
    return "–" if value is None or value != value else f"{value:.0f}"


def growth_plot(table: list[dict[str, Any]], stem: str, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [g["memory_size"] for g in table]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = (("lookup_ms_mean", "lookup time (ms, window mean)"), ("time_s_mean", "time per input (s)"),
              ("rss_mb", "process RSS (MB)"))  # fmt: skip
    for ax, (key, title) in zip(axes, panels, strict=True):
        ax.plot(x, [g[key] for g in table], marker="o")
        ax.set_xlabel("memory entries")
        ax.set_ylabel(title)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    path = result_path(f"{stem}_growth.png", out)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def heatmaps(grid: dict[tuple[float, float], dict[str, Any]], stem: str, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sims = sorted({k[0] for k in grid})
    mids = sorted({k[1] for k in grid})
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    panels: list[tuple[Callable[[dict[str, Any]], float], str]] = [
        (lambda r: float(r["speedup"]), "speedup (×)"),
        (lambda r: float(r["sampling_reduction"]), "sampling reduction"),
        (lambda r: float(r["manchors"]["coverage"]["mean"] - r["anchors"]["coverage"]["mean"]), "Δ coverage"),
    ]
    for ax, (value, title) in zip(axes, panels, strict=True):
        table = np.array([[value(grid[(s, mm)]) for s in sims] for mm in mids])
        image = ax.imshow(table, origin="lower", cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(sims)), [str(s) for s in sims])
        ax.set_yticks(range(len(mids)), [str(mm) for mm in mids])
        ax.set_xlabel("τ_sim")
        ax.set_ylabel("τ_mid")
        ax.set_title(title)
        for i in range(len(mids)):
            for j in range(len(sims)):
                ax.text(j, i, f"{table[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path = result_path(f"{stem}_sweep.png", out)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
