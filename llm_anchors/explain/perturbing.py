"""What perturbing needs beyond the sampler: the filler models of ``infill`` (one engine each, on the
explainer's cap and cache), and the sampler of a second opinion."""

from __future__ import annotations

from typing import TypeGuard

from .._exceptions import ConfigError
from ..models.classifier import Classifier
from ..models.llm import LLMClassifier
from ..money.budget import SpendCap
from ..query.engine import QueryEngine, QueryStats
from ..samplers.base import Instance, Sampler
from ..samplers.infill import Filler
from ..samplers.text import TextSampler
from ..samplers.text_instance import TextInstance
from .meta import SecondOpinion

__all__ = ["Fillers", "infills", "opinion_sampler"]


def infills(sampler: Sampler | None) -> TypeGuard[TextSampler]:
    """Whether ``sampler`` perturbs by a filler model's fills (which are asked for before the search)."""
    return isinstance(sampler, TextSampler) and sampler.perturbation == "infill"


def opinion_sampler(sampler: Sampler, second: SecondOpinion | None) -> TextSampler | None:
    """The sampler a second opinion perturbs with: ``sampler`` under the other operator (None: none asked)."""
    if second is None:
        return None
    if not isinstance(sampler, TextSampler):
        raise ConfigError("a second opinion is for text: this explainer's sampler is not a TextSampler")
    if second.perturbation == sampler.perturbation:
        raise ConfigError(f"the second opinion's perturbation is this explainer's own ({second.perturbation!r})")
    return sampler.with_perturbation(second.perturbation)


class Fillers:
    """One `QueryEngine` per filler model, made once, sharing ``engine``'s cache, concurrency, retries
    and cap. A sampler without its own filler fills with ``classifier``'s backend (an `LLMClassifier`),
    priced and counted as it is (its price, a price file's included, and its token counter)."""

    def __init__(self, classifier: Classifier, engine: QueryEngine) -> None:
        self.classifier = classifier
        self.engine = engine
        self.engines: dict[str, QueryEngine] = {}

    def engine_for(self, sampler: TextSampler) -> QueryEngine:
        """The engine of ``sampler``'s filler (`ConfigError` when there is none to be had)."""
        filler = sampler.filler
        if filler is None:
            clf = self.classifier
            if not isinstance(clf, LLMClassifier):
                raise ConfigError(
                    "infill needs a filler model: TextSampler(perturbation='infill', filler=Filler(backend))"
                )
            filler = Filler(clf.backend, price=clf.price, token_counter=clf.token_counter)
        if filler.identity not in self.engines:
            e = self.engine
            self.engines[filler.identity] = QueryEngine(
                filler, cache=e.cache, max_concurrency=e.max_concurrency, request_size=e.request_size, retry=e.retry
            )
        return self.engines[filler.identity]

    async def prepared(self, instance: Instance, sampler: Sampler, stats: QueryStats, cap: SpendCap | None) -> Instance:
        """``instance`` ready to be perturbed by ``sampler``: under ``infill``, its words' fills asked of
        the filler (reserved against ``cap``, counted under ``stats``); else itself."""
        if not infills(sampler):
            return instance
        assert isinstance(instance, TextInstance)
        engine = self.engine_for(sampler)
        return await sampler.prepare(instance, lambda prompts: engine.classify(prompts, stats, cap=cap))

    async def aclose(self) -> None:
        for engine in self.engines.values():
            await engine.classifier.aclose()
