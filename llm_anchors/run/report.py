"""``llm-anchors report``: a run's results file as one self-contained HTML page.

The page needs no network: its style, script and chart are inline. It
holds a summary (inputs, labels, memory hits, queries, tokens, dollars,
time, and the saving against a plain-Anchors run of the same inputs when
one is given), the cumulative spend as an SVG chart, the most frequent
anchor words per label, and a table of every input with its anchor marked,
sortable by any column, filterable by label or text and shown a page at a
time (the choice is kept in the address's ``#label=…&sort=…&dir=…&page=…``
fragment, so a view can be shared). The rows travel as JSON the page's
script draws: a page of 100,000 inputs stays a few tens of MB.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

from .._secrets import hide
from .._version import __version__
from .rows import ReportRow, read_rows

__all__ = ["ReportRow", "report_html", "write_report"]

TOP_WORDS = 10
CHART_POINTS = 600
"""Points of the cumulative-spend chart at most (a long run is drawn at evenly spaced inputs)."""
LISTED_FAILURES = 200
"""Inputs that could not be explained listed by name at most (the rest counted)."""


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
    run = read_rows(results)
    base = read_rows(baseline).rows if baseline is not None else None
    page = report_html(run.rows, base, title=title or f"llm-anchors report: {Path(results).name}", failed=run.failed,
                       request=run.config.get("request"))  # fmt: skip
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(hide(page), encoding="utf-8")
    return out


def report_html(
    rows: Sequence[ReportRow],
    baseline: Sequence[ReportRow] | None = None,
    *,
    title: str,
    failed: Mapping[int, str] | None = None,
    request: Mapping[str, Any] | None = None,
) -> str:
    """The report page, as a string; ``failed``: the inputs that could not be explained, with the reason;
    ``request``: the chat request explained, as a report may show it (`ChatRequest.shown`)."""
    matched = _matched(rows, baseline) if baseline is not None else None
    failed = failed or {}
    body = "\n".join(
        [
            f"<header><h1>{_e(title)}</h1><p class=muted>{_provenance(rows)}{_request(request)}</p></header>",
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
    labels = Counter(r.label for r in rows)
    looked_up = [r.hit for r in rows if r.hit is not None]
    settled = [r.settled for r in rows]
    usd = sum((c.usd for c in settled), Decimal(0))
    prompt = sum(c.prompt_tokens for c in settled)
    completion = sum(c.completion_tokens for c in settled)
    estimated = " (estimated)" if any(c.estimated for c in settled) else ""
    cached = sum(c.cache_read_tokens for c in settled)
    saved = sum((c.saved_by_caching for c in settled), Decimal(0))
    disputed = sum(c.disputed for c in settled)
    found = sum(r.success for r in rows)
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
            _memory_note(rows, looked_up) if looked_up else "the memory was off",
        ),
        (
            "queries",
            f"{sum(r.queries for r in rows):,}",
            f"{sum(r.samples for r in rows):,} samples, {sum(r.cache_hits for r in rows):,} cache hits",
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
        ("time", _duration(sum(r.wall_time_s for r in rows)), "Σ per input (inputs explained at once overlap)"),
        *_second_opinions(rows),
    ]
    html_cards = "".join(
        f"<div class=card><div class=k>{k}</div><div class=v>{v}</div><div class=muted>{_e(note)}</div></div>"
        for k, v, note in cards
    )
    return f"<section id=summary><div class=cards>{html_cards}</div>{_savings(rows, matched)}</section>"


def _memory_note(rows: Sequence[ReportRow], looked_up: Sequence[bool | None]) -> str:
    """What the memory did: hits, exact repeats, its rules tested and certified, and what its record says
    asking it saved (against growth alone on inputs it had rules for, left to growth at random)."""
    repeats = sum(r.repeat for r in rows)
    asked = [r for r in rows if r.asked]
    control = sum(r.asked is False for r in rows)
    certified = sum(r.certified_by_memory for r in asked)
    saved = next((r.saved for r in reversed(rows) if r.asked is not None), 0.0)
    return (
        f"{sum(bool(x) for x in looked_up) / len(looked_up):.0%} of lookups; {repeats:,} exact repeats (no query); "
        f"its rules tested on {len(asked):,} inputs, the anchor on {certified:,}; {control:,} left to growth to "
        f"compare: asking it {'saved' if saved >= 0 else 'cost'} {abs(saved):,.0f} queries"
    )


def _second_opinions(rows: Sequence[ReportRow]) -> list[tuple[str, str, str]]:
    """A card per second-opinion perturbation: how many anchors hold at ≥ τ under it."""
    by: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if (o := r.opinion) is not None and o.precision is not None:
            by.setdefault(o.perturbation, []).append((o.precision, r.threshold))
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
            ours = sum(value(m) for m, _ in matched)
            theirs = sum(value(b) for _, b in matched)
            saved = f"{1 - ours / theirs:.0%} fewer" if theirs else "—"
            lines.append(f"<tr><th>{name}</th><td>{_num(ours)}</td><td>{_num(theirs)}</td><td>{saved}</td></tr>")
        return (
            f"<h2>Against plain Anchors</h2><p class=muted>the {len(matched):,} inputs both runs explained</p>"
            "<table class=compact><thead><tr><th></th><th>this run</th><th>plain Anchors</th><th>saving</th></tr>"
            f"</thead><tbody>{''.join(lines)}</tbody></table>"
        )
    if matched is not None:
        return "<p class=muted>The plain-Anchors run given shares no input with this one.</p>"
    hits = [r.queries for r in rows if r.hit]
    misses = [r.queries for r in rows if r.hit is False]
    if not hits or not misses:
        return ""
    return (
        f"<p class=muted>Queries per input: {sum(hits) / len(hits):,.0f} on a memory hit, "
        f"{sum(misses) / len(misses):,.0f} on a miss (plain Anchors), over different inputs. "
        "To measure the saving, run the same inputs with <code>--anchors</code> and pass its results "
        "as <code>--baseline</code>.</p>"
    )


_SAVED: dict[str, Callable[[ReportRow], Any]] = {
    "queries": lambda r: r.queries,
    "samples": lambda r: r.samples,
    "dollars": lambda r: r.usd,
    "time (s)": lambda r: r.wall_time_s,
}


def _matched(rows: Sequence[ReportRow], baseline: Sequence[ReportRow]) -> list[tuple[ReportRow, ReportRow]]:
    by_hash = {b.input_sha256: b for b in baseline}
    return [(r, by_hash[r.input_sha256]) for r in rows if r.input_sha256 in by_hash]


def _failures(failed: Mapping[int, str]) -> str:
    """The inputs that could not be explained (empty, too long), with the reason: the first
    `LISTED_FAILURES` by index, the rest counted."""
    if not failed:
        return ""
    listed = sorted(failed.items())[:LISTED_FAILURES]
    items = "".join(f"<tr><td>{i}</td><td>{_e(reason)}</td></tr>" for i, reason in listed)
    more = len(failed) - len(listed)
    rest = f"<p class=muted>and {more:,} more: their lines in the results file say why</p>" if more else ""
    return (
        f"<section id=failed><h2>Inputs that could not be explained ({len(failed):,})</h2>"
        f"<table class=compact><thead><tr><th>input</th><th>why</th></tr></thead><tbody>{items}</tbody></table>"
        f"{rest}</section>"
    )


# -- cumulative spend ----------------------------------------------------------------


def _spend_chart(rows: Sequence[ReportRow], matched: list[tuple[ReportRow, ReportRow]] | None) -> str:
    """Cumulative dollars (queries when the run cost nothing) over the inputs in the order they finished."""
    dollars = any(r.usd for r in rows)

    def spend(r: ReportRow) -> float:
        return float(r.usd) if dollars else float(r.queries)

    series = {"this run": _cumulative(spend(r) for r in rows)}
    if matched:
        series["plain Anchors, same inputs"] = _cumulative(spend(b) for _, b in matched)
        series["this run"] = _cumulative(spend(m) for m, _ in matched)
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
        step = max(1, len(values) // CHART_POINTS)
        drawn = sorted({*range(step - 1, len(values), step), len(values) - 1} - {-1})
        points = " ".join(f"{x(i):.1f},{y(values[i]):.1f}" for i in drawn)
        parts.append(f'<polyline points="{points}" class="line s{k}"><title>{_e(name)}</title></polyline>')
        parts.append(f'<text x={left + 8} y={top + 14 + 16 * k} class="legend s{k}">■ {_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- anchor words ---------------------------------------------------------------------


def _top_words(rows: Sequence[ReportRow]) -> str:
    """Per label, the words its anchors hold, ranked by how often and how reliably: a word in ``k`` anchors
    of the ``n`` inputs that hold it scores k²/n, so a word every input holds ("a", "the") ranks by the
    share of them it anchors, not by how common it is."""
    anchored: dict[str, Counter[str]] = {}
    held: dict[str, Counter[str]] = {}
    empty: Counter[str] = Counter()
    for r in rows:
        anchored.setdefault(r.label, Counter()).update({w.lower() for w in r.anchor})
        held.setdefault(r.label, Counter()).update(r.words)
        empty[r.label] += not r.anchor
    blocks = []
    for label, counts in sorted(anchored.items()):
        holding = held[label]
        top = sorted(counts.items(), key=lambda wc: (-(wc[1] ** 2) / max(holding[wc[0]], wc[1]), -wc[1], wc[0]))
        top = top[:TOP_WORDS]
        shares = [c / max(holding[w], c) for w, c in top]
        items = "".join(
            f'<li><span class=word>{_e(w)}</span><span class=bar style="width:{160 * share:.0f}px"></span>'
            f"<span class=count>{c:,} of {max(holding[w], c):,}</span></li>"
            for (w, c), share in zip(top, shares, strict=True)
        )
        note = (
            f"<p class=muted>{empty[label]:,} empty anchors: a prior, not these words (≥ τ of perturbed "
            "inputs keep the label whatever words remain)</p>"
        )
        blocks.append(f"<div class=words><h3>{_e(label)}</h3><ol>{items}</ol>{note if empty[label] else ''}</div>")
    title = "<h2>Anchor words per label</h2><p class=muted>in the anchor of k of the n inputs that hold the word</p>"
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
    second = sorted({o.perturbation for r in rows if (o := r.opinion) is not None})
    if not second:
        return _COLUMNS
    at = [key for key, _ in _COLUMNS].index("precision") + 1
    return (*_COLUMNS[:at], ("second", f"precision under {' / '.join(second)}"), *_COLUMNS[at:])


PAGE_ROWS = 100
"""Rows the table shows at once (the script pages through the rest)."""


def _table(rows: Sequence[ReportRow]) -> str:
    """The table's frame and its rows as JSON (`_row`), which the page's script sorts, filters and
    draws a page at a time."""
    labels = sorted({r.label for r in rows})
    options = "".join(f'<option value="{_e(label)}">{_e(label)}</option>' for label in labels)
    columns = _columns(rows)
    head = "".join(f"<th data-key={key} aria-sort=none tabindex=0>{name}</th>" for key, name in columns)
    controls = (
        f'<label>label <select id=label-filter><option value="">all</option>{options}</select></label> '
        '<label>text <input id=text-filter type=search placeholder="words…"></label> '
        f"<span class=muted>showing <b id=shown>{len(rows):,}</b> of {len(rows):,}</span>"
        "<span class=pager><button id=prev type=button>‹ previous</button> <span id=page-of></span> "
        "<button id=next type=button>next ›</button></span>"
    )
    described: dict[str, int] = {}  # a second opinion's distribution, said once
    data = [_row(r, described) for r in rows]
    payload = json.dumps({"rows": data, "described": list(described)}, ensure_ascii=False, separators=(",", ":"))
    return (
        f"<section id=inputs-section><h2>Every input</h2><div class=controls>{controls}</div>"
        f"<table id=inputs data-page-rows={PAGE_ROWS}><thead><tr>{head}</tr></thead><tbody></tbody></table>"
        f"<script type=application/json id=rows>{_script_safe(payload)}</script></section>"
    )


_EMPTY, _BELOW, _CAP = 1, 2, 4  # a row's flags


def _row(r: ReportRow, described: dict[str, int]) -> dict[str, Any]:
    """One row as the script reads it (report.js draws its cells): ``i`` index, ``l`` label, ``t`` the input
    marked (HTML, escaped here), ``p`` precision, ``b`` its certified lower bound, ``k`` how it was
    certified ("strict", "default", "" not), ``n`` on how many samples, ``c`` coverage, ``q`` queries,
    ``u`` dollars, ``m`` memory (2 an exact repeat, 1 hit, 0 miss, -1 off), ``f`` flags (1 empty anchor,
    2 below τ, 4 the cap stopped it); a second opinion's ``s`` precision (-1: none) and ``o``: [low, high, samples, the
    index of its distribution in ``described``], or why it is missing."""
    flags = (not r.anchor) * _EMPTY | (not r.success) * _BELOW | r.budget_exhausted * _CAP
    row: dict[str, Any] = {
        "i": r.index, "l": r.label, "t": r.marked, "p": round(r.precision, 4), "b": round(r.lower, 3),
        "k": r.certify, "n": r.certified_samples, "c": round(r.coverage, 4), "q": r.queries,
        "u": float(r.usd), "m": 2 if r.repeat else {None: -1, True: 1, False: 0}[r.memory_hit], "f": flags,
    }  # fmt: skip
    if (o := r.opinion) is not None:
        if o.precision is None:
            row |= {"s": -1, "o": f"not measured: {o.missing}"}
        else:
            low, high = o.interval or (o.precision, o.precision)
            said = described.setdefault(o.perturbed_as, len(described))
            row |= {"s": round(o.precision, 4), "o": [round(low, 3), round(high, 3), o.samples, said]}
    return row


def _script_safe(data: str) -> str:
    """JSON inside a script element: no ``</`` that could end it early, no ``<!--`` that could hide its end."""
    return data.replace("</", "<\\/").replace("<!--", "<\\u0021--")


# -- small helpers ------------------------------------------------------------------------


def _provenance(rows: Sequence[ReportRow]) -> str:
    """HTML: which explainer on which model (the classifier's name up to its settings), when, and under
    which perturbation distributions."""
    made = sorted({r.made_by for r in rows})
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    under = Counter(r.perturbation for r in rows if r.perturbation)
    perturbed = "".join(f"<br>perturbed as: {_e(p)} ({n:,} inputs)" for p, n in sorted(under.items()))
    return f"{_e('; '.join(made) or 'no explanations yet')} · written {when} by llm-anchors {__version__}{perturbed}"


def _request(request: Mapping[str, Any] | None) -> str:
    """HTML: the chat request explained, by its fingerprint and the parts that hold no message's text."""
    if not request:
        return ""
    parts = {k: v for k, v in request.items() if k != "id"}
    return f"<br>request {_e(request.get('id', ''))}: <code>{_e(json.dumps(parts, ensure_ascii=False))}</code>"


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
