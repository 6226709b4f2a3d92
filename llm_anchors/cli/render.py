"""What the command line shows: one explanation as text (`render`), and a status line while it is made."""

from __future__ import annotations

from typing import TextIO

from ..explain.explanation import Explanation, Opinion
from ..explain.progress import Progress
from ..money.charge import Charge

__all__ = ["ProgressLine", "render"]


class ProgressLine:
    """One status line on stderr (tqdm), redrawn after each batch, only on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        from tqdm import tqdm

        fmt = "  {n:,} samples{postfix} · {elapsed}"
        self.bar = tqdm(file=stream, disable=not stream.isatty(), bar_format=fmt, leave=False)

    def __call__(self, p: Progress) -> None:
        self.bar.n = p.samples
        tokens = p.spent.prompt_tokens + p.spent.completion_tokens
        self.bar.set_postfix_str(f"{p.queries:,} queries · {p.cache_hits:,} cached · {tokens:,} tokens")

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


def render(exp: Explanation, *, color: bool = False) -> str:
    """The sentence with the anchor marked, then the numbers."""
    d, m = exp.data, exp.meta
    if color:
        sentence = exp.mark(lambda w: f"\033[1;7m{w}\033[22;27m", wrap_coarse=lambda s: f"\033[4m{s}\033[0m")
    else:
        sentence = exp.mark(lambda w: f"[{w}]", wrap_coarse=lambda s: f"{{{s}}}")
    anchor = " AND ".join(d.anchor) if d.anchor else "(empty: a prior, not these words; see the claim)"
    status = "" if d.success else "  (no rule reached the threshold: best found)"
    if m.budget_exhausted:
        status += "  (budget exhausted: best rule so far)"
    c = m.cost
    estimated = " (estimated)" if c.settled.estimated or c.reserved.estimated else ""
    lines = [
        sentence,
        "",
        f"label       {d.label}",
        *(
            [f"sentences   {len(d.coarse.anchor)} of the text's, marked {{ }}: the words were searched inside them"]
            if d.coarse is not None
            else []
        ),
        f"anchor      {anchor}{status}",
        f"precision   {d.precision:.3f}  ({_on_what(exp)}; KL bounds {d.precision_bounds[0]:.3f}–"
        f"{d.precision_bounds[1]:.3f})",
        f"claim       {exp.claim}",
        f"coverage    {d.coverage:.3f}",
        *([_opinion(d.second_opinion)] if d.second_opinion is not None else []),
        f"samples     {m.samples:,}",
        f"queries     {m.queries:,}  ({c.cache_hits:,} cache hits, {c.retries} retries)",
        f"tokens      {c.settled.prompt_tokens:,} prompt{_cached(c.settled)} + {c.settled.completion_tokens:,} "
        f"completion{estimated}",
        f"cost        ${c.settled.usd} (reserved ${c.reserved.usd}{_saved(exp)})",
        f"time        {m.wall_time_s:.1f}s",
    ]
    if m.unparsed:
        lines.append(f"unparsed    {m.unparsed} answers named no label")
    if c.disputed:
        said = ", ".join(f"{why} ({n})" for why, n in c.disputed.items())
        counted = "calls counted at their worst case or their bill, the larger"
        lines.append(f"disputed    {c.settled.disputed} {counted}: {said}")
    if c.dearest_tier:
        named = "their server named none its price knows"
        lines.append(f"tier        {c.dearest_tier} calls billed at the dearest tier: {named}")
    return "\n".join(lines)


def _cached(usage: Charge) -> str:
    """How much of a prompt the provider's cache served (and took in), if any."""
    parts = [f"{usage.cache_read_tokens:,} cached"] if usage.cache_read_tokens else []
    parts += [f"{usage.cache_write_tokens:,} written to the cache"] if usage.cache_write_tokens else []
    return f" ({', '.join(parts)})" if parts else ""


def _saved(exp: Explanation) -> str:
    saved = exp.saved_by_caching
    return f"; caching saved ${saved}" if saved else ""


def _opinion(o: Opinion) -> str:
    """The second opinion's line: its precision with its 95% interval, or why it is missing."""
    if o.precision is None:
        return f"2nd opinion none under {o.perturbation}: {o.missing}"
    low, high = o.interval or (o.precision, o.precision)
    return (
        f"2nd opinion {o.precision:.3f}  (95% interval {low:.3f}–{high:.3f}; precision under {o.perturbation}, "
        f"{o.samples:,} fresh samples: {o.perturbed_as})"
    )


def _on_what(exp: Explanation) -> str:
    """What the precision shown is measured on."""
    d = exp.data
    if d.certified_samples:
        return f"on the {d.certified_samples:,} samples that certified it"
    return f"the search's estimate on {d.n_samples:,} samples, not certified"
