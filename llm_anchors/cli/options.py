"""The command line's options: one parser, its subcommands and their checked numbers."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .._checks import check_dollars, check_int, check_number
from .._exceptions import ConfigError
from .._version import __version__
from ..samplers.text import MAX_WORDS, PERTURBATIONS

__all__ = ["parser"]


_KINDS: dict[str, tuple[Callable[[str], Any], Callable[[str, Any], object] | None]] = {
    "seconds": (float, lambda name, v: check_number(name, v)),
    "count": (int, lambda name, v: check_int(name, v)),
    "natural": (int, lambda name, v: check_int(name, v, minimum=0)),
    "usd": (str, check_dollars),
    "number": (float, None),
    "rate": (lambda t: t if t in ("uniform", "auto") else float(t), None),
}
"""How an option's text becomes a value, and the shared check it must pass at once (`_checks`: the same
function the library applies). None: the value's bounds are its owner's (``--threshold``: `SearchParams`,
``--p-hide``: `TextSampler`), checked when the command builds its settings, before anything starts."""
_WANT = {  # what a text that does not convert should have been
    "seconds": "a number of seconds",
    "count": "an integer",
    "natural": "an integer",
    "usd": "a number",
    "number": "a number",
    "rate": 'a number, "uniform" or "auto"',
}


def _number(kind: str) -> Callable[[str], Any]:
    """An argparse type for a value of ``kind`` (see `_KINDS`): anything else is a usage error, before any work."""
    convert, check = _KINDS[kind]

    def parse(text: str) -> Any:
        try:
            value = convert(text)
            if check is not None:
                checked = check("the value", value)
                value = value if checked is None else checked
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("the value ")) from exc
        except (ValueError, ArithmeticError) as exc:
            raise argparse.ArgumentTypeError(f"must be {_WANT[kind]}, got {text!r}") from exc
        return value

    parse.__name__ = kind
    return parse


def _model_options() -> argparse.ArgumentParser:
    """The options `explain` and `run` share: backend, prompt, labels, search, retries, caps."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--base-url",
        action="append",
        help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (repeat for replicas); "
        "default: start the embedded local LLM",
    )
    common.add_argument("--model", default=None, help="model name at --base-url (Azure OpenAI: the deployment)")
    common.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header sent with every request (a gateway's key, a tenant); repeatable; never shown",
    )
    common.add_argument(
        "--azure-endpoint",
        default=None,
        help="Azure OpenAI: https://RESOURCE.openai.azure.com (with --api-version, --model DEPLOYMENT, "
        "--price-as MODEL; the key from $AZURE_OPENAI_API_KEY); sent through the openai package",
    )
    common.add_argument("--api-version", default=None, help="Azure OpenAI's API version, e.g. 2024-10-21")
    common.add_argument(
        "--price-as", default=None, help="the model the served one is priced as (an Azure deployment's model)"
    )
    common.add_argument(
        "--serve",
        choices=["llama", "vllm"],
        default=None,
        help="without --base-url, the embedded local LLM on llama.cpp's server (default) or on vLLM's CPU build "
        "(`python -m llm_anchors.backends.vllm setup` first)",
    )
    common.add_argument(
        "--endpoint",
        choices=["auto", "completions", "chat", "decisions", "systemone"],
        default="auto",
        help="completions (a list of prompts a request), chat, or a decision endpoint: decisions (OpenAI's "
        "{base_url}/decisions), systemone (vLLM's and llama-server's); auto: chat on api.openai.com, else completions",
    )
    common.add_argument("--prompt", default=None, help="prompt template with {text}, or @FILE to read it from")
    common.add_argument(
        "--request", default=None,
        help="the chat request your code sends, as JSON (@FILE to read it): {text} in one message; sent as it is "
        "to the chat endpoint, its label read where its schema's one enum field (or forced tool's) is, else its "
        "content",
    )  # fmt: skip
    common.add_argument(
        "--label-field", default=None,
        help="with --request: the field (dotted) of its JSON or tool arguments the label is read from, when its "
        "schema has several enum fields",
    )  # fmt: skip
    common.add_argument("--labels", default=None, help="comma-separated label words (default: negative,positive)")
    common.add_argument("--seed", type=_number("natural"), default=0)
    common.add_argument("--threshold", type=_number("number"), default=0.95, help="precision an anchor must reach (τ)")
    common.add_argument(
        "--certify",
        choices=["default", "strict"],
        default=None,
        help="what a claim certifies, both on samples drawn after the anchor was chosen, δ shared among the "
        "rules tested: default, precision ≥ τ − 0.05; strict, precision ≥ τ (more queries; the model also "
        "asked again about a few texts). run and estimate: strict unless told; explain: default",
    )
    common.add_argument(
        "--max-words", type=_number("count"), default=MAX_WORDS, help="longest input explained, in words"
    )
    common.add_argument(
        "--unit",
        choices=["auto", "word", "sentence"],
        default="auto",
        help="what a feature is: a word; a sentence; auto (default): a text of 3+ sentences is searched by "
        "sentences, then by the words inside the anchor's sentences; a shorter one by words",
    )
    common.add_argument(
        "--perturbation",
        choices=list(PERTURBATIONS),
        default="unk",
        help="what becomes of a hidden word: replaced by UNK (default, Anchors'), deleted, or replaced by one "
        "of its nearest words (similar)",
    )
    common.add_argument(
        "--second-opinion",
        choices=list(PERTURBATIONS),
        default=None,
        help="explain and run: after the search, measure each anchor's precision under this other perturbation "
        "too, on --second-opinion-samples fresh samples (paid queries, counted in the explanation)",
    )
    common.add_argument(
        "--second-opinion-samples", type=_number("count"), default=200, help="fresh samples of a second opinion"
    )
    common.add_argument(
        "--p-hide",
        type=_number("rate"),
        default="auto",
        help="how often a word (sentence) outside the anchor is hidden: a probability (Anchors': 0.5); "
        '"uniform": a rate drawn per perturbation from U(0, 1); "auto" (default): uniform by sentences, 0.5 '
        "by words alone",
    )
    common.add_argument(
        "--max-concurrency", dest="max_concurrency", type=_number("count"), default=8,
        help="requests in flight",
    )  # fmt: skip
    common.add_argument(
        "--timeout", type=_number("seconds"), default=60.0,
        help="seconds a request to a remote server is waited for, longer when it carries more than the server "
        "answers in that time (default 60); a server on this machine is waited for until it answers",
    )  # fmt: skip
    common.add_argument(
        "--max-attempts", type=_number("count"), default=6, help="attempts per call on 429/5xx/timeouts (default 6)"
    )
    common.add_argument(
        "--max-elapsed", type=_number("seconds"), default=120.0,
        help="the deadline of one model call: every attempt, every wait between them and a busy local server's "
        "answer end within it (default 120 s); a Retry-After past it ends the call",
    )  # fmt: skip
    common.add_argument("--max-usd", type=_number("usd"), default=None, help="spend cap in USD")
    common.add_argument("--max-queries", type=_number("natural"), default=None, help="cap on model queries")
    common.add_argument(
        "--service-tier",
        default=None,
        help="asked of the server: flex (about half the price, slower), priority, auto (the account's default); "
        "one of the model's tiers in the price data. Calls are reserved at the dearest tier and billed at the "
        "one the server says",
    )
    common.add_argument(
        "--reasoning-effort",
        choices=["none", "minimal", "low", "medium", "high", "xhigh"],
        default=None,
        help="a reasoning model's effort (default: the lowest OpenAI's model of that name takes: minimal for "
        "gpt-5, none from gpt-5.1, low for o-series; a model that does not reason: not sent)",
    )
    common.add_argument(
        "--max-output-tokens",
        type=_number("count"),
        default=None,
        help="most output tokens an answer may take, reasoning included (default 1; 256 for a reasoning model): "
        "every call reserves it",
    )
    price = common.add_mutually_exclusive_group()
    price.add_argument("--price-file", default=None, help="JSON prices per model (USD per 1M tokens)")
    price.add_argument(
        "--free", action="store_true", help="the model at --base-url costs nothing (a local model with no price)"
    )
    return common


def _input_options() -> argparse.ArgumentParser:
    """The options `run` and `estimate` share: the inputs, the results file, the memory."""
    inputs = argparse.ArgumentParser(add_help=False)
    inputs.add_argument("input", help="JSONL, CSV or plain text (one input per line); - reads standard input")
    inputs.add_argument("--format", choices=["auto", "jsonl", "csv", "text"], default="auto")
    inputs.add_argument("--text-field", default="text", help="JSONL: the field holding the text (default text)")
    inputs.add_argument("--text-column", default="text", help="CSV: the column holding the text (default text)")
    inputs.add_argument("--out", default="results.jsonl", help="results file (default results.jsonl)")
    memory = _explainer_options(
        inputs,
        "where MAnchors' memory is kept (default OUT.memory): an exact repeat is answered from it at no "
        "query, earlier anchors are proposed for similar inputs, and its record asks it only while it pays",
    )
    memory.add_argument("--no-memory", action="store_true", help="MAnchors without its memory: growth alone")
    return inputs


def _explainer_options(parser: argparse.ArgumentParser, memory: str) -> Any:
    """Which explainer a command runs: MAnchors with its memory kept in ``--memory DIR`` (``memory``: what
    the option's help says), or ``--anchors``; the group, for options of its own."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--memory", default=None, metavar="DIR", help=memory)
    group.add_argument("--anchors", action="store_true", help="plain Anchors (the beam search): the baseline")
    return group


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-anchors", description="Explain an LLM's classification with an anchor.")
    parser.add_argument("--version", action="version", version=f"llm-anchors {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = _model_options()
    explain = sub.add_parser(
        "explain",
        parents=[common],
        help="explain the label of one text (MAnchors' guided search)",
        description="Explain TEXT's label with an anchor, found by MAnchors' guided search (--anchors: plain "
        "Anchors, the baseline), certified, with what it cost.",
    )
    explain.add_argument("text", help="the text to explain")
    explain.add_argument(
        "--on-budget",
        choices=["raise", "return"],
        default="return",
        help="when a cap is reached: fail, or print the best rule so far (default)",
    )
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    _explainer_options(
        explain,
        "keep MAnchors' memory in DIR across commands: the same text explained again is answered from it "
        "at no query, and its earlier anchors are proposed for similar texts (default: no memory)",
    )
    check = sub.add_parser(
        "check",
        parents=[common],
        help="a given anchor's precision and coverage, under any perturbation",
        description="Estimate the precision (on --n fresh perturbations, paid queries) and the coverage (no "
        "query) of the anchor --anchor of TEXT under --perturbation: a second opinion on an anchor found "
        "under another operator, or by hand.",
    )
    check.add_argument("text", help="the text the anchor is of")
    check.add_argument("--anchor", required=True, help='the anchor\'s words, e.g. "not bad"')
    check.add_argument("--n", type=_number("count"), default=1000, help="fresh perturbations (default 1000)")
    check.add_argument("--json", action="store_true", help="print the estimates as one JSON object")
    inputs = _input_options()
    run = sub.add_parser(
        "run",
        parents=[common, inputs],
        help="explain every text of a file: resumable, under a spend cap",
        description="Explain every input of INPUT into --out (JSON lines, appended as each finishes). "
        "Run the same command again to carry on after a crash, Ctrl-C or a spent cap; caps (--max-usd, "
        "--max-queries) hold for the whole run, across restarts. An input that cannot be explained (empty, "
        "longer than --max-words) is recorded as failed, with the reason, and the run goes on.",
    )
    run.add_argument("--max-usd-per-text", type=_number("usd"), default=None, help="spend cap of each explanation")
    run.add_argument(
        "--inputs-at-once", type=_number("count"), default=1, help="inputs explained at once (MAnchors: 1 is exact)"
    )
    run.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="spread the run over Ray workers sharing the cap and the memory: a cluster's address "
        "(auto, ray://host:10001), or none to start Ray here (pip install 'llm-anchors[ray]')",
    )
    run.add_argument("--workers", type=_number("count"), default=2, help="--ray: explainers at once (default 2)")
    estimate = sub.add_parser(
        "estimate",
        parents=[common, inputs],
        help="what explaining a file will cost, from a seeded pilot, before the run pays",
        description="Explain a seeded pilot of INPUT's inputs (20%% of them, at most 50, holding at most 20%% "
        "of the words) as `run` would, keeping its labels in OUT's label cache so the run does not pay for them "
        "again, and print the queries and dollars the run will take for the rest, with a 95%% range. The pilot "
        "spends under the run's caps (--max-usd, --max-queries), journaled beside --out: a run on the same --out "
        "counts what its pilot spent. A pilot its cap stops prints the forecast it can, marked partial (exit 3).",
    )
    estimate.add_argument("--json", action="store_true", help="print the forecast as one JSON object")
    estimate.add_argument("--pilot-seed", type=_number("natural"), default=0, help="seed of the pilot's sample")
    report = sub.add_parser(
        "report",
        help="a run's results as one self-contained HTML page",
        description="Write RESULTS (the --out of llm-anchors run) as one static HTML page: a summary, the "
        "cumulative spend, the most frequent anchor words per label, and every input with its anchor marked.",
    )
    report.add_argument("results", help="a results file written by llm-anchors run")
    report.add_argument("-o", "--out", default="report.html", help="the page to write (default report.html)")
    report.add_argument(
        "--baseline",
        default=None,
        help="results of a plain-Anchors run (--anchors) of the same inputs: "
        "the summary then shows what MAnchors saved",
    )
    report.add_argument("--title", default=None, help="the page's title")
    return parser
