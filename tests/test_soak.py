"""Fault and soak: a MAnchors stream through a faulty server, with explanations cancelled at random.

Asserts what issue 12 asks: no hang, no leaked task or session, every
surviving explanation equal to the fault-free run, and the memory saved and
reloaded identical. The numbers are printed (``pytest -s``) for the record.
"""

import asyncio
import gc
import random
import time
import warnings

import pytest

from llm_anchors import LLMClassifier, MAnchorsExplainer, RetryPolicy
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.datasets import load_rt_polarity, shuffled
from llm_anchors.samplers import SentenceEmbedder
from tests.fault_server import FaultServer

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]
POSITIVE = {"good", "great", "best", "fun", "funny", "beautiful", "moving", "charming", "smart", "wonderful", "a"}
FAULTS = ["429", "500", "timeout", "truncated", "html", "drop"]
N_INPUTS = 60
CANCEL_SHARE = 0.05


pytestmark = pytest.mark.slow


def sentiment(prompt: str) -> str:
    words = set(prompt.split("Review: ")[-1].lower().split())
    return "positive" if len(words & POSITIVE) >= 1 and "not" not in words else "negative"


class Gate:
    """The classifier, but a call may be made to block forever (the test then cancels it)."""

    def __init__(self, inner):
        self.inner = inner
        self.block_at: int | None = None
        self.calls = 0

    @property
    def identity(self):
        return self.inner.identity

    @property
    def max_request_size(self):
        return self.inner.max_request_size

    async def classify(self, texts):
        self.calls += 1
        if self.block_at is not None and self.calls >= self.block_at:
            await asyncio.Event().wait()
        return await self.inner.classify(texts)

    async def aclose(self):
        await self.inner.aclose()


def explainer(url, embedder):
    backend = OpenAICompatibleBackend(url, "fake", timeout=0.5, max_request_size=8)
    classifier = Gate(LLMClassifier(backend, PROMPT, LABELS))
    retry = RetryPolicy(max_attempts=30, initial_wait=0.01, max_wait=0.05, jitter=0.01)
    return MAnchorsExplainer(classifier, seed=0, embedder=embedder, retry=retry, max_concurrency=8)


@pytest.fixture(scope="module")
def stream():
    texts, _ = load_rt_polarity()
    order = [int(i) for i in shuffled(len(texts), 11) if 6 <= len(texts[i].split()) <= 14]
    return [texts[i] for i in order[:N_INPUTS]]


async def test_a_faulty_server_and_cancellations_change_nothing_that_survives(stream, tmp_path):
    embedder = SentenceEmbedder()
    rng = random.Random(12)
    cancelled = set(rng.sample(range(len(stream)), max(1, round(CANCEL_SHARE * len(stream)))))
    block_at = {i: rng.randint(1, 3) for i in cancelled}
    survivors = [i for i in range(len(stream)) if i not in cancelled]

    async with FaultServer(answer=sentiment) as clean:
        reference = explainer(clean.base_url, embedder)
        expected = {i: await reference.explain(stream[i]) for i in survivors}
        await reference.aclose()

    started = time.perf_counter()
    async with FaultServer(answer=sentiment, fail_rate=0.10, kinds=FAULTS, seed=5, hang_s=1.0) as flaky:
        m = explainer(flaky.base_url, embedder)
        got = {}
        for i, text in enumerate(stream):
            gate = m.classifier
            if i in cancelled:
                gate.calls, gate.block_at = 0, block_at[i]
                task = asyncio.ensure_future(m.explain(text))
                while gate.calls < block_at[i]:
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await asyncio.wait_for(task, 10)
                gate.block_at = None
                continue
            got[i] = await asyncio.wait_for(m.explain(text), 120)  # no hang
        m.save(tmp_path / "memory")
        await m.aclose()
    elapsed = time.perf_counter() - started

    for i in survivors:
        assert got[i].data == expected[i].data, stream[i]
        assert got[i].meta.samples == expected[i].meta.samples
    assert m.engine._inflight == {}
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]

    again = explainer(flaky.base_url, embedder)
    again.load(tmp_path / "memory")
    assert again.store.entries == m.store.entries == reference.store.entries and len(again.store) > 0

    injected = sum(v for k, v in flaky.counts.items() if k != "ok")
    queries = sum(x.meta.queries for x in got.values())
    retries = sum(x.meta.cost.retries for x in got.values())
    print(
        f"\nsoak: {len(stream)} inputs, {len(cancelled)} cancelled, {queries:,} queries sent by survivors, "
        f"{flaky.counts['ok'] + injected:,} requests served, {injected} faults injected "
        f"({dict((k, v) for k, v in flaky.counts.items() if k != 'ok')}), {retries} retries, {elapsed:.1f} s"
    )
    assert queries >= 1000 and set(flaky.counts) >= set(FAULTS)
