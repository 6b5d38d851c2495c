"""Layer stacks, the frozen LOES oracle and LOES internals, for the LOES tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from skloes.selection._loes._config import VARIANTS

VARIANT_NAMES = sorted(VARIANTS)
ORACLE_FILE = Path(__file__).parent / "loes_oracle.py"


def planted(n=240, n_layers=6, dim=12, n_classes=4, seed=0, informative=(2, 4)):
    """Noise layers; the class bits live in two layers, in orthogonal directions."""
    rng = np.random.RandomState(seed)
    stack = rng.normal(size=(n_layers, n, dim))
    a, b = informative
    y = 2 * (stack[a, :, 0] > 0) + (stack[b, :, 1] > 0)
    return stack, y


def noise(n=64, n_layers=6, dim=128, seed=0, n_classes=4):
    rng = np.random.RandomState(seed)
    return rng.normal(size=(n_layers, n, dim)), rng.randint(0, n_classes, size=n)


def to_flat(stack):
    """The flat table ``(n_samples, n_layers * dim)`` of a stack."""
    return stack.transpose(1, 0, 2).reshape(stack.shape[1], -1)


def residual_stream(n=200, n_layers=6, dim=30, n_classes=3, seed=0):
    """Correlated, anisotropic layers as a residual stream makes them."""
    rng = np.random.RandomState(seed)
    y = rng.randint(0, n_classes, n)
    X = rng.normal(size=(n, dim)) * np.logspace(0, -2, dim)
    layers = [X]
    for l in range(1, n_layers):
        mix = rng.normal(size=(dim, dim)) / np.sqrt(dim) * np.logspace(0, -1.5, dim)
        X = X + 0.4 * rng.normal(size=(n, dim)) @ mix
        X[:, 0] += 0.5 * (y == l % n_classes)
        layers.append(X.copy())
    return np.stack(layers), y


def oracle():
    """The frozen copy of the original LOES path (``loes_oracle.py``)."""
    if "_loes_oracle" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_loes_oracle", ORACLE_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules["_loes_oracle"] = module
        spec.loader.exec_module(module)
    return sys.modules["_loes_oracle"]


def oracle_config(cfg):
    """The settings dict the oracle reads, from a :class:`LOESConfig`."""
    old = {key: getattr(cfg, key) for key in cfg.__dataclass_fields__}
    old["triplet_rule"] = cfg.triplet_rule
    for new_key, old_key in (
        ("isotropy_weight", "alpha"),
        ("redundancy_weight", "gamma"),
        ("volume_weight", "eta"),
    ):
        old[old_key] = old.pop(new_key)
    return old


def span_basis(layers, n, cfg):
    """``(Q, shrink)`` of the span of factor objects with ``U``, ``s``, ``dim``.

    The path's :class:`~skloes.selection._loes._span.Span` on a stand-in for
    the prepared layers; the dict ``cfg`` holds ``orthogonalization`` (and,
    for the basis, ``orth_energy`` and ``orth_max_rank``).
    """
    from skloes.selection._loes._span import Span

    prep = SimpleNamespace(
        layers=dict(enumerate(layers)),
        n=n,
        cfg=SimpleNamespace(**cfg),
        cross=lambda a, b: layers[a].U.T @ layers[b].U,
    )
    span = Span(prep, range(len(layers)))
    return span.Q, span.shrink


def residual_factors(U, s, basis):
    """``M = (U - QÃ) diag(s)`` with X̃ = M Vᵀ for a layer ``U diag(s) Vᵀ``."""
    Q, shrink = basis
    A = Q.T @ U
    if shrink is not None:
        A = shrink[:, None] * A
    return (U - Q @ A) * s


def count_paths(monkeypatch):
    """Spy on the path engine: how many preparations, runs and steps it computed.

    Returns a dict whose ``"prepare"`` and ``"steps"`` count up as paths are
    prepared and stepped, and whose ``"runs"`` lists the budget of each run.
    """
    from skloes.selection._loes._path import PreparedPath

    counts = {"prepare": 0, "steps": 0, "runs": []}
    init, run = PreparedPath.__init__, PreparedPath.run

    def counting_init(self, *args, **kwargs):
        counts["prepare"] += 1
        init(self, *args, **kwargs)

    def counting_run(self, n_select, start=None):
        before = 0 if start is None else start.selection_order.size
        result = run(self, n_select, start)
        counts["steps"] += result.selection_order.size - before
        counts["runs"].append(n_select)
        return result

    monkeypatch.setattr(PreparedPath, "__init__", counting_init)
    monkeypatch.setattr(PreparedPath, "run", counting_run)
    return counts
