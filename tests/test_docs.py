"""The documentation runs as written: every ``python`` block of the README and of the guide, in order, one
namespace per file, against the loopback fake server in place of the local LLM; and every name
docs/architecture.md gives in backticks exists in the tree."""

from __future__ import annotations

import ast
import asyncio
import gc
import re
import shutil
import textwrap
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fault_server import FaultServer

ROOT = Path(__file__).resolve().parents[1]
LOCAL = "http://127.0.0.1:8080/v1"  # where the docs' examples find the local LLM
AZURE = "https://acme.openai.azure.com"  # the guide's Azure endpoint (the fake serves Azure's paths too)
BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def python_blocks(path: Path) -> list[str]:
    """The ``python`` blocks of a markdown file, in order, dedented (a block inside a list item too)."""
    return [textwrap.dedent(m.group(2)) for m in BLOCK.finditer(path.read_text())]


def answer(prompt: str) -> str:
    """The fake model: positive when the text holds "good" or "great"."""
    return "positive" if {"good", "great"} & set(prompt.lower().split()) else "negative"


@contextmanager
def fake_server() -> Iterator[str]:
    """The fault server on loopback, in a thread of its own (the blocks run their own event loops)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = FaultServer(answer=answer, served=("gemma-3-270m",))
    url = asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def run_blocks(blocks: list[str], url: str, namespace: dict[str, Any]) -> None:
    """Each block in ``namespace``, the local LLM's and Azure's URLs swapped for the fake's; top-level ``await``
    allowed."""
    for i, block in enumerate(blocks):
        block = block.replace(LOCAL, url).replace(AZURE, url.removesuffix("/v1"))
        code = compile(block, f"<block {i + 1}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if code.co_flags & 0x80:  # CO_COROUTINE: it awaits at the top level
            asyncio.run(eval(code, namespace))
        else:
            exec(code, namespace)


def test_the_readme_states_what_its_first_command_was_measured_to_take():
    """The figure `benchmarks.first_command` measures is the README's: it names the benchmark, and the command
    the benchmark runs is the README's first."""
    from benchmarks.first_command import first_command

    setup, explain = first_command()
    readme = (ROOT / "README.md").read_text()
    assert setup == "bash scripts/setup.sh" and explain.startswith(".venv/bin/llm-anchors explain ")
    assert "python -m benchmarks.first_command" in readme and re.search(r"it took [\d.]+ minutes", readme)


def test_the_python_blocks_are_found():
    assert len(python_blocks(ROOT / "README.md")) == 1
    assert len(python_blocks(ROOT / "docs" / "guide.md")) >= 8
    assert all("seed=," not in b for b in python_blocks(ROOT / "docs" / "guide.md"))  # listings are not python


def test_the_readme_s_python_block_runs_and_closes_what_it_opens(capsys):
    with fake_server() as url, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace: dict[str, Any] = {}
        run_blocks(python_blocks(ROOT / "README.md"), url, namespace)
        exp = namespace["exp"]
        del namespace
        gc.collect()
    assert exp.data.label == "positive" and exp.data.anchor and exp.meta.queries > 0
    assert "-> 'positive'" in capsys.readouterr().out
    assert [str(w.message) for w in caught if "nclosed" in str(w.message)] == []


@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning", "ignore:the prompt cannot be cached"
)
def test_the_guide_s_python_blocks_run_in_order(tmp_path, monkeypatch):
    from sklearn.ensemble import RandomForestClassifier

    from llm_anchors.datasets import load_adult, load_bbc_news

    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples")
    monkeypatch.chdir(tmp_path)  # the examples' files where the guide names them; anchor.png written here
    adult = load_adult()
    article = next(t for t in load_bbc_news("train")[0] if "good" in t.lower().split())  # a label to explain

    class Brightness:
        """A picture's label: whether it is mostly bright."""

        def predict(self, images: np.ndarray) -> list[int]:
            return [int(i.mean() > 0.5) for i in images]

    namespace: dict[str, Any] = {
        "token_provider": lambda: "a token",  # Azure AD's, in the user's application
        "article": article,
        "ticket": "Subject: refund request\nI was charged twice. Good service otherwise, please refund.",
        "texts": ["a good film", "a dull film", "a great cast"],
        "forest": RandomForestClassifier(n_estimators=10, random_state=0).fit(adult.train, adult.train_labels),
        "cnn": Brightness(),
        "image": np.random.default_rng(0).random((32, 32, 3)),
    }
    with fake_server() as url:
        run_blocks(python_blocks(ROOT / "docs" / "guide.md"), url, namespace)
    assert namespace["router"].labels == ["billing", "technical", "account"]  # the ticket router's
    assert (tmp_path / "anchor.png").is_file()
    namespace.clear()
    gc.collect()  # the sessions the guide's blocks leave to the garbage collector: gone within this test


OTHERS = {"AsyncOpenAI", "AsyncAzureOpenAI", "Decimal"}  # other libraries' names
PLACEHOLDERS = {"OUT", "OUT.lock", "Error"}  # the results file a user names; a suffix of names


def architecture_names() -> set[str]:
    """The code names docs/architecture.md gives in backticks: ``Class``, ``Class.member``, ``module.path.NAME``
    (``function(...)`` by its name)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    found = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        name = span.split("(")[0].strip()
        if re.fullmatch(r"[A-Z][A-Za-z0-9]+(\.[a-z_][a-z0-9_]*)?", name) or _dotted(name):
            found.add(name)
    return found


def _dotted(name: str) -> bool:
    """``search.beam.STAGES``, ``propose/record.ProposerRecord``: a module of the package and a name in it."""
    return re.fullmatch(r"[a-z_][a-z0-9_]*([./][a-z_][a-z0-9_]*)*\.[A-Za-z_][A-Za-z0-9_]*", name) is not None and (
        _module(name.rpartition(".")[0]) is not None
    )


def _module(dotted: str) -> Path | None:
    """The package's module ``search.beam`` (or ``search/beam``, ``llm_anchors.search.beam``), if it is one."""
    parts = dotted.replace("/", ".").removeprefix("llm_anchors.").split(".")
    base = ROOT / "llm_anchors" / Path(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _definitions(path: Path) -> set[str]:
    """Every class, function and constant ``path`` defines, with its classes' members (``Class.member``,
    ``self.x`` set in a method among them)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item in node.body:
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, ast.AnnAssign | ast.Assign):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    for t in targets:
                        if isinstance(t, ast.Name) and item in node.body:
                            names.add(f"{node.name}.{t.id}")
                        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            names.add(f"{node.name}.{t.attr}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_every_name_the_architecture_gives_exists():
    names = architecture_names()
    assert {"Certifier", "Budget", "CompletionParams.answers", "propose/record.ProposerRecord"} <= names
    defined = set().union(*(_definitions(p) for p in (ROOT / "llm_anchors").rglob("*.py")))
    missing = []
    for name in sorted(names - OTHERS - PLACEHOLDERS):
        if name.endswith(".py") or _module(name) is not None:  # a file, a module
            missing += [] if _module(name.removesuffix(".py")) is not None else [name]
            continue
        module = _module(name.rpartition(".")[0]) if _dotted(name) else None
        if module is not None:
            missing += [] if name.rpartition(".")[2] in _definitions(module) else [name]
        elif name not in defined:
            missing.append(name)
    assert missing == []
