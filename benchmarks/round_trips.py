"""Sequential round trips to the model per explanation: what a batch API would have to wait for.

    python -m benchmarks.round_trips --n 100

Each round trip (the input's label, the root sample, each KL-LUCB pull, each
verification) depends on the labels of the one before, so under a batch API
it would be one batch job. Counted with the public progress callback (called
after every batch of labels) on the seeded RT-Polarity order with the TF-IDF +
random forest, for plain Anchors and MAnchors (guided). docs/batch-api.md
uses this table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer
from llm_anchors.datasets import shuffled

from ._common import markdown_table, write_json
from ._models import train_text_rf


async def run(n: int, seed: int, data: str | None) -> dict[str, list[int]]:
    model, texts, _ = train_text_rf(data=data)
    order = [int(i) for i in shuffled(len(texts), 42)[:n]]
    clf = FunctionClassifier(model.predict, name="tfidf-rf-rt-polarity")
    trips: dict[str, list[int]] = {}
    for kind in (AnchorsExplainer, MAnchorsExplainer):
        counts = trips.setdefault(kind.__name__, [])
        async with kind(clf, seed=seed) as explainer:
            for i in order:
                calls = [1]  # the input's own label comes first, before any progress report

                def count(_: Any, calls: list[int] = calls) -> None:
                    calls[0] += 1

                await explainer.explain(texts[i], progress=count)
                counts.append(calls[0])
    return trips


def markdown(trips: dict[str, list[int]]) -> str:
    header = ("| explainer | median | mean | p90 | max |", "| --- | ---: | ---: | ---: | ---: |")
    return markdown_table(header, (_row(name, counts) for name, counts in trips.items()))


def _row(name: str, counts: list[int]) -> str:
    p90 = sorted(counts)[int(0.9 * (len(counts) - 1))]
    return f"| {name} | {statistics.median(counts):g} | {statistics.mean(counts):.1f} | {p90} | {max(counts)} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="sentences to explain (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="explainer seed")
    parser.add_argument("--data", default=None, help="folder holding rt-polarity/ (default ../shared/data)")
    args = parser.parse_args(argv)
    trips = asyncio.run(run(args.n, args.seed, args.data))
    print(markdown(trips))
    print(f"wrote {write_json(f'round_trips_n{args.n}', {'n': args.n, 'seed': args.seed, 'round_trips': trips})}")


if __name__ == "__main__":
    main()
