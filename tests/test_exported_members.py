import types

import llm_anchors


def test_all_exports_are_sorted_and_complete():
    exported = llm_anchors.__all__
    assert exported == sorted(exported)
    assert len(exported) == len(set(exported))
    public = {
        name
        for name in dir(llm_anchors)
        if not name.startswith("_") and not isinstance(getattr(llm_anchors, name), types.ModuleType)
    }
    assert public | {"__version__"} == set(exported)


def test_contract_names_exist():
    for name in ("AnchorsExplainer", "FunctionClassifier", "Explanation", "BudgetExceeded", "LLMAnchorsError"):
        assert hasattr(llm_anchors, name)
