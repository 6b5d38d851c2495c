"""The authors' step (objective="residual"): LOES scores against direct computations."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _support.loes import (
    planted,
    span_basis,
)

from skloes import LOESSelector
from skloes.core._geometry import thin_svd


# --------------------------------------------------------------------------
# An independent, straightforward implementation of the reference variant
# --------------------------------------------------------------------------
def _hand_reference(stack, y, K, triplets, alpha=1.0, gamma=0.5, eta=0.1):
    """Explicit (Σd)×(Σd) solves, eigvalsh isotropy, loops over centroids."""
    lam, eps, eps_o = 1e-3, 1e-6, 1e-6
    L, n, d = stack.shape
    classes, codes = np.unique(y, return_inverse=True)
    C = classes.size
    Y = np.eye(C)[codes]
    Xc = [X - X.mean(axis=0) for X in stack]

    def iso(X):
        mu = np.linalg.eigvalsh(X.T @ X / n + eps * np.eye(d))
        mu = np.maximum(mu, eps)
        return mu.mean() / (mu.std() + eps)

    def ridge(A, T):
        a, t = A.mean(axis=0), T.mean(axis=0)
        W = np.linalg.solve(
            (A - a).T @ (A - a) + lam * np.eye(A.shape[1]), (A - a).T @ (T - t)
        )
        F = t + (A - a) @ W
        return F, np.sum((T - F) ** 2) / T.size

    def overlap(A, B):
        return np.linalg.norm(A.T @ B) / (np.linalg.norm(A) * np.linalg.norm(B))

    def cka(A, B):
        A, B = A - A.mean(0), B - B.mean(0)
        return np.linalg.norm(A.T @ B) ** 2 / (
            np.linalg.norm(A.T @ A) * np.linalg.norm(B.T @ B)
        )

    def tri(A):
        cent = [A[codes == c].mean(axis=0) for c in range(C)]
        areas = []
        for a, b, c in triplets:
            u, v = cent[a] - cent[b], cent[a] - cent[c]
            areas.append(0.5 * np.sqrt(max(0.0, (u @ u) * (v @ v) - (u @ v) ** 2)))
        return float(np.mean(areas))

    Y_hat = np.tile(Y.mean(axis=0), (n, 1))
    R, S, tables = Y - Y_hat, [], []
    for k in range(K):
        if k:
            XS = np.hstack([Xc[j] for j in S])
            P = XS @ np.linalg.solve(XS.T @ XS + eps_o * np.eye(XS.shape[1]), XS.T)
        table = {
            key: np.full(L, np.nan)
            for key in ("score", "loss", "isotropy", "redundancy", "triangle")
        }
        fits = {}
        for l in range(L):
            if l in S or (k and max(cka(stack[l], stack[j]) for j in S) >= 1 - 1e-10):
                continue
            Xt = Xc[l] if k == 0 else Xc[l] - P @ Xc[l]
            fits[l], loss = ridge(Xt, R)
            red = max(overlap(stack[l], stack[j]) for j in S) if k else 0.0
            t = tri(Xt) if k and C >= 3 else 0.0
            i = iso(Xc[l])
            table["loss"][l], table["isotropy"][l] = loss, i
            table["redundancy"][l], table["triangle"][l] = red, t
            table["score"][l] = loss + alpha * (1 - i) + gamma * red - eta * t
        best = int(np.nanargmin(table["score"]))
        Y_hat = Y_hat + fits[best]
        R = Y - Y_hat
        S.append(best)
        tables.append(table)
    return S, tables


def test_reference_reproduces_hand_computed_scores():
    rng = np.random.RandomState(7)
    n, d = 40, 5
    y = rng.randint(0, 4, size=n)
    stack = np.stack(
        [
            rng.normal(size=(n, d)) * 3.0 + 1.5,
            rng.normal(size=(n, d)) @ rng.normal(size=(d, d))
            + np.eye(4)[y] @ rng.normal(size=(4, d)),
            0.2 * rng.normal(size=(n, d))
            - 4.0
            + 0.5 * np.eye(4)[y] @ rng.normal(size=(4, d)),
        ]
    )
    sel = LOESSelector(
        n_layers_to_select=3, variant="reference", max_samples=None, random_state=0
    ).fit(stack, y)
    order, tables = _hand_reference(stack, y, 3, sel.triplets_)
    assert sel.selection_order_.tolist() == order
    for k, table in enumerate(tables):
        for key, expected in table.items():
            got = sel.scores_[key][k]
            np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
            ok = ~np.isnan(expected)
            np.testing.assert_allclose(
                got[ok],
                expected[ok],
                rtol=1e-10,
                atol=1e-12,
                err_msg=f"{key} at step {k}",
            )
    assert sel.scores_["triangle"][1:][~np.isnan(sel.scores_["triangle"][1:])].max() > 0
    # reference triplets: min(200, 3C) = 12 draws over {0..3}³, repeats allowed
    assert sel.triplets_.shape == (12, 3)


def test_robust_step_one_scores_equal_explicit_residual_computation():
    from skloes.core._geometry import class_centroids, triangle_areas
    from skloes.core._ridge import ridge_fit

    stack, y = planted(n=90, n_layers=4, dim=10, seed=40, informative=(1, 3))
    sel = LOESSelector(
        n_layers_to_select=2, max_samples=None, objective="residual", random_state=0
    )
    sel.fit(stack, y)
    n = stack.shape[1]
    prep = [(X - X.mean(0)) / np.sqrt(np.sum((X - X.mean(0)) ** 2) / n) for X in stack]
    first = sel.selection_order_[0]
    U, s = thin_svd(prep[first])
    cfg = {"orthogonalization": "basis", "orth_energy": 0.99, "orth_max_rank": 0.5}
    Q, _ = span_basis([SimpleNamespace(U=U, s=s, dim=10)], n, cfg)
    Y = np.eye(4)[y]
    R = Y - Y.mean(0) - sel.step_fits_[0]
    denom = np.sum((Y - Y.mean(0)) ** 2)
    for l in range(4):
        if l == first:
            continue
        Xt = prep[l] - Q @ (Q.T @ prep[l])
        loo = ridge_fit(Xt, R, alpha="gcv", loss="loo", loo_denominator=denom)
        assert sel.scores_["loss"][1, l] == pytest.approx(loo.loss, rel=1e-8)
        assert sel.scores_["ridge_alpha"][1, l] == pytest.approx(loo.alpha, rel=1e-8)
        energy = np.sum(Xt**2) / n
        cent = class_centroids(Xt, y, 4)
        tri = triangle_areas(cent, sel.triplets_).mean() / energy
        assert sel.scores_["triangle"][1, l] == pytest.approx(tri, rel=1e-8)
        assert sel.scores_["retained"][1, l] == pytest.approx(energy, rel=1e-8)
