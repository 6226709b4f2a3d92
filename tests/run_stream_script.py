"""A resumable run over a keyword model, for tests that kill it: ``python run_stream_script.py OUT CAP``.

Exit 0 when every input is explained, 3 when the run's cap stopped it.
"""

import asyncio
import sys

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer, QueryCache
from llm_anchors.run import ResultsFile, explain_resumable

POSITIVE = {"good", "great", "fine", "love", "wonderful"}
TEXTS = [
    f"a {w} film with {v} acting and a {u} plot"
    for w in ("good", "bad", "dull", "great")
    for v in ("fine", "poor", "wooden")
    for u in ("love", "thin")
]


def predict(texts):
    return ["pos" if set(t.lower().split()) & POSITIVE else "neg" for t in texts]


async def main(out: str, cap: int, kind: str) -> int:
    explainer_type = MAnchorsExplainer if kind == "manchors" else AnchorsExplainer
    clf = FunctionClassifier(predict, name="keywords")
    cache = QueryCache(out + ".cache.sqlite")
    with ResultsFile(out) as results, results.open_budget(max_queries=cap) as budget:
        async with explainer_type(clf, seed=0, budget=budget, on_budget="return", cache=cache) as explainer:
            report = await explain_resumable(explainer, TEXTS, results, memory_dir=out + ".memory", save_every=3)
    return 3 if report.stopped == "budget" else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "manchors")))
