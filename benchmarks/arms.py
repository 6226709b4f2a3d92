"""Which candidates KL-LUCB runs over: the top 3 by estimate, all of them, or every plausible one.

    python -m benchmarks.arms --seeds 100

A synthetic model of known precision per rule: a sentence of 15 words; the
label is kept with probability 0.96 when the word "key" is present and 0.84
when it is absent, so the rule {key} has precision 0.96 (an anchor at
τ = 0.95) and every other one-word rule 0.90 (the empty rule too). Per seed
and setting: whether the anchor found is {key}, and the samples spent.
The settings: ``arms="top"`` with ``max_arms=3`` (the default), with
``max_arms=None`` (every arm, the reference), and ``arms="plausible"``
(every candidate whose KL upper bound reaches the best lower bound).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
from typing import Any

from llm_anchors import AnchorsExplainer, FunctionClassifier, SearchParams

from ._common import write_json

SENTENCE = "key " + " ".join(f"w{i}" for i in range(14))
SETTINGS: dict[str, dict[str, Any]] = {
    "top 3 (default)": {"search": SearchParams(arms="top", max_arms=3)},
    "every arm": {"search": SearchParams(arms="top", max_arms=None)},
    "plausible": {"search": SearchParams(arms="plausible")},
}


def coin(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def model(texts: list[str]) -> list[int]:
    return [int(t == SENTENCE or coin(t) < (0.96 if "key" in t.split() else 0.84)) for t in texts]


async def run(seeds: int) -> dict[str, dict[str, Any]]:
    out = {}
    for name, options in SETTINGS.items():
        found = samples = 0
        for seed in range(seeds):
            async with AnchorsExplainer(FunctionClassifier(model, name=f"synthetic-{seed}"), **options) as e:
                exp = await e.explain(SENTENCE, seed=seed)
            found += exp.data.anchor == ("key",)
            samples += exp.meta.samples
        out[name] = {"found": found, "seeds": seeds, "samples_mean": samples / seeds}
        print(f"{name:18s} found key {found}/{seeds}, {samples / seeds:,.0f} samples", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.seeds))
    print("\n| arms | found {key} | samples per explanation |\n| --- | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {r['found']}/{r['seeds']} | {r['samples_mean']:,.0f} |")
    print(f"wrote {write_json('arms', {'seeds': args.seeds, 'results': results})}")


if __name__ == "__main__":
    main()
