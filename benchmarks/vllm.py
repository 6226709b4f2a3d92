"""The embedded model on vLLM against the same model on llama-server, and the engine against a bare client.

    python -m benchmarks.vllm [--n 12] [--max-words 12]     # starts llama-server, then vLLM (CPU build)

1. **Agreement.** The README's sentence and ``n`` RT-Polarity sentences: each label's first-token
   probability on llama-server (Gemma 3 270M, Q4_K_M GGUF; its top 5 alternatives, a label absent
   from them read 0) and on vLLM (the same weights dequantised to bfloat16; exactly the labels'
   tokens, ``logprob_token_ids``), side by side, and the README sentence explained on both with the
   same seed.
2. **Throughput.** Anchors explains the ``n`` sentences on vLLM; then a bare aiohttp client sends
   the prompts the engine sent, in the engine's request shape (8 a request, 8 requests in flight,
   the same label-token fields), and the two rates are compared. One server at a time: nothing else
   runs while a rate is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from collections.abc import Sequence
from typing import Any

from llm_anchors import AnchorsExplainer, LLMClassifier
from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT, LlamaServer
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.backends.vllm import SERVED_NAME, VllmServer
from llm_anchors.backends.vllm_api import label_request
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.extend import Completion

from ._common import short_order, write_json
from .baseline_llm import raw_load

README_SENTENCE = "a charming , funny and moving film"
LLAMA_NAME = "gemma-3-270m-q4_k_m"


def classifier(url: str, model: str) -> LLMClassifier:
    backend = OpenAICompatibleBackend(url, model, endpoint="completions", max_request_size=8)
    return LLMClassifier(backend, DEFAULT_PROMPT, DEFAULT_LABELS)


def label_probabilities(clf: LLMClassifier, completion: Completion) -> dict[str, float]:
    """Each label's first-token probability: the alternatives that name it, added."""
    probabilities = dict.fromkeys(clf.labels, 0.0)
    for token, logprob in (completion.alternatives or {}).items():
        label = clf.answer(Completion(token))[0]
        if label in probabilities:
            probabilities[str(label)] += math.exp(logprob)
    return probabilities


async def probabilities(clf: LLMClassifier, texts: Sequence[str]) -> list[dict[str, float]]:
    answers = await clf.backend.complete([clf.render(t) for t in texts], clf.params)
    return [label_probabilities(clf, item) for item in answers.items]


async def explained(clf: LLMClassifier, text: str, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    async with AnchorsExplainer(clf, seed=seed) as explainer:
        exp = await explainer.explain(text)
    return {
        "label": exp.data.label, "anchor": list(exp.data.anchor), "precision": exp.data.precision,
        "samples": exp.meta.samples, "queries": exp.meta.queries, "time_s": time.perf_counter() - started,
    }  # fmt: skip


async def on_server(url: str, model: str, texts: list[str], seed: int) -> dict[str, Any]:
    clf = classifier(url, model)
    try:
        return {"probabilities": await probabilities(clf, texts), "readme": await explained(clf, texts[0], seed)}
    finally:
        await clf.aclose()


async def engine_rate(url: str, texts: list[str], seed: int) -> tuple[float, list[str], dict[str, Any]]:
    """Queries a second while Anchors explains ``texts`` on vLLM; the prompts it sent; the label fields."""
    clf = classifier(url, SERVED_NAME)
    queries, spent = 0, 0.0
    async with AnchorsExplainer(clf, seed=seed) as explainer:
        for text in texts:
            started = time.perf_counter()
            exp = await explainer.explain(text)
            spent += time.perf_counter() - started
            queries += exp.meta.queries
        sent = [clf.render(t) for t in explainer.cache.labels(clf.identity)]
        backend = clf.backend
        assert isinstance(backend, OpenAICompatibleBackend)
        fields = label_request(await backend.label_tokens(clf.params))
    return queries / spent, sent, fields


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=12, help="RT-Polarity sentences (default 12)")
    parser.add_argument("--max-words", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    texts, _ = load_rt_polarity(args.data)
    chosen = [texts[i] for i in short_order(texts, 42, args.max_words)[: args.n]]
    compared = [README_SENTENCE, *chosen]
    with LlamaServer() as llama:
        on_llama = asyncio.run(on_server(llama.base_url, LLAMA_NAME, compared, args.seed))
    started = time.perf_counter()
    with VllmServer() as vllm:
        start_s = time.perf_counter() - started
        on_vllm = asyncio.run(on_server(vllm.base_url, SERVED_NAME, compared, args.seed))
        engine, sent, fields = asyncio.run(engine_rate(vllm.base_url, chosen, args.seed))
        bare = asyncio.run(raw_load(vllm.base_url, SERVED_NAME, sent, per_request=8, concurrency=8, fields=fields))
    print(f"\n{'sentence':48} {'llama P(pos)':>12} {'vLLM P(pos)':>12} {'llama P(neg)':>12} {'vLLM P(neg)':>12}")
    gaps = []
    for text, a, b in zip(compared, on_llama["probabilities"], on_vllm["probabilities"], strict=True):
        gaps.append(abs(a["positive"] - b["positive"]))
        print(f"{text[:48]:48} {a['positive']:12.3f} {b['positive']:12.3f} {a['negative']:12.3f} {b['negative']:12.3f}")
    same = sum((a["positive"] > a["negative"]) == (b["positive"] > b["negative"])
               for a, b in zip(on_llama["probabilities"], on_vllm["probabilities"], strict=True))  # fmt: skip
    print(f"same label on {same}/{len(compared)}; |ΔP(positive)| median {sorted(gaps)[len(gaps) // 2]:.3f}, "
          f"max {max(gaps):.3f}")  # fmt: skip
    for name, run in (("llama-server", on_llama), ("vLLM", on_vllm)):
        r = run["readme"]
        print(f"{name:12} {README_SENTENCE!r}: {r['label']}, anchor {r['anchor']}, precision {r['precision']:.3f}, "
              f"{r['queries']} queries, {r['time_s']:.1f} s")  # fmt: skip
    print(f"vLLM started in {start_s:.0f} s; throughput on vLLM: engine {engine:.1f} prompts/s, bare client "
          f"{bare:.1f} prompts/s on the {len(sent)} prompts it sent: ratio {engine / bare:.2f}")  # fmt: skip
    payload = {"params": vars(args), "compared": compared, "llama": on_llama, "vllm": on_vllm,
               "vllm_start_s": start_s, "engine_prompts_per_s": engine, "bare_prompts_per_s": bare,
               "engine_over_bare": engine / bare, "prompts": len(sent)}  # fmt: skip
    print(f"wrote {write_json('vllm', payload)}")


if __name__ == "__main__":
    main()
