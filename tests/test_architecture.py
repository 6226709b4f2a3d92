"""docs/architecture.md's layer table is the import order of llm_anchors/."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llm_anchors"


def layer_order() -> list[str]:
    """Every module, lowest first, as the table lists them (``money/budget``, ``cli``)."""
    table = (ROOT / "docs" / "architecture.md").read_text().split("| layer | modules | role |")[1].split("\n\n")[0]
    return [m for row in table.splitlines()[2:] for m in re.findall(r"`([\w/]+)`", row.split("|")[2])]


def modules() -> dict[str, Path]:
    """Every module of the package by its table name; a package's ``__init__`` as its folder (``money``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).with_suffix("").as_posix()
        found[name.removesuffix("/__init__")] = path
    found.pop("__init__", None)
    found.pop("_version", None)
    return found


def local_imports(name: str, path: Path) -> set[str]:
    """The modules ``name`` imports from the package (by table name), and "adapters" if it imports those."""
    here = name.split("/") if path.name != "__init__.py" else [*name.split("/"), "__init__"]
    known = modules()
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level]
            target = "/".join([*base, *(node.module or "").split(".")]).strip("/")
            candidates = [target] + [f"{target}/{alias.name}" for alias in node.names]
            found.update(c for c in candidates if c in known)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "adapters":
            found.add("adapters")
    return found


def test_every_module_is_in_the_table_once():
    order = layer_order()
    assert len(order) == len(set(order))
    assert sorted(order) == sorted(modules())


def test_modules_import_only_from_lower_layers_and_never_adapters_but_the_cli():
    order = layer_order()
    wrong = [
        f"{name} imports {target}"
        for name, path in modules().items()
        for target in local_imports(name, path)
        if (target == "adapters" and name != "cli") or (target in order and order.index(target) > order.index(name))
    ]
    assert not wrong
