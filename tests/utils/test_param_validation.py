"""skloes.utils._param_validation is the one module that imports scikit-learn's
private validation helpers: if scikit-learn moves them, one file changes."""

from __future__ import annotations

import ast
from pathlib import Path

import skloes
from skloes.utils import _param_validation

PRIVATE = ("sklearn.utils._param_validation",)
PRIVATE_NAMES = {"_fit_context"}


def _private_imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {a.name for a in node.names}
            if node.module in PRIVATE or (
                node.module.startswith("sklearn") and names & PRIVATE_NAMES
            ):
                yield node.module


def test_no_other_module_imports_the_private_helpers():
    root = Path(skloes.__file__).parent
    own = Path(_param_validation.__file__)
    found = {
        str(path.relative_to(root)): list(_private_imports(path))
        for path in root.rglob("*.py")
        if path != own
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_it_exports_what_the_estimators_use():
    for name in _param_validation.__all__:
        assert getattr(_param_validation, name) is not None
