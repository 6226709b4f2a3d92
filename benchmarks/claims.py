"""Is the claim true of the anchor returned? The flat-null stress test.

    python -m benchmarks.claims --explainer {anchors,manchors} --certify {default,strict} \\
        [--p0 P] [--seeds N] [--first-seed S] [--features F] [--document] [--json]

Every rule of a synthetic input has the same precision ``p0``: each
perturbation keeps the label with probability ``p0``, whatever words it
keeps. By default ``p0`` sits just below the bound the claim states (τ −
ε_stop for ``default``, τ for ``strict``), so every anchor returned with
``success`` makes a false claim, and the share of such explanations must
stay at most δ for "with probability ≥ 1 − δ" to hold of the anchor
returned. Each seed runs the search the explainer runs on a miss (Anchors'
`BeamSearch`, or MAnchors' `GuidedSearch`: growth),
built by the explainer itself, its samples drawn by the text sampler as an
explanation draws them; ``manchors-memory``: the memory filled with the
anchors the earlier seeds returned, proposed as it proposes an earlier
anchor made of an input's own words (first, and final when certified); ``manchors-scored``: growth as
for a model that gives probabilities (each sample's probability of the label drawn above ½ when it kept the label, below
when not: `Samples.scores`, which choose what is tested and never certify). ``--document``: the input is
perturbed as a document's sentences are (each perturbation's hiding rate drawn from U(0, 1), the search
reweighing the samples a rule reuses). Prints one JSON line (``--json``) or a sentence:
``false_rate``, its standard error ``se``, ``delta``, the mean samples,
rules sampled and rules tested (given a share of δ) per search.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Literal

import numpy as np

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer, SearchParams, TextSampler
from llm_anchors.propose import MemoryParams, MemoryRules, Proposer
from llm_anchors.search import BeamSearch, SampleRequest, Samples, Search, SearchResult, run_sync

Certify = Literal["default", "strict"]

EDGE = 0.001
"""How far below the claimed bound ``p0`` sits by default."""


def explainer(kind: str, certify: Certify) -> AnchorsExplainer:
    clf = FunctionClassifier(lambda texts: ["pos"] * len(texts), name="flat-null")
    if kind == "anchors":
        return AnchorsExplainer(clf, search=SearchParams(certify=certify))
    return MAnchorsExplainer(clf, search=SearchParams(certify=certify))


def edge(e: AnchorsExplainer) -> float:
    """The precision just below the bound the explainer's claim states."""
    p = e.params
    return round((p.threshold if p.certify == "strict" else p.threshold - p.epsilon_stop) - EDGE, 10)


def one(
    e: AnchorsExplainer,
    seed: int,
    p0: float,
    n_features: int,
    remembered: list[frozenset[int]] | None = None,
    document: bool = False,
    scored: bool = False,
) -> tuple[SearchResult, int]:
    """One search on a flat-null input of ``n_features`` words; its result and the rules it tested.
    ``remembered``: the anchors earlier searches of the null returned, proposed as the memory proposes
    an earlier anchor made of an input's own words (before the empty rule, final when certified);
    ``document``: perturbed as a document's sentences are (a hiding rate drawn per sample)."""
    rng = np.random.default_rng(seed)
    sampler = TextSampler(p_hide="uniform") if document else TextSampler()
    instance = sampler.features(" ".join(f"w{i}" for i in range(n_features)))
    pool = sampler.sample_present(instance, frozenset(), e.params.coverage_samples, rng)
    search: Search
    if isinstance(e, MAnchorsExplainer):
        proposers: list[Proposer] = []
        if remembered:
            most = (e.memory or MemoryParams()).max_proposals  # the latest first, as many as it asks
            rules = tuple(dict.fromkeys(remembered[::-1]))[:most]
            proposers += MemoryRules(exact=rules).proposers(first=True)  # as the memory proposes them
        search = e.guided_search(n_features, pool, proposers, rate_per_sample=document)
    else:
        search = BeamSearch(n_features, pool, e.params, rate_per_sample=document)
    sampled: set[frozenset[int]] = set()

    def answer(requests: list[SampleRequest]) -> list[Samples]:
        answers = []
        for r in requests:
            sampled.add(r.rule)
            present = sampler.sample_present(instance, r.rule, r.n, rng)
            kept = rng.random(r.n) < p0
            scores = np.where(kept, 0.5 + 0.5 * rng.random(r.n), 0.5 * rng.random(r.n)) if scored else None
            answers.append(Samples(present, kept, scores))
        return answers

    return run_sync(search.run(), answer), len(sampled)


def run(
    kind: str, certify: Certify, p0: float | None, seeds: int, first_seed: int, n_features: int, document: bool = False
) -> dict[str, Any]:
    e = explainer(kind, certify)
    p0 = edge(e) if p0 is None else p0
    bound = round(edge(e) + EDGE, 10)
    false = samples = sampled = tested = 0
    remembered: list[frozenset[int]] | None = [] if kind == "manchors-memory" else None
    for seed in range(first_seed, first_seed + seeds):
        result, rules = one(e, seed, p0, n_features, remembered, document, kind == "manchors-scored")
        if remembered is not None and result.success and result.rule:
            remembered.append(result.rule)  # the memory, filled with this null's earlier anchors
        false += int(result.success and p0 < bound)
        samples += result.samples_used
        sampled += rules
        tested += result.tested
    rate = false / seeds
    return {
        "explainer": kind, "certify": certify, "p0": p0, "bound": bound, "seeds": seeds, "first_seed": first_seed,
        "features": n_features, "document": document, "false_rate": rate, "se": math.sqrt(rate * (1 - rate) / seeds),
        "delta": e.params.delta, "samples": samples / seeds, "rules_sampled": sampled / seeds,
        "rules_tested": tested / seeds,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--explainer",
        choices=["anchors", "manchors", "manchors-memory", "manchors-scored"],
        default="anchors",
    )
    parser.add_argument("--certify", choices=["default", "strict"], default="default")
    parser.add_argument("--p0", type=float, default=None, help="every rule's precision (default: just below the bound)")
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--features", type=int, default=10, help="words of the synthetic input (default 10)")
    parser.add_argument("--document", action="store_true", help="a hiding rate drawn per sample, as a document's")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    out = run(args.explainer, args.certify, args.p0, args.seeds, args.first_seed, args.features, args.document)
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{out['explainer']} ({out['certify']}{', document' if out['document'] else ''}), every rule at "
            f"precision {out['p0']:.3f} < {out['bound']:.3f}: "
            f"a false claim in {out['false_rate']:.1%} ± {out['se']:.1%} of {out['seeds']} explanations "
            f"(δ = {out['delta']}); {out['samples']:.0f} samples, {out['rules_sampled']:.1f} rules sampled and "
            f"{out['rules_tested']:.1f} tested each"
        )


if __name__ == "__main__":
    main()
