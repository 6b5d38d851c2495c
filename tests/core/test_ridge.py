"""Tests of the ridge primitive (closed-form fits, GCV, leave-one-out)."""

from __future__ import annotations

import numpy as np
import pytest

from skloes.core._geometry import thin_svd
from skloes.core._ridge import (
    GCV_EXPONENTS,
    center_cross_gram,
    center_gram,
    gcv_alpha_grid,
    ridge_fit,
    ridge_fit_gram,
    ridge_svd,
)


def _direct(A, T, lam):
    """W = (A_cᵀA_c + λI)⁻¹ A_cᵀ T_c, b = t̄ - Wᵀā, solved explicitly."""
    a, t = A.mean(0), T.mean(0)
    Ac, Tc = A - a, T - t
    W = np.linalg.solve(Ac.T @ Ac + lam * np.eye(A.shape[1]), Ac.T @ Tc)
    return W, t - a @ W


def _rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


@pytest.mark.parametrize("shape", [(25, 6), (12, 30)])
@pytest.mark.parametrize("lam", [1e-3, 0.7, 50.0])
def test_svd_route_equals_direct_solve(shape, lam):
    rng = np.random.RandomState(0)
    A = rng.normal(size=shape) * rng.uniform(0.5, 3, size=shape[1]) + 2.0
    T = rng.normal(size=(shape[0], 3))
    W, b = _direct(A, T, lam)
    sol = ridge_fit(A, T, alpha=lam, loss="train")
    assert _rel(sol.coef, W) < 1e-8
    assert _rel(sol.intercept, b) < 1e-8
    assert _rel(sol.fitted, A @ W + b) < 1e-8
    E = T - (A @ W + b)
    assert sol.train_loss == pytest.approx(np.sum(E**2) / E.size, rel=1e-8)
    # the O(mq) residual-norm identity used by GCV
    U, s = thin_svd(A)
    Tc = T - T.mean(0)
    z2 = np.sum((U.T @ Tc) ** 2, axis=1)
    f = s**2 / (s**2 + lam)
    rss = np.sum(Tc**2) - np.sum(f * (2 - f) * z2)
    assert rss == pytest.approx(np.sum(E**2), rel=1e-8)


def test_hat_diagonal_is_exact_with_intercept():
    rng = np.random.RandomState(1)
    A = rng.normal(size=(15, 8))
    lam = 0.3
    Ac = A - A.mean(0)
    n = A.shape[0]
    H = np.ones((n, n)) / n + Ac @ np.linalg.solve(Ac.T @ Ac + lam * np.eye(8), Ac.T)
    sol = ridge_svd(*thin_svd(A), rng.normal(size=n), alpha=lam)
    np.testing.assert_allclose(sol.hat, np.diag(H), rtol=1e-10)
    assert np.all(sol.hat < 1)
    assert sol.df == pytest.approx(np.trace(H), rel=1e-10)


@pytest.mark.parametrize("alpha", [0.05, 2.0, "gcv"])
@pytest.mark.parametrize("shape", [(20, 5), (14, 25)])
def test_loo_residuals_equal_brute_force_refits(shape, alpha):
    rng = np.random.RandomState(2)
    n = shape[0]
    A = rng.normal(size=shape)
    T = A[:, :2] @ rng.normal(size=(2, 2)) + 0.3 * rng.normal(size=(n, 2)) + 5.0
    sol = ridge_svd(*thin_svd(A), T, alpha=alpha, loss="loo")
    lam = sol.alpha
    E_loo = np.empty_like(T)
    for i in range(n):
        keep = np.arange(n) != i
        W, b = _direct(A[keep], T[keep], lam)
        E_loo[i] = T[i] - (A[i] @ W + b)
    Tc = T - T.mean(0)
    assert sol.loo_loss == pytest.approx(np.sum(E_loo**2) / np.sum(Tc**2), rel=1e-8)
    E = T - sol.fitted
    np.testing.assert_allclose(E / (1 - sol.hat)[:, None], E_loo, rtol=1e-8, atol=1e-10)


def test_gcv_alpha_is_a_grid_point_and_minimises_gcv():
    rng = np.random.RandomState(3)
    A = rng.normal(size=(40, 10)) * np.linspace(0.1, 5, 10)
    T = A @ rng.normal(size=(10, 2)) + rng.normal(size=(40, 2))
    U, s = thin_svd(A)
    sol = ridge_svd(U, s, T, alpha="gcv")
    grid = gcv_alpha_grid(s)
    assert grid.size == 19 == GCV_EXPONENTS.size
    np.testing.assert_allclose(grid[0], np.mean(s**2) * 1e-6)
    assert np.any(grid == sol.alpha)
    # brute-force GCV from explicit refits at each grid point
    n = A.shape[0]
    brute = []
    for lam in grid:
        W, b = _direct(A, T, lam)
        df = 1 + np.sum(s**2 / (s**2 + lam))
        brute.append((np.sum((T - A @ W - b) ** 2) / n) / (1 - df / n) ** 2)
    np.testing.assert_allclose(sol.gcv_scores, brute, rtol=1e-8)
    assert sol.alpha == grid[int(np.argmin(brute))]


def test_gcv_ties_go_to_the_larger_alpha():
    # a zero target makes GCV exactly 0 at every grid point: a 19-way tie
    rng = np.random.RandomState(4)
    A = rng.normal(size=(12, 3))
    sol = ridge_svd(*thin_svd(A), np.zeros(12), alpha="gcv")
    assert sol.alpha == gcv_alpha_grid(thin_svd(A)[1])[-1]


def test_no_components_gives_the_mean():
    sol = ridge_svd(np.zeros((5, 0)), np.zeros(0), np.arange(5.0), alpha="gcv")
    np.testing.assert_allclose(sol.fitted.ravel(), 2.0)
    np.testing.assert_allclose(sol.hat, 0.2)
    assert sol.df == 1.0
    assert np.isfinite(sol.alpha) and np.isfinite(sol.loss)


def test_gram_route_equals_feature_route():
    rng = np.random.RandomState(5)
    A, B = rng.normal(size=(30, 12)) + 1.0, rng.normal(size=(7, 12)) + 1.0
    T = rng.normal(size=(30, 3))
    for alpha in (0.1, "gcv"):
        g = ridge_fit_gram(A @ A.T, T, alpha=alpha, n_features=12)
        p = ridge_fit(A, T, alpha=alpha)
        assert g.alpha == pytest.approx(p.alpha, rel=1e-10)
        np.testing.assert_allclose(g.fitted, p.fitted, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(
            g.predict_cross_gram(B @ A.T), p.predict(B), rtol=1e-8, atol=1e-10
        )
        Kc = center_cross_gram(B @ A.T, A @ A.T)
        gc = ridge_fit_gram(center_gram(A @ A.T), T, alpha=alpha, centered=True)
        np.testing.assert_allclose(
            gc.predict_cross_gram(Kc, centered=True),
            p.predict(B),
            rtol=1e-8,
            atol=1e-10,
        )


def test_sum_of_layer_grams_is_the_concatenation():
    rng = np.random.RandomState(6)
    L1, L2 = rng.normal(size=(25, 4)), rng.normal(size=(25, 6))
    y = rng.normal(size=25)
    g = ridge_fit_gram(L1 @ L1.T + L2 @ L2.T, y, alpha=0.2)
    p = ridge_fit(np.hstack([L1, L2]), y, alpha=0.2)
    np.testing.assert_allclose(g.fitted, p.fitted, rtol=1e-8)


def test_bad_alpha_and_loss_raise():
    U, s = thin_svd(np.random.RandomState(0).normal(size=(6, 2)))
    with pytest.raises(ValueError, match="alpha"):
        ridge_svd(U, s, np.arange(6.0), alpha=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        ridge_svd(U, s, np.arange(6.0), alpha="foo")
    with pytest.raises(ValueError, match="loss"):
        ridge_svd(U, s, np.arange(6.0), loss="foo")
    with pytest.raises(ValueError, match="predict"):
        ridge_svd(U, s, np.arange(6.0)).predict(np.zeros((1, 2)))


@pytest.mark.parametrize("shape", [(60, 8), (25, 40), (30, 1)])
@pytest.mark.parametrize("alpha", ["gcv", 0.7])
@pytest.mark.parametrize("kernel", [False, True])
def test_ridge_solve_gives_ridge_svd_penalty_and_fit(shape, alpha, kernel):
    """The eigenvector-free solve picks ridge_svd's λ and gives its fit."""
    from skloes.core._ridge import ridge_solve

    rng = np.random.RandomState(0)
    A = rng.normal(size=shape) @ np.diag(np.logspace(0, 2, shape[1]))
    if shape[1] > 1:
        A[:, -1] = A[:, 0]  # rank-deficient: a component under the rank rule
    T = A[:, :1] @ [[1.0, -1.0]] + rng.normal(size=(shape[0], 2))
    Ac, Tc = A - A.mean(axis=0), T - T.mean(axis=0)
    U, s = thin_svd(Ac, center=False)
    ref = ridge_svd(U, s, T, alpha=alpha)
    S, B = (Ac @ Ac.T, Tc) if kernel else (Ac.T @ Ac, Ac.T @ Tc)
    lam, X = ridge_solve(
        S,
        B,
        float(np.sum(Tc**2)),
        shape[0],
        kernel=kernel,
        size=max(shape),
        alpha=alpha,
    )
    assert lam == pytest.approx(ref.alpha, rel=1e-12)
    fitted = T.mean(axis=0) + (S @ X if kernel else Ac @ X)
    np.testing.assert_allclose(fitted, ref.fitted, atol=1e-7 * np.abs(T).max())


def test_ridge_solve_without_components_gives_zero():
    from skloes.core._ridge import ridge_solve

    lam, X = ridge_solve(np.zeros((4, 4)), np.ones((4, 1)), 1.0, 4, kernel=True, size=4)
    assert lam == 0.0 and not X.any()


def _repeated_row_problem(seed=0):
    """A wide table (p > n) whose rows hold one repeated row, and a test split."""
    rng = np.random.RandomState(seed)
    n, p = 60, 200
    w = rng.normal(size=p)
    A = rng.normal(size=(n + 40, p))
    y = (A @ w + 4.0 * rng.normal(size=n + 40) > 0).astype(float)
    A[1], y[1] = A[0], y[0]  # one text seen twice, with its label
    T = np.stack([1 - y, y], axis=1)
    return A[:n], T[:n], A[n:], T[n:]


def _gcv_alpha(route, A, T):
    from skloes.core._ridge import ridge_solve

    Ac, Tc = A - A.mean(axis=0), T - T.mean(axis=0)
    if route == "features":
        return ridge_fit(A, T).alpha
    if route == "gram":
        return ridge_fit_gram(A @ A.T, T, n_features=A.shape[1]).alpha
    tc2 = float(np.sum(Tc**2))
    return ridge_solve(Ac @ Ac.T, Tc, tc2, A.shape[0], kernel=True, size=A.shape[1])[0]


@pytest.mark.parametrize("route", ["features", "gram", "solve"])
def test_one_repeated_row_does_not_send_gcv_to_the_smallest_penalty(route, monkeypatch):
    """With p > n the fit can interpolate; a repeated row then left GCV's
    degrees of freedom one row short of n, so GCV tended to 0 as λ → 0 and
    picked the grid's smallest penalty: the class of defect behind
    LOESSelectorCV's collapsing budget curve (issue 27)."""
    import skloes.core._ridge as ridge

    A, T, _, _ = _repeated_row_problem()
    grid = gcv_alpha_grid(thin_svd(A - A.mean(axis=0), center=False)[1])
    lam = _gcv_alpha(route, A, T)
    distinct = ridge_fit(A[1:], T[1:]).alpha  # the same rows, the copy removed
    assert lam > grid[0] * 1e3  # far from the interpolating end of the grid
    assert lam == pytest.approx(distinct, rel=1.5)
    monkeypatch.setattr(ridge, "free_rows", lambda n, m, n_features: n)
    assert _gcv_alpha(route, A, T) == pytest.approx(grid[0])  # the former GCV


def test_free_rows_counts_rows_only_when_they_limit_the_rank():
    from skloes.core._ridge import free_rows

    assert free_rows(100, 98, 500) == 99  # a repeated row in a wide table
    assert free_rows(100, 99, 500) == 100  # distinct rows: every row
    assert free_rows(100, 20, 20) == 100  # narrow table: the columns limit it
    assert free_rows(100, 98, None) == 100
