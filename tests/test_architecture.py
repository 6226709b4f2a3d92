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
    found.pop("backends/_vllm_convert/convert", None)  # a script vLLM's own Python runs, never imported
    return found


def local_imports(name: str, path: Path) -> set[str]:
    """The modules ``name`` imports from the package (by table name): every form (``from .x import y``,
    ``from llm_anchors.x import y``, ``import llm_anchors.x``), at the top or inside a function."""
    here = name.split("/") if path.name != "__init__.py" else [*name.split("/"), "__init__"]
    known = modules()
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level]
                target = "/".join([*base, *(node.module or "").split(".")]).strip("/")
            else:
                target = _in_package(node.module or "")
            names = [m for alias in node.names if (m := f"{target}/{alias.name}".strip("/")) in known]
            found.update(names or ([target] if target in known else []))  # `from . import m` imports m
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = _in_package(alias.name)
                found.update([target] if target in known else [])
    return found


def _in_package(dotted: str) -> str:
    """``llm_anchors.money.budget`` as a table name (``money/budget``); anything outside the package as ""."""
    parts = dotted.split(".")
    return "/".join(parts[1:]) if parts[0] == "llm_anchors" else ""


def test_every_import_form_is_read(tmp_path):
    imports = local_imports("run/rows", PACKAGE / "run" / "rows.py")
    assert "explain/explanation" in imports  # a relative import
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import llm_anchors.money.budget\nfrom llm_anchors.search import rules\nimport llm_anchors.backends.llamacpp\n"
        "from llm_anchors.query import QueryEngine\n"
        "def f():\n    from llm_anchors.explain.anchors import AnchorsExplainer\n"
    )
    found = local_imports("money/charge", sample)
    assert found == {"money/budget", "search/rules", "query", "backends/llamacpp", "explain/anchors"}


def test_every_module_is_in_the_table_once():
    order = layer_order()
    assert len(order) == len(set(order))
    assert sorted(order) == sorted(modules())


def test_modules_import_only_from_lower_layers_and_the_backends_only_from_the_cli():
    order = layer_order()
    wrong = [
        f"{name} imports {target}"
        for name, path in modules().items()
        for target in local_imports(name, path)
        if (target.startswith("backends") and not name.startswith(("backends", "cli")))
        or (target in order and order.index(target) > order.index(name))
    ]
    assert not wrong


def _project_names() -> dict[str, list[Path]]:
    """Every name a file or folder of the tree could be imported by, if its folder were on ``sys.path``."""
    names: dict[str, list[Path]] = {}
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if parts[0].startswith(".") or "__pycache__" in parts:
            continue
        if path.suffix == ".py" and path.stem != "__init__":
            names.setdefault(path.stem, []).append(path)
        elif path.is_dir() and any(path.glob("*.py")):
            names.setdefault(path.name, []).append(path)
    return names


def test_no_module_or_folder_takes_a_standard_library_name():
    """A module named like the standard library's (``http``, ``json``) takes its place in any process that
    puts its folder on ``sys.path``: vLLM's conversion once imported ``adapters/http.py`` as ``http``."""
    import sys

    names = _project_names()
    assert {"transport", "llm_anchors", "convert"} <= names.keys()  # the walk sees modules, packages, scripts
    shadowing = {name: paths for name, paths in names.items() if name in sys.stdlib_module_names}
    assert shadowing == {}


def test_scripts_run_by_path_are_isolated_in_a_folder_of_their_own(tmp_path):
    """A script another Python runs by its path sits alone in its folder (no ``__init__``, no sibling
    module), and is run so that a module beside it could not be imported in place of the standard library's."""
    import subprocess
    import sys

    from llm_anchors.backends import vllm

    assert [p.name for p in vllm.CONVERTER.parent.glob("*.py")] == [vllm.CONVERTER.name]
    command = vllm.conversion(Path(sys.executable), Path("m.gguf"), Path("out"))
    flags = command[1 : command.index(str(vllm.CONVERTER))]
    (tmp_path / "http.py").write_text("raise ImportError('the folder of the script was on sys.path')\n")
    (tmp_path / "script.py").write_text("import http.client\nprint(http.client.__name__)\n")
    done = subprocess.run([sys.executable, *flags, str(tmp_path / "script.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "http.client"


def _python_files() -> dict[str, int]:
    """Every Python file of the tree (package, backends, benchmarks, scripts, tests) by path, with its lines."""
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0].startswith(".") or "__pycache__" in parts:
            continue
        found[path.relative_to(ROOT).as_posix()] = len(path.read_text().splitlines())
    return found


def test_no_module_is_over_500_lines():
    """A module a newcomer reads in one sitting: none over 500 lines, anywhere in the tree."""
    sizes = _python_files()
    assert "llm_anchors/explain/anchors.py" in sizes and "benchmarks/stream.py" in sizes  # the walk sees them all
    assert {path: n for path, n in sizes.items() if n > 500} == {}


def test_at_most_nine_modules_of_the_package_are_over_400_lines():
    long = sorted(path for path, n in _python_files().items() if path.startswith("llm_anchors/") and n > 400)
    assert len(long) <= 9, long
