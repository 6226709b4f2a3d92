"""docs/architecture.md's layer table is the import order of llm_anchors/."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layer_order() -> list[str]:
    table = (ROOT / "docs" / "architecture.md").read_text().split("| layer | modules | role |")[1].split("\n\n")[0]
    return [m for row in table.splitlines()[2:] for m in re.findall(r"`(\w+)`", row.split("|")[2])]


def local_imports(module: str) -> set[str]:
    tree = ast.parse((ROOT / "llm_anchors" / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "adapters":
            found.add("adapters")
    return found


def test_every_module_is_in_the_table_once():
    order = layer_order()
    modules = {p.stem for p in (ROOT / "llm_anchors").glob("*.py")} - {"_version"}
    assert sorted(order) == sorted(modules)


def test_modules_import_only_from_lower_layers_and_never_adapters_but_the_cli():
    order = layer_order()
    wrong = [
        f"{m} imports {i}"
        for m in order
        for i in local_imports(m)
        if (i == "adapters" and m != "cli") or (i in order and order.index(i) > order.index(m))
    ]
    assert not wrong
