"""Import hygiene: every module imports alone, the layers never import upward.

The layers of the package, bottom up, are described in
``doc/user_guide/data_contract.rst`` (:ref:`package_layout`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import skloes

ROOT = Path(skloes.__file__).parent

# Rank of each layer, bottom up; a module may import its own rank or lower.
LAYERS = {
    "skloes.utils": 0,
    "skloes._geometry": 1, "skloes._ridge": 1, "skloes._pooling": 1,
    "skloes._models": 1, "skloes._registry": 1, "skloes._cache": 1,
    "skloes.datasets": 1,
    "skloes.metrics": 2,
    "skloes._hidden_states": 3, "skloes._heads": 3, "skloes._torch_head": 3,
    "skloes._georeg_loss": 3,
    "skloes.selection": 4, "skloes.baselines": 4,
    "skloes._georeg": 5, "skloes._georeg_finetune": 5,
    "skloes.report": 6, "skloes.plotting": 6,
    "skloes.cli": 7, "skloes.__main__": 7, "skloes.utils._testing": 7,
    "skloes": 8,
}
# Modules that must not import torch (nor transformers) when imported alone.
TORCH_FREE = ["skloes", "skloes.metrics", "skloes.baselines", "skloes.report",
              "skloes.selection._loes", "skloes.selection._baselines",
              "skloes.selection._scalar_mix", "skloes.utils._validation",
              "skloes._torch_head", "skloes._georeg", "skloes._georeg_finetune"]


def _modules():
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _rank(module):
    best = None
    for prefix, rank in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    assert best is not None, f"{module} has no layer in LAYERS: add it"
    return best[1]


def _imports(path, modules):
    """skloes modules imported anywhere in the file (functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "skloes":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "skloes"}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; use absolute imports")
    return found


def _graph():
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def test_no_module_imports_a_layer_above_its_own():
    upward = [f"{a} (layer {_rank(a)}) imports {b} (layer {_rank(b)})"
              for a, deps in _graph().items() for b in sorted(deps)
              if _rank(b) > _rank(a)]
    assert not upward, "\n".join(upward)


def test_no_import_circle():
    graph = _graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                circle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_circle_detector_finds_a_circle(monkeypatch):
    fake = {"skloes.a": {"skloes.b"}, "skloes.b": {"skloes.c"},
            "skloes.c": {"skloes.a"}}
    monkeypatch.setattr(sys.modules[__name__], "_graph", lambda: fake)
    try:
        test_no_import_circle()
    except AssertionError as exc:
        assert "skloes.a -> skloes.b -> skloes.c -> skloes.a" in str(exc)
    else:
        raise AssertionError("the circle was not found")


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
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
