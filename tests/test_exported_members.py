"""The public names: a small top level, and each public module's ``__all__`` sorted, complete and real."""

import importlib
import inspect
import pkgutil
import types
from typing import Protocol

import pytest

import llm_anchors
import llm_anchors.extend

# docs/architecture.md, "What a user imports": names promised to code outside the project.
CONTRACT = (
    "AnchorsExplainer",
    "MAnchorsExplainer",
    "FunctionClassifier",
    "LLMClassifier",
    "Budget",
    "Explanation",
    "BudgetExceeded",
)
PUBLIC = ["extend", "run", "search", "propose", "money", "models", "query", "memory", "samplers", "explain", "display",
          "datasets", "distributed"]  # fmt: skip


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }


def test_top_level_is_the_small_stable_api():
    exported = llm_anchors.__all__
    assert len(exported) == len(set(exported))
    assert set(exported) == _public(llm_anchors) | {"__version__"}
    assert len(exported) <= 31  # one screen of the README


def test_contract_names_are_top_level_and_of_the_right_kind():
    for name in CONTRACT:
        assert name in llm_anchors.__all__ and inspect.isclass(vars(llm_anchors)[name])
    assert issubclass(llm_anchors.BudgetExceeded, llm_anchors.LLMAnchorsError)


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_module_exports_every_public_name_it_defines(name):
    module = importlib.import_module(f"llm_anchors.{name}")
    names = module.__all__
    assert len(names) == len(set(names)), name
    assert all(getattr(module, n) is not None for n in names)
    defined_here = {
        n for n, v in vars(module).items()
        if not n.startswith("_") and (inspect.isclass(v) or inspect.isfunction(v)) and v.__module__ == module.__name__
    }  # fmt: skip
    assert defined_here <= set(names), defined_here - set(names)


def test_every_contract_an_extender_implements_is_in_extend():
    protocols = set()
    for info in pkgutil.walk_packages(llm_anchors.__path__, "llm_anchors."):
        if info.name.split(".")[-1].startswith("_") or info.name.endswith(".cli") or ".distributed" in info.name:
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            public = inspect.isclass(value) and not value.__name__.startswith("_")  # a private one is no contract
            if public and Protocol in value.__mro__[1:] and value.__module__ == info.name:
                protocols.add(value.__name__)
    assert protocols and protocols <= set(llm_anchors.extend.__all__), protocols - set(llm_anchors.extend.__all__)


def _named_in_signatures(value) -> set[type]:
    """The llm_anchors classes a public class's constructor or a public function takes or returns."""
    import typing

    target = value.__init__ if inspect.isclass(value) else value
    try:
        hints = typing.get_type_hints(target)
    except (NameError, TypeError):
        return set()
    found: set[type] = set()
    stack = list(hints.values())
    while stack:
        hint = stack.pop()
        stack.extend(typing.get_args(hint))
        if inspect.isclass(hint) and hint.__module__.startswith("llm_anchors."):
            found.add(hint)
    return found


def test_every_class_a_public_signature_takes_can_be_imported_from_a_public_module():
    """A re-exporting package defines nothing itself, so the check above cannot see what it leaves out (how
    GuidedParams, which MAnchorsExplainer takes, went unexported): every class a public constructor or
    function names must be in the top level or a public module's ``__all__``."""
    modules = [llm_anchors, *(importlib.import_module(f"llm_anchors.{name}") for name in PUBLIC)]
    exported = {id(getattr(m, n)) for m in modules for n in m.__all__ if not n.startswith("__")}
    public = [getattr(m, n) for m in modules for n in m.__all__ if not n.startswith("__")]
    named = {cls for value in public if inspect.isclass(value) or inspect.isfunction(value)
             for cls in _named_in_signatures(value)}  # fmt: skip
    missing = sorted(f"{cls.__module__}.{cls.__name__}" for cls in named if id(cls) not in exported)
    assert not missing, missing
    assert len(named) > 20  # the check reads the signatures
