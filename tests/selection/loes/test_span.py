"""The selected span: orthogonalisation and the degeneracy fix."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from _support.loes import (
    noise,
    residual_factors,
    span_basis,
)

from skloes import LOESSelector
from skloes.core._geometry import thin_svd


# --------------------------------------------------------------------------
# Orthogonalisation and the degeneracy fix (properties 2, 3)
# --------------------------------------------------------------------------
def _factors(X, cfg_scaling="none"):
    Xc = X - X.mean(axis=0)
    U, s, V = thin_svd(Xc, return_v=True)
    return SimpleNamespace(U=U, s=s, V=V, dim=X.shape[1]), Xc


def test_reference_orthogonalisation_equals_explicit_ridge_projection():
    stack, _ = noise(n=50, n_layers=4, dim=8, seed=1)
    stack[1] *= 30.0
    facts = [_factors(X) for X in stack]
    cfg = {"orthogonalization": "ridge"}
    basis = span_basis([facts[0][0], facts[1][0]], 50, cfg)
    XS = np.hstack([facts[0][1], facts[1][1]])
    P = XS @ np.linalg.solve(XS.T @ XS + 1e-6 * np.eye(XS.shape[1]), XS.T)
    for l in (2, 3):
        f, Xc = facts[l]
        Xt = residual_factors(f.U, f.s, basis) @ f.V.T
        expected = Xc - P @ Xc
        assert np.linalg.norm(Xt - expected) <= 1e-6 * np.linalg.norm(expected)


def test_robust_basis_is_orthogonal_and_centred():
    stack, _ = noise(n=60, n_layers=4, dim=20, seed=2)
    facts = [_factors(X / np.sqrt(np.sum((X - X.mean(0)) ** 2) / 60)) for X in stack]
    cfg = {"orthogonalization": "basis", "orth_energy": 0.99, "orth_max_rank": 0.5}
    Q, shrink = span_basis([facts[0][0], facts[1][0]], 60, cfg)
    assert shrink is None and 0 < Q.shape[1] <= 30
    for l in (2, 3):
        f, Xc = facts[l]
        Xt = residual_factors(f.U, f.s, (Q, None)) @ f.V.T
        assert np.linalg.norm(Q.T @ Xt) <= 1e-8 * np.linalg.norm(Xc)
        assert np.abs(Xt.mean(axis=0)).max() <= 1e-10 * np.abs(Xc).max()


def test_degeneracy_reference_collapses_robust_keeps_signal():
    stack, y = noise(n=64, n_layers=6, dim=128, seed=3)
    ref = LOESSelector(variant="reference", random_state=0).fit(stack, y)
    rob = LOESSelector(variant="robust", random_state=0).fit(stack, y)
    for k in range(1, 4):
        r_ref = ref.scores_["retained"][k]
        r_rob = rob.scores_["retained"][k]
        assert np.nanmax(r_ref) <= 1e-6  # ‖X̃‖ <= 1e-3 ‖X_c‖
        assert np.nanmin(r_rob) >= 0.3
        loss = rob.scores_["loss"][k][~np.isnan(rob.scores_["loss"][k])]
        assert np.ptp(loss) > 1e-6
