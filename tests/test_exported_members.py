import inspect
import types
import warnings

import pytest

import llm_anchors
import llm_anchors.core

# DESIGN.md's contract: tests outside the project import these from llm_anchors.
CONTRACT = (
    "AnchorsExplainer",
    "MAnchorsExplainer",
    "FunctionClassifier",
    "LLMClassifier",
    "Budget",
    "Explanation",
    "BudgetExceeded",
)


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def test_top_level_is_the_small_stable_api():
    exported = llm_anchors.__all__
    assert len(exported) == len(set(exported))
    assert set(exported) == _public(llm_anchors) | {"__version__"}
    assert len(exported) <= 30  # one screen of the README


def test_contract_names_are_top_level_and_of_the_right_kind():
    for name in CONTRACT:
        value = vars(llm_anchors)[name]  # imported eagerly, not through the deprecation hook
        assert name in llm_anchors.__all__ and inspect.isclass(value)
    assert issubclass(llm_anchors.BudgetExceeded, llm_anchors.LLMAnchorsError)


def test_core_exports_resolve_and_do_not_repeat_the_top_level():
    names = llm_anchors.core.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(llm_anchors.core, name) is not None
    assert not set(names) & set(llm_anchors.__all__)


def test_unknown_names_are_attribute_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = llm_anchors.no_such_name
