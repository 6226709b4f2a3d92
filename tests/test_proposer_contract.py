"""What a proposer is handed cannot change what the certifier counts, and a step the search cannot take is
a typed error naming the proposer (issue 68, item 4): each probe of a hostile proposer, a test."""

import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from llm_anchors import Budget, ConfigError, FunctionClassifier, MAnchorsExplainer
from llm_anchors.extend import Draw, Judge

TEXT = "a good and great film that was slow but fine overall"


def keeps_unless_slow_hidden(texts):
    """Label 1 unless 'slow' is gone: the rule {slow} has precision 1; others' precision is that of 'slow' kept."""
    return [int("slow" in t.split()) for t in texts]


def good_when_both(texts):
    return [int("good" in t.split() and "great" in t.split()) for t in texts]


@dataclass
class Hostile:
    """A user's proposer that judges one rule after trying to write into what it was handed."""

    words: tuple[str, ...]
    features: list[str]
    tries: list[str] = field(default_factory=list)
    name: str = "mine"
    first: bool = False
    done: bool = False

    def propose(self, guide):
        if self.done:
            return None
        self.done = True
        rule = frozenset(self.features.index(w) for w in self.words)
        view = guide.candidate(rule)
        for attempt in (
            lambda: setattr(view, "n", 10_000),
            lambda: setattr(view, "positives", 10_000),
            lambda: view.fresh.append(True),  # a tuple, when there is one
            lambda: guide.pool.__setitem__((slice(None), slice(None)), True),
        ):
            try:
                attempt()
                self.tries.append("took")
            except (AttributeError, ValueError, TypeError):
                self.tries.append("refused")
        present, kept = guide.labelled()
        kept[:] = True  # a copy: nothing the search counts
        return Judge(view, "mine")


async def test_a_proposer_cannot_write_into_what_the_certificate_is_computed_from():
    made: list[Hostile] = []

    def factory(instance, label):
        made.append(Hostile(("slow",), list(instance.features)))
        return made[-1]

    clf = FunctionClassifier(good_when_both, name="good-and-great")
    async with MAnchorsExplainer(clf, seed=0, memory=None, proposers=[factory]) as explainer:
        exp = await explainer.explain(TEXT)
    assert made[0].tries == ["refused"] * 4
    assert exp.data.anchor != ["slow"]  # 'slow' alone does not keep the label: never certified for it
    assert exp.data.coverage < 1.0


@pytest.mark.parametrize(
    ("returned", "said"),
    [("a string", "returned 'a string'"), (Draw(None, 5, "mine"), "a Judge or Draw of a rule"),  # type: ignore[arg-type]
     ("draw -5", "asked to draw -5 samples"), ("draw 2.5", "asked to draw 2.5 samples"),
     ("stage of growth", "named the stage 'growth-1'"), ("draw 10 M", "asked to draw 10000000 samples")],
)  # fmt: skip
async def test_a_step_the_search_cannot_take_is_a_config_error_naming_the_proposer(returned, said):
    @dataclass
    class Bad:
        name: str = "mine"
        first: bool = False

        def propose(self, guide):
            view = guide.candidate(frozenset({0}))
            return (
                {
                    "draw -5": Draw(view, -5, "mine"),
                    "draw 2.5": Draw(view, 2.5, "mine"),  # type: ignore[arg-type]
                    "draw 10 M": Draw(view, 10_000_000, "mine"),
                    "stage of growth": Judge(view, "growth-1"),
                }.get(returned, returned)
                if isinstance(returned, str)
                else returned
            )

    clf = FunctionClassifier(good_when_both, name="good-and-great")
    async with MAnchorsExplainer(clf, seed=0, memory=None, proposers=[lambda i, label: Bad()]) as explainer:
        with pytest.raises(ConfigError, match="proposer 'mine'") as raised:
            await explainer.explain(TEXT)
    assert said in str(raised.value)


@pytest.mark.parametrize("name", ["growth", "memory", "prune", "root", "memory-2"])
async def test_a_users_proposer_cannot_take_a_built_in_name(name):
    clf = FunctionClassifier(good_when_both, name="good-and-great")
    hostile = lambda instance, label: Hostile(("good", "great"), list(instance.features), name=name)  # noqa: E731
    async with MAnchorsExplainer(clf, seed=0, memory=None, proposers=[hostile]) as explainer:
        with pytest.raises(ConfigError, match=f"is named '{name}'"):
            await explainer.explain(TEXT)


LONG = " ".join(f"word{i}" for i in range(40)) + " good great"  # perturbations that almost never repeat


async def test_a_large_draw_is_stopped_by_the_cap_as_it_is_rendered_and_every_paid_answer_is_kept():
    @dataclass
    class Greedy:
        name: str = "mine"
        first: bool = True
        done: bool = False

        def propose(self, guide):
            if self.done:
                return None
            self.done = True
            return Draw(guide.candidate(frozenset({0})), 10_000, "mine")

    rendered = []

    def counted(texts):
        rendered.append(len(texts))
        return good_when_both(texts)

    clf = FunctionClassifier(counted, name="counted")
    budget = Budget(max_queries=3000)
    async with MAnchorsExplainer(clf, seed=0, memory=None, proposers=[lambda i, label: Greedy()],
                                 budget=budget, on_budget="return") as explainer:  # fmt: skip
        started = time.perf_counter()
        exp = await explainer.explain(LONG)
        took = time.perf_counter() - started
    assert took < 60  # pieces of a thousand: no more rendered than the cap's next piece
    assert exp.meta.budget_exhausted and exp.meta.queries <= 3000
    assert exp.meta.stages["mine"].samples >= exp.meta.queries - 1 - 100  # the draw's answers, paid for, kept
    assert sum(rendered) == exp.meta.queries


def test_a_rule_view_is_read_only_and_live():
    from llm_anchors.propose import GuidedSearch
    from llm_anchors.search import SearchParams

    pool = np.random.default_rng(0).random((200, 4)) > 0.5
    search = GuidedSearch(4, pool, SearchParams())
    view = search.candidate(frozenset({1}))
    with pytest.raises(AttributeError, match="cannot change"):
        view.n = 5
    assert not search.pool.flags.writeable and search.pool.base is pool
    assert view.n == 0 and view.fresh is None
