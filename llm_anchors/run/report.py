"""``llm-anchors report``: a run's results file as one self-contained HTML page.

The page needs no network: its style, script and chart are inline. It
holds a summary (inputs, labels, memory hits, queries, tokens, dollars,
time, and the saving against a plain-Anchors run of the same inputs when
one is given), the cumulative spend as an SVG chart, the most frequent
anchor words per label, and a table of every input with its anchor marked,
sortable by any column and filterable by label or text (the choice is kept
in the address's ``#label=…&sort=…&dir=…`` fragment, so a view can be shared).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .._secrets import redact
from .._version import __version__
from ..explain.explanation import Explanation, Opinion
from .results import read_results

__all__ = ["ReportRow", "report_html", "write_report"]

TOP_WORDS = 10


@dataclass(frozen=True)
class ReportRow:
    """One explained input, as the report shows it."""

    index: int
    input_sha256: str
    explanation: Explanation

    @property
    def label(self) -> str:
        return str(self.explanation.data.label)

    @property
    def hit(self) -> bool | None:
        return self.explanation.meta.memory_hit


def load_rows(path: str | Path) -> list[ReportRow]:
    """A results file's explanations, in the order they finished."""
    return load_run(path)[0]


def load_run(path: str | Path) -> tuple[list[ReportRow], dict[int, str]]:
    """A results file's explanations, in the order they finished, and its failed inputs with the reason."""
    records = read_results(path)
    rows = []
    for index, r in records.items():
        if "explanation" not in r:
            continue
        try:
            explanation = Explanation.from_json(json.dumps(r["explanation"]))
        except ConfigError as exc:
            raise ConfigError(f"{path}: the line of input {index} is {exc}") from None
        rows.append(ReportRow(index, str(r.get("input_sha256", "")), explanation))
    return rows, {index: redact(str(r["failed"])) for index, r in records.items() if "failed" in r}


def write_report(
    results: str | Path,
    out: str | Path,
    *,
    baseline: str | Path | None = None,
    title: str | None = None,
) -> Path:
    """Write the report of ``results`` (a ``llm-anchors run`` results file) to ``out``.

    ``baseline``: the results of a plain-Anchors run (``--anchors``) over
    the same inputs; the summary then says what MAnchors saved on the inputs
    both explained (matched by their hash).
    """
    rows, failed = load_run(results)
    base = load_rows(baseline) if baseline is not None else None
    page = report_html(rows, base, title=title or f"llm-anchors report: {Path(results).name}", failed=failed)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def report_html(
    rows: Sequence[ReportRow],
    baseline: Sequence[ReportRow] | None = None,
    *,
    title: str,
    failed: Mapping[int, str] | None = None,
) -> str:
    """The report page, as a string; ``failed``: the inputs that could not be explained, with the reason."""
    matched = _matched(rows, baseline) if baseline is not None else None
    failed = failed or {}
    body = "\n".join(
        [
            f"<header><h1>{_e(title)}</h1><p class=muted>{_provenance(rows)}</p></header>",
            _summary(rows, matched, len(failed)),
            _spend_chart(rows, matched),
            _top_words(rows),
            _table(rows),
            _failures(failed),
        ]
    )
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>\n"
        f"<body>\n{body}\n<script>{_asset('report.js')}</script>\n</body></html>\n"
    )


# -- summary -----------------------------------------------------------------------


def _summary(rows: Sequence[ReportRow], matched: list[tuple[ReportRow, ReportRow]] | None, failed: int = 0) -> str:
    metas = [r.explanation.meta for r in rows]
    labels = Counter(r.label for r in rows)
    looked_up = [r.hit for r in rows if r.hit is not None]
    usd = sum((m.cost.settled.usd for m in metas), Decimal(0))
    prompt = sum(m.cost.settled.prompt_tokens for m in metas)
    completion = sum(m.cost.settled.completion_tokens for m in metas)
    estimated = " (estimated)" if any(m.cost.settled.estimated or m.cost.reserved.estimated for m in metas) else ""
    cached = sum(m.cost.settled.cache_read_tokens for m in metas)
    saved = sum((r.explanation.saved_by_caching for r in rows), Decimal(0))
    disputed = sum(m.cost.settled.disputed for m in metas)
    found = sum(r.explanation.data.success for r in rows)
    cards = [
        (
            "inputs",
            f"{len(rows) + failed:,}",
            f"{found:,} anchors reached τ" + (f"; {failed:,} could not be explained" if failed else ""),
        ),
        ("labels", " · ".join(f"{_e(k)} {v:,}" for k, v in labels.most_common()) or "—", ""),
        (
            "memory hits",
            f"{sum(looked_up):,} / {len(looked_up):,}" if looked_up else "—",
            f"{sum(looked_up) / len(looked_up):.0%} of lookups" if looked_up else "the memory was off",
        ),
        (
            "queries",
            f"{sum(m.queries for m in metas):,}",
            f"{sum(m.samples for m in metas):,} samples, {sum(m.cost.cache_hits for m in metas):,} cache hits",
        ),
        (
            "tokens",
            f"{prompt + completion:,}",
            f"{prompt:,} prompt ({cached:,} cached, {prompt - cached:,} not) + {completion:,} completion{estimated}",
        ),
        (
            "dollars",
            f"${_usd(usd)}",
            _usd_note(usd, rows)
            + (f"; caching saved ${_usd(saved)}" if saved else "")
            + (
                f"; {disputed:,} calls reported usage that could not be true: counted at their worst case or their "
                "bill, the larger"
                if disputed
                else ""
            ),  # fmt: skip
        ),
        ("time", _duration(sum(m.wall_time_s for m in metas)), "Σ per input (inputs explained at once overlap)"),
        *_second_opinions(rows),
    ]
    html_cards = "".join(
        f"<div class=card><div class=k>{k}</div><div class=v>{v}</div><div class=muted>{_e(note)}</div></div>"
        for k, v, note in cards
    )
    return f"<section id=summary><div class=cards>{html_cards}</div>{_savings(rows, matched)}</section>"


def _second_opinions(rows: Sequence[ReportRow]) -> list[tuple[str, str, str]]:
    """A card per second-opinion perturbation: how many anchors hold at ≥ τ under it."""
    by: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if (o := r.explanation.data.second_opinion) is not None and o.precision is not None:
            by.setdefault(o.perturbation, []).append((o.precision, r.explanation.meta.settings.search.threshold))
    return [
        (
            f"under {name}",
            f"{sum(p >= tau for p, tau in pairs):,} / {len(pairs):,}",
            f"anchors at precision ≥ τ under {name} too (mean {sum(p for p, _ in pairs) / len(pairs):.3f}; "
            "fresh samples, no certificate)",
        )
        for name, pairs in sorted(by.items())
    ]


def _savings(rows: Sequence[ReportRow], matched: list[tuple[ReportRow, ReportRow]] | None) -> str:
    """The saving against plain Anchors where measured (a baseline run); else each kind's mean."""
    if matched:
        lines = []
        for name, value in _SAVED.items():
            ours = sum(value(m.explanation) for m, _ in matched)
            theirs = sum(value(b.explanation) for _, b in matched)
            saved = f"{1 - ours / theirs:.0%} fewer" if theirs else "—"
            lines.append(f"<tr><th>{name}</th><td>{_num(ours)}</td><td>{_num(theirs)}</td><td>{saved}</td></tr>")
        return (
            f"<h2>Against plain Anchors</h2><p class=muted>the {len(matched):,} inputs both runs explained</p>"
            "<table class=compact><thead><tr><th></th><th>this run</th><th>plain Anchors</th><th>saving</th></tr>"
            f"</thead><tbody>{''.join(lines)}</tbody></table>"
        )
    if matched is not None:
        return "<p class=muted>The plain-Anchors run given shares no input with this one.</p>"
    hits = [r.explanation.meta.queries for r in rows if r.hit]
    misses = [r.explanation.meta.queries for r in rows if r.hit is False]
    if not hits or not misses:
        return ""
    return (
        f"<p class=muted>Queries per input: {sum(hits) / len(hits):,.0f} on a memory hit, "
        f"{sum(misses) / len(misses):,.0f} on a miss (plain Anchors), over different inputs. "
        "To measure the saving, run the same inputs with <code>--anchors</code> and pass its results "
        "as <code>--baseline</code>.</p>"
    )


_SAVED: dict[str, Callable[[Explanation], Any]] = {
    "queries": lambda e: e.meta.queries,
    "samples": lambda e: e.meta.samples,
    "dollars": lambda e: e.meta.cost.settled.usd,
    "time (s)": lambda e: e.meta.wall_time_s,
}


def _matched(rows: Sequence[ReportRow], baseline: Sequence[ReportRow]) -> list[tuple[ReportRow, ReportRow]]:
    by_hash = {b.input_sha256: b for b in baseline}
    return [(r, by_hash[r.input_sha256]) for r in rows if r.input_sha256 in by_hash]


def _failures(failed: Mapping[int, str]) -> str:
    """The inputs that could not be explained (empty, too long), with the reason."""
    if not failed:
        return ""
    items = "".join(f"<tr><td>{i}</td><td>{_e(reason)}</td></tr>" for i, reason in sorted(failed.items()))
    return (
        f"<section id=failed><h2>Inputs that could not be explained ({len(failed):,})</h2>"
        f"<table class=compact><thead><tr><th>input</th><th>why</th></tr></thead><tbody>{items}</tbody></table>"
        "</section>"
    )


# -- cumulative spend ----------------------------------------------------------------


def _spend_chart(rows: Sequence[ReportRow], matched: list[tuple[ReportRow, ReportRow]] | None) -> str:
    """Cumulative dollars (queries when the run cost nothing) over the inputs in the order they finished."""
    dollars = any(r.explanation.meta.cost.settled.usd for r in rows)

    def spend(e: Explanation) -> float:
        return float(e.meta.cost.settled.usd) if dollars else float(e.meta.queries)

    series = {"this run": _cumulative(spend(r.explanation) for r in rows)}
    if matched:
        series["plain Anchors, same inputs"] = _cumulative(spend(b.explanation) for _, b in matched)
        series["this run"] = _cumulative(spend(m.explanation) for m, _ in matched)
    what = "dollars" if dollars else "queries (the run cost $0)"
    return f"<section id=spend><h2>Cumulative spend: {what}</h2>{_svg(series, dollars)}</section>"


def _cumulative(values: Iterable[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


def _svg(series: Mapping[str, list[float]], dollars: bool, width: int = 720, height: int = 240) -> str:
    left, right, top, bottom = 64, 16, 12, 36
    n = max((len(s) for s in series.values()), default=0)
    peak = max((s[-1] for s in series.values() if s), default=0.0) or 1.0

    def x(i: int) -> float:
        return left + (width - left - right) * (i + 1) / max(n, 1)

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - v / peak)

    parts = [f'<svg role=img aria-label="cumulative spend" viewBox="0 0 {width} {height}" class=chart>']
    for fraction in (0, 0.5, 1):
        value = peak * fraction
        label = f"${value:,.4f}" if dollars else f"{value:,.0f}"
        parts.append(
            f"<line x1={left} x2={width - right} y1={y(value):.1f} y2={y(value):.1f} class=grid />"
            f"<text x={left - 6} y={y(value) + 4:.1f} text-anchor=end>{label}</text>"
        )
    parts.append(
        f"<text x={(left + width - right) / 2} y={height - 8} text-anchor=middle>inputs, in the order "
        f"they finished ({n:,})</text>"
    )
    for k, (name, values) in enumerate(series.items()):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline points="{points}" class="line s{k}"><title>{_e(name)}</title></polyline>')
        parts.append(f'<text x={left + 8} y={top + 14 + 16 * k} class="legend s{k}">■ {_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- anchor words ---------------------------------------------------------------------


def _top_words(rows: Sequence[ReportRow]) -> str:
    by_label: dict[str, Counter[str]] = {}
    empty: Counter[str] = Counter()
    for r in rows:
        by_label.setdefault(r.label, Counter()).update(w.lower() for w in r.explanation.data.anchor)
        empty[r.label] += not r.explanation.data.anchor
    blocks = []
    for label, counts in sorted(by_label.items()):
        top = counts.most_common(TOP_WORDS)
        most = top[0][1] if top else 1
        items = "".join(
            f'<li><span class=word>{_e(w)}</span><span class=bar style="width:{100 * c / most:.0f}%"></span>'
            f"<span class=count>{c:,}</span></li>"
            for w, c in top
        )
        note = (
            f"<p class=muted>{empty[label]:,} empty anchors: a prior, not these words (≥ τ of perturbed "
            "inputs keep the label whatever words remain)</p>"
        )
        blocks.append(f"<div class=words><h3>{_e(label)}</h3><ol>{items}</ol>{note if empty[label] else ''}</div>")
    title = "<h2>Most frequent anchor words per label</h2>"
    return f"<section id=anchor-words>{title}<div class=cols>{''.join(blocks)}</div></section>"


# -- the table --------------------------------------------------------------------------

_COLUMNS = (
    ("index", "#"),
    ("text", "input, anchor marked"),
    ("label", "label"),
    ("precision", "precision ≥ certified lower bound"),
    ("coverage", "coverage"),
    ("queries", "queries"),
    ("usd", "$"),
    ("memory", "memory"),
)


def _columns(rows: Sequence[ReportRow]) -> tuple[tuple[str, str], ...]:
    """The table's columns: a second opinion's after the precision, when the run asked for one."""
    second = sorted({o.perturbation for r in rows if (o := r.explanation.data.second_opinion) is not None})
    if not second:
        return _COLUMNS
    at = [key for key, _ in _COLUMNS].index("precision") + 1
    return (*_COLUMNS[:at], ("second", f"precision under {' / '.join(second)}"), *_COLUMNS[at:])


def _opinion_cell(o: Opinion | None) -> str:
    """A second opinion's cell: its precision, its interval and samples on hover; or why it is missing."""
    if o is None:
        return "<td class=num>—</td>"
    if o.precision is None:
        return f'<td class=num title="{_e(f"not measured: {o.missing}")}">missing</td>'
    low, high = o.interval or (o.precision, o.precision)
    said = f"95% interval {low:.3f}–{high:.3f}; {o.samples:,} fresh samples; perturbed as: {o.perturbed_as}"
    return f'<td class=num title="{_e(said)}">{o.precision:.3f}</td>'


def _table(rows: Sequence[ReportRow]) -> str:
    labels = sorted({r.label for r in rows})
    options = "".join(f'<option value="{_e(label)}">{_e(label)}</option>' for label in labels)
    columns = _columns(rows)
    head = "".join(f"<th data-key={key} aria-sort=none tabindex=0>{name}</th>" for key, name in columns)
    controls = (
        f'<label>label <select id=label-filter><option value="">all</option>{options}</select></label> '
        '<label>text <input id=text-filter type=search placeholder="words…"></label> '
        f"<span class=muted>showing <b id=shown>{len(rows):,}</b> of {len(rows):,}</span>"
    )
    body = "\n".join(_row(r, len(columns) > len(_COLUMNS)) for r in rows)
    return (
        f"<section id=inputs-section><h2>Every input</h2><div class=controls>{controls}</div>"
        f"<table id=inputs><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></section>"
    )


def _row(r: ReportRow, second: bool = False) -> str:
    d, m = r.explanation.data, r.explanation.meta
    low = d.precision_bounds[0]
    memory = {None: ("—", -1), True: ("hit", 1), False: ("miss", 0)}[m.memory_hit]
    flags = "" if d.anchor else " <span class=muted>(empty anchor)</span>"
    flags += "" if d.success else ' <span class=flag title="no rule reached the threshold">below τ</span>'
    if m.budget_exhausted:
        flags += ' <span class=flag title="the per-input cap stopped the search">cap</span>'
    keys = {
        "index": r.index,
        "label": _e(r.label),
        "precision": f"{d.precision:.4f}",
        "coverage": f"{d.coverage:.4f}",
        "queries": m.queries,
        "usd": m.cost.settled.usd,
        "memory": memory[1],
        "text": _e(d.query.lower()),
    }
    opinion = ""
    if second:
        o = d.second_opinion
        keys["second"] = f"{o.precision:.4f}" if o is not None and o.precision is not None else -1
        opinion = _opinion_cell(o)
    attrs = " ".join(f'data-{k}="{v}"' for k, v in keys.items())
    return (
        f"<tr {attrs}><td class=num>{r.index}</td>"
        f"<td class=text>{r.explanation.marked_html(_mark, _sentence)}{flags}</td>"
        f'<td>{_e(r.label)}</td><td class=num title="{_e(r.explanation.claim)}">{d.precision:.3f} '
        f"<span class=muted>≥ {low:.3f}{' strict' if d.certified_samples else ''}</span></td>{opinion}"
        f"<td class=num>{d.coverage:.3f}</td><td class=num>{m.queries:,}</td>"
        f"<td class=num>{_usd(m.cost.settled.usd)}</td>"
        f"<td class=mem-{memory[0] if memory[1] >= 0 else 'none'}>{memory[0]}</td></tr>"
    )


def _mark(word: str) -> str:
    return f"<mark>{word}</mark>"


def _sentence(sentence: str) -> str:
    """A coarse anchor's sentence (coarse to fine: the words marked were searched inside it)."""
    return f'<span class=coarse title="the anchor\'s sentence: its words were searched inside it">{sentence}</span>'


# -- small helpers ------------------------------------------------------------------------


def _provenance(rows: Sequence[ReportRow]) -> str:
    """HTML: which explainer on which model (the classifier's name up to its settings), when, and under
    which perturbation distributions."""
    made = sorted({f"{r.explanation.meta.explainer} on {r.explanation.meta.classifier.split('|')[0]}" for r in rows})
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    under = Counter(r.explanation.data.perturbation for r in rows if r.explanation.data.perturbation)
    perturbed = "".join(f"<br>perturbed as: {_e(p)} ({n:,} inputs)" for p, n in sorted(under.items()))
    return f"{_e('; '.join(made) or 'no explanations yet')} · written {when} by llm-anchors {__version__}{perturbed}"


def _usd(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.000001')):,}"


def _usd_note(usd: Decimal, rows: Sequence[ReportRow]) -> str:
    if usd or not rows:
        return "settled: what the calls were billed"
    return "the model's calls cost nothing (a local model, or no --price-file)"


def _num(value: Any) -> str:
    if isinstance(value, Decimal):
        return f"${_usd(value)}"
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {s:02d}s" if minutes else f"{seconds:.1f}s"


def _asset(name: str) -> str:
    """The page's style or script, shipped beside this module."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
