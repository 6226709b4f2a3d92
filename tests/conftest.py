"""Shared helpers: synthetic classifiers over word sets; the test tiers.

Tiers: the fast one is ``-m "not llm and not browser and not slow"`` (no
network, no model server, no browser; about two minutes on 2 cores); ``llm``
marks every test that uses the real local LLM (given by its fixture, so the
mark cannot be forgotten), ``vllm`` every test of the same model on a real
vLLM server, ``browser`` the Chromium test, ``slow`` the rest that takes
more than a few seconds.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.environ["LLM_ANCHORS_DATA"] = FIXTURES  # the tests read the excerpts the repository ships (tests/data/README.md)


def needs_all(*words: str):
    """Label 1 iff every one of ``words`` occurs in the text, else 0."""

    def classify(texts: list[str]) -> list[int]:
        return [int(all(w in t.split() for w in words)) for t in texts]

    return classify


def bet_certifies_at(labels, params, share):
    """Where the certifier's bet (search/certify.py's docstring, written out again here) certifies a rule
    of this ``share`` whose fresh samples keep the label as ``labels`` say: the 1-based index, or None."""
    import math

    bound, tau = params.bound, params.threshold
    wealth, kept = 0.0, 0
    for i, agreed in enumerate(labels):
        prior = 1 - params.bet_gap * (1 - bound)
        guess = (kept + params.bet_weight * prior) / (i + params.bet_weight)
        if guess > bound:
            wealth += math.log(guess / bound) if agreed else math.log((1 - guess) / (1 - bound))
        kept += bool(agreed)
        if wealth >= math.log(1 / share) and (params.certify == "strict" or kept >= tau * (i + 1)):
            return i + 1
    return None


def run_search(search, label_of_present, seed=0, score_of_present=None):
    """Drive a BeamSearch with unk perturbations and a classifier on the kept-word matrix.

    ``label_of_present`` maps an (n × F) boolean matrix to n booleans (label == target);
    ``score_of_present``, if given, to the probability the model gives the target (`Samples.scores`).
    Returns the result and the list of request batches the search yielded.
    """
    from llm_anchors.search import Samples, run_sync

    rng = np.random.default_rng(seed)
    batches = []

    def answer(requests):
        batches.append(requests)
        answers = []
        for r in requests:
            present = rng.random((r.n, search.n_features)) >= 0.5
            present[:, sorted(r.rule)] = True
            scores = None if score_of_present is None else np.asarray(score_of_present(present), dtype=float)
            answers.append(Samples(present, np.asarray(label_of_present(present), dtype=bool), scores))
        return answers

    return run_sync(search.run(), answer), batches


def pool(n_features, n=10_000, seed=123):
    return np.random.default_rng(seed).random((n, n_features)) >= 0.5


@pytest.fixture(scope="session")
def llama_url():
    """The real local LLM: the server .ci/run started ($LLM_ANCHORS_LLAMA_URL), else one started here.

    Never skipped: without a built llama-server this fails with the command that builds it.
    """
    if url := os.environ.get("LLM_ANCHORS_LLAMA_URL"):
        yield url
        return
    from llm_anchors.backends.llamacpp import LlamaServer

    with LlamaServer() as server:
        yield server.base_url


@pytest.fixture(scope="session")
def vllm_url():
    """The real vLLM serving the local LLM: the server .ci/run started ($LLM_ANCHORS_VLLM_URL), else one
    started here. Never skipped: without vLLM set up this fails with the command that sets it up."""
    if url := os.environ.get("LLM_ANCHORS_VLLM_URL"):
        yield url
        return
    from llm_anchors.backends.vllm import VllmServer

    with VllmServer() as server:
        yield server.base_url


def pytest_collection_modifyitems(config, items):
    """Every test that asks for a real model server is marked by it (``llm``: llama-server; ``vllm``):
    the tier follows the fixture."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "llama_url" in names:
            item.add_marker(pytest.mark.llm)
        if "vllm_url" in names:
            item.add_marker(pytest.mark.vllm)


@pytest.fixture(autouse=True)
def _credentials_forgotten():
    """Each test starts knowing no credential: what another test's backends `remember`-ed is forgotten."""
    from llm_anchors import _secrets

    yield
    _secrets._KNOWN.clear()
