"""The house's floors: every module imports alone, nothing imports upward.

The allowed order lives in one place, :mod:`skloes._layout`; this test reads it,
and checks that the user guide's layout table and each floor package's
docstring say the same. It also holds the house's size rules and the one
torch access point.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import skloes
from skloes import _layout

ROOT = Path(skloes.__file__).parent
DOC = ROOT.parent / "doc" / "user_guide" / "data_contract.rst"

# Modules that must not import torch (nor transformers) when imported alone.
TORCH_FREE = [
    "skloes",
    "skloes.metrics",
    "skloes.selection",
    "skloes.heads",
    "skloes.report",
    "skloes.scale",
    "skloes.core._contract",
    "skloes.core._sealed",
    "skloes.core._store",
    "skloes.core._targets",
    "skloes.core._torch",
    "skloes.heads._mixins",
    "skloes.heads._scalar_mix",
    "skloes.heads._georeg",
    "skloes.heads._georeg_finetune",
    "skloes.extraction",
    "skloes.models._loading",
    "skloes.cli",
]
#: Statements in one function (its docstring aside), counted on the syntax
#: tree so that the formatter's line breaks do not move it. Module length is
#: no rule: a module holds one concept, however long.
MAX_FUNCTION_STATEMENTS = 50


def _modules():
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path, modules):
    """skloes modules imported anywhere in the file (functions included)."""
    return _imports_in(path.read_text(encoding="utf-8"), modules, path)


def _imports_in(source, modules, where="<source>"):
    """skloes modules that ``source`` imports.

    ``from pkg import sub`` runs ``pkg/__init__.py`` before it reaches ``sub``,
    so it imports both: counting only ``sub`` hid the circle ``skloes.report ->
    skloes.report._layer_report -> skloes.report``.
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "skloes"
        ):
            found.add(node.module)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    found.add(full)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "skloes"}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{where}: relative import; use absolute imports")
    return found


def _graph():
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def test_every_module_has_a_floor():
    unplaced = [m for m in _modules() if _layout.floor_of(m) is None]
    assert not unplaced, f"add these to skloes._layout: {unplaced}"


def test_no_module_imports_a_floor_above_its_own():
    upward = [
        f"{a} ({_layout.floor_of(a)}) imports {b} ({_layout.floor_of(b)})"
        for a, deps in _graph().items()
        for b in sorted(deps)
        if not _layout.may_import(a, b)
    ]
    assert not upward, "\n".join(upward)


def test_the_floor_rule_refuses_upward_and_side_imports():
    assert _layout.may_import("skloes.selection._loes", "skloes.core._ridge")
    assert not _layout.may_import("skloes.core._ridge", "skloes.selection._loes")
    assert not _layout.may_import("skloes.selection._loes", "skloes.heads._georeg")
    assert not _layout.may_import("skloes.selection._loes", "skloes.datasets")
    assert _layout.may_import("skloes.cli._main", "skloes.datasets")
    assert not _layout.may_import("skloes.datasets", "skloes.models._loading")


def test_the_user_guide_shows_the_layout_of_the_code():
    assert _layout.layout_table() in DOC.read_text(encoding="utf-8"), (
        "doc/user_guide/data_contract.rst must hold `python -m skloes._layout`'s "
        "table verbatim"
    )


@pytest.mark.parametrize("floor", _layout.FLOORS[:-1], ids=lambda f: f.name)
def test_each_floor_package_says_what_it_may_import(floor):
    import importlib

    below = [f.name for f in _layout.FLOORS[: _layout.FLOORS.index(floor)]]
    doc = importlib.import_module(floor.modules[0]).__doc__
    said = re.search(r"May import: ([^.]*)\.", doc)
    assert said, f"{floor.modules[0]}'s docstring must end with 'May import: ...'."
    expected = ", ".join(below) if below else "nothing of skloes"
    assert " ".join(said.group(1).split()) == expected


def _statements(node):
    """Statements in a function, nested ones included, its docstring aside."""
    count = sum(isinstance(n, ast.stmt) for n in ast.walk(node)) - 1
    body = node.body
    has_doc = (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    return count - bool(has_doc)


def test_no_function_is_too_long():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _statements(node)
                if n > MAX_FUNCTION_STATEMENTS:
                    long.append(f"{name}.{node.name}: {n} statements")
    assert not long, "\n".join(long)


def _private_reads():
    """``importer <- module.name`` for each private name (``_x``) a module
    imports from a module of another package (its folder)."""
    modules = _modules()

    def package(name):
        path = modules.get(name)
        is_package = path is not None and path.name == "__init__.py"
        return name if is_package else name.rpartition(".")[0]

    found = set()
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            source = node.module
            if source.split(".")[0] != "skloes" or package(source) == package(name):
                continue
            found |= {
                f"{name} <- {source}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            }
    return found


def test_no_private_name_is_read_across_packages():
    """A name a module keeps to itself (``_x``) is read only in its own
    package: what another package needs is given a public name."""
    assert _private_reads() == set()


def _imports_torch(node):
    """Whether an AST node imports torch (a statement or a dynamic import)."""
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "torch" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "torch"
    if isinstance(node, ast.Call) and node.args:
        func = getattr(node.func, "id", getattr(node.func, "attr", ""))
        first = node.args[0]
        return (
            func in {"import_optional", "import_module", "__import__"}
            and isinstance(first, ast.Constant)
            and str(first.value).split(".")[0] == "torch"
        )
    return False


def test_torch_is_reached_through_one_module():
    direct = [
        f"{name}:{node.lineno}"
        for name, path in _modules().items()
        if name != "skloes.core._torch"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _imports_torch(node)
    ]
    assert not direct, "import torch through skloes.core._torch: " + ", ".join(direct)


def test_the_torch_rule_sees_each_spelling():
    spellings = [
        "import torch",
        "from torch import nn",
        "import torch.nn as nn",
        'import_optional("torch")',
        'importlib.import_module("torch")',
    ]
    assert all(
        any(_imports_torch(n) for n in ast.walk(ast.parse(s))) for s in spellings
    )
    assert not any(
        _imports_torch(n)
        for n in ast.walk(
            ast.parse('import_optional("huggingface_hub", extra="torch")')
        )
    )


def test_no_import_circle():
    graph = _graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                circle = stack[stack.index(dep) :] + [dep]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_circle_detector_finds_a_circle(monkeypatch):
    fake = {
        "skloes.a": {"skloes.b"},
        "skloes.b": {"skloes.c"},
        "skloes.c": {"skloes.a"},
    }
    monkeypatch.setattr(sys.modules[__name__], "_graph", lambda: fake)
    try:
        test_no_import_circle()
    except AssertionError as exc:
        assert "skloes.a -> skloes.b -> skloes.c -> skloes.a" in str(exc)
    else:
        raise AssertionError("the circle was not found")


def test_importing_a_submodule_from_its_package_imports_the_package():
    modules = {"skloes.report", "skloes.report._presenting", "skloes.core._ridge"}
    read = _imports_in(
        "from skloes.report import _presenting\n"
        "from skloes.core._ridge import ridge_loo\n",
        modules,
    )
    assert read == {"skloes.report", "skloes.report._presenting", "skloes.core._ridge"}
    assert _imports_in("import skloes.report._presenting\n", modules) == {
        "skloes.report._presenting"
    }


_IMPORT_EACH = r"""
import importlib, sys

def fresh(name):
    for key in [k for k in sys.modules if k == "skloes" or k.startswith("skloes.")]:
        del sys.modules[key]
    importlib.import_module(name)

failures = []
for name in sys.argv[2].split(","):  # torch-free modules first
    fresh(name)
    heavy = [m for m in ("torch", "transformers") if m in sys.modules]
    if heavy:
        failures.append(f"{name} imports {heavy}")
for name in sys.argv[1].split(","):
    try:
        fresh(name)
    except Exception as exc:  # noqa: BLE001 - report every module
        failures.append(f"{name}: {type(exc).__name__}: {exc}")
print("\n".join(failures))
sys.exit(1 if failures else 0)
"""


def test_every_module_imports_alone():
    names = [n for n in _modules() if n != "skloes.__main__"]
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH, ",".join(names), ",".join(TORCH_FREE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


#: The repository's promised top level (the project's shape, not a choice of
#: this test): a checkout that loses one of these is not the project.
TOP_LEVEL = ["setup.cfg", "pyproject.toml", "skloes", "tests", "examples", "doc"]


def test_the_top_level_holds_the_promised_entries():
    import configparser

    import tomllib

    top = ROOT.parent
    missing = [name for name in TOP_LEVEL if not (top / name).exists()]
    assert not missing, f"the repository's top level lacks {missing}"
    assert all((top / name).is_dir() for name in TOP_LEVEL[2:])
    # setup.cfg holds configuration a tool of the set-up reads, not nothing.
    config = configparser.ConfigParser()
    config.read(top / "setup.cfg", encoding="utf-8")
    assert "codespell" in config and config["codespell"]["ignore-words-list"]
    lint = tomllib.loads((top / "pyproject.toml").read_text(encoding="utf-8"))
    extras = lint["project"]["optional-dependencies"]["lint"]
    assert any(req.startswith("codespell") for req in extras)
