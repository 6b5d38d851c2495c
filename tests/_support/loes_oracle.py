"""FROZEN ORACLE: the LOES path as of commit 9353208 (before the speed work).

Do not edit the code below this header. It is the modules of that commit,
``_geometry.py`` (numpy part), ``_ridge.py`` and ``selection/_loes_path.py``,
concatenated verbatim; those files are gone (today's arithmetic lives in
``skloes/core/_geometry.py``, ``skloes/core/_ridge.py`` and the
``skloes/selection/_loes/`` package), and the tests compare the optimised path
with this copy. Its config keys are the old ones (``alpha``/``gamma``/``eta``
for the score weights).
"""

# ruff: noqa
from __future__ import annotations

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause


from itertools import combinations
from math import comb

import numpy as np

EPS64 = np.finfo(np.float64).eps


# --------------------------------------------------------------------------
# Thin decomposition
# --------------------------------------------------------------------------
def thin_svd(X, *, center=True, return_v=False):
    """Thin SVD ``X_c = U diag(s) Vᵀ`` from ``eigh`` of the smaller Gram.

    Components with ``s_j² <= s_1²·max(n, d)·eps`` are dropped (the rank rule
    of the spec), so ``U`` has orthonormal columns spanning the numerical
    column space of the (centred) data.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Data matrix.
    center : bool, default=True
        Subtract the column means first.
    return_v : bool, default=False
        Also return the right singular vectors.

    Returns
    -------
    U : ndarray of shape (n, r)
    s : ndarray of shape (r,)
        Singular values, descending.
    V : ndarray of shape (d, r)
        Only when ``return_v``.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> X = np.random.RandomState(0).normal(size=(5, 3))
    >>> U, s = thin_svd(X)
    >>> np.allclose(s, np.linalg.svd(X - X.mean(0), compute_uv=False)[:len(s)])
    True
    """
    X = np.asarray(X, dtype=np.float64)
    if center:
        X = X - X.mean(axis=0)
    n, d = X.shape
    if n <= d:
        w, U = np.linalg.eigh(X @ X.T)
    else:
        w, V = np.linalg.eigh(X.T @ X)
    w, order = w[::-1], slice(None, None, -1)
    keep = w > max(w[0], 0.0) * max(n, d) * EPS64 if w.size else w > 0
    keep &= w > 0
    s = np.sqrt(w[keep])
    if n <= d:
        U = U[:, order][:, keep]
        V = (X.T @ U) / s if return_v else None
    else:
        V = V[:, order][:, keep]
        U = (X @ V) / s
    return (U, s, V) if return_v else (U, s)


# --------------------------------------------------------------------------
# Isotropy, redundancy
# --------------------------------------------------------------------------
def isotropy_erank(s, n, d):
    """Bounded isotropy: exp(entropy of s²/Σs²) / min(n-1, d), in (0, 1].

    Examples
    --------
    >>>     >>> round(isotropy_erank([1.0, 1.0, 1.0], n=10, d=3), 12)
    1.0
    >>> round(isotropy_erank([1.0], n=10, d=3), 6)
    0.333333
    """
    s = np.asarray(s, dtype=np.float64)
    s2 = s[s > 0] ** 2
    if s2.size == 0:
        return 0.0
    p = s2 / s2.sum()
    return float(np.exp(-(p * np.log(p)).sum()) / min(n - 1, d))


def isotropy_inv_cv(s, n, d, eps=1e-6):
    """The authors' isotropy: mean(μ) / (std(μ) + eps) of covariance eigenvalues.

    For ``d <= 512`` the ``d`` eigenvalues of ``X_cᵀX_c/n + eps·I`` are used;
    otherwise the ``min(n, d)`` values ``max(s²/n, eps)``. Unbounded.

    Examples
    --------
    >>>     >>> isotropy_inv_cv([1.0, 1.0], n=4, d=2) > 1e5
    True
    """
    s = np.asarray(s, dtype=np.float64)
    mu = s**2 / n
    if d <= 512:
        mu = np.concatenate([mu + eps, np.full(d - mu.size, eps)])
    else:
        mu = np.concatenate([mu, np.zeros(min(n, d) - mu.size)])
    mu = np.maximum(mu, eps)
    return float(mu.mean() / (mu.std() + eps))


def cka_from_svd(U_a, s_a, U_b, s_b):
    """Linear CKA of two centred matrices from their thin SVD factors.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> X = np.random.RandomState(0).normal(size=(20, 4))
    >>> round(cka_from_svd(*thin_svd(X), *thin_svd(3 * X)), 12)
    1.0
    """
    if len(s_a) == 0 or len(s_b) == 0:
        return 0.0
    cross = (np.asarray(s_a)[:, None] * (U_a.T @ U_b)) * np.asarray(s_b)[None, :]
    denom = np.sqrt((s_a**4).sum()) * np.sqrt((s_b**4).sum())
    return float(min((cross**2).sum() / denom, 1.0))


def cka(A, B):
    """Linear CKA of ``A`` and ``B`` (n samples each), centred internally.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> A = np.random.RandomState(0).normal(size=(30, 5))
    >>> round(cka(A, -2 * A), 12)
    1.0
    """
    return cka_from_svd(*thin_svd(A), *thin_svd(B))


def overlap_redundancy(A, B):
    """The authors' redundancy ``‖AᵀB‖_F / (‖A‖_F ‖B‖_F)`` on raw (uncentred) data.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> round(overlap_redundancy(np.ones((4, 2)), np.ones((4, 3))), 12)
    1.0
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    n, da, db = A.shape[0], A.shape[1], B.shape[1]
    if n * n <= da * db:
        num = np.sqrt(max(np.vdot(A @ A.T, B @ B.T), 0.0))
    else:
        num = np.linalg.norm(A.T @ B)
    denom = np.linalg.norm(A) * np.linalg.norm(B)
    return float(num / denom) if denom > 0 else 0.0


# --------------------------------------------------------------------------
# Class-centroid simplex
# --------------------------------------------------------------------------
def class_centroids(X, codes, n_classes):
    """Row means of ``X`` per integer class code ``0..n_classes-1``."""
    X = np.asarray(X, dtype=np.float64)
    sums = np.zeros((n_classes, X.shape[1]))
    np.add.at(sums, codes, X)
    counts = np.bincount(codes, minlength=n_classes).astype(np.float64)
    return sums / np.maximum(counts, 1.0)[:, None]


def triangle_areas(centroids, triplets):
    """Areas ½√max(0, ‖u‖²‖v‖² − (u·v)²) of centroid triangles (numpy).

    ``u = μ_a − μ_b`` and ``v = μ_a − μ_c`` for each row ``(a, b, c)`` of
    ``triplets``; repeated indices give 0.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> tri = np.array([[0, 0], [2, 0], [1, np.sqrt(3)]])
    >>> bool(np.isclose(triangle_areas(tri, [[0, 1, 2]])[0], np.sqrt(3)))
    True
    """
    M = np.asarray(centroids, dtype=np.float64)
    t = np.asarray(triplets, dtype=np.intp).reshape(-1, 3)
    K = M @ M.T
    a, b, c = t[:, 0], t[:, 1], t[:, 2]
    uu = K[a, a] + K[b, b] - 2 * K[a, b]
    vv = K[a, a] + K[c, c] - 2 * K[a, c]
    uv = K[a, a] - K[a, b] - K[a, c] + K[b, c]
    area = 0.5 * np.sqrt(np.maximum(uu * vv - uv**2, 0.0))
    # exact 0 for repeated indices (rounding in uu*vv - uv² would give ~1e-8)
    area[(a == b) | (a == c) | (b == c)] = 0.0
    return area


def all_triplets(n_classes):
    """Every distinct-class triplet ``a < b < c`` as an int array (T, 3)."""
    out = np.array(list(combinations(range(n_classes), 3)), dtype=np.intp)
    return out.reshape(-1, 3)


def sample_distinct_triplets(n_classes, n_triplets, rng):
    """``min(n_triplets, C(n,3))`` distinct unordered distinct-class triplets.

    Drawn uniformly without replacement from ``rng`` (a numpy RandomState or
    Generator).
    """
    total = comb(n_classes, 3)
    if total <= n_triplets:
        return all_triplets(n_classes)
    chosen = set()
    while len(chosen) < n_triplets:
        draw = rng.choice(n_classes, size=3, replace=False)
        chosen.add(tuple(sorted(int(v) for v in draw)))
    return np.array(sorted(chosen), dtype=np.intp)


# --------------------------------------------------------------------------
# Spectra: matrix entropy and effective rank
# --------------------------------------------------------------------------
def matrix_entropy(eigenvalues, alpha=1.0):
    """Matrix α-entropy of a PSD spectrum (natural log).

    Negative eigenvalues are clamped to 0, zeros dropped, ``p = λ/Σλ``;
    ``H_1 = -Σ p log p`` and ``H_α = log(Σ p^α)/(1-α)``. An all-zero
    spectrum gives 0.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> bool(np.isclose(matrix_entropy(np.ones(8)), np.log(8)))
    True
    >>> bool(np.isclose(matrix_entropy(np.ones(8), alpha=2), np.log(8)))
    True
    """
    lam = np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None)
    lam = lam[lam > 0]
    if lam.size == 0:
        return 0.0
    p = lam / lam.sum()
    if alpha == 1:
        return float(-(p * np.log(p)).sum())
    return float(np.log((p**alpha).sum()) / (1.0 - alpha))


def gram_spectrum(Z, *, clamp_gram=False):
    """Eigenvalues of ``ZZᵀ`` if ``N <= D`` else of ``ZᵀZ`` (same nonzeros)."""
    Z = np.asarray(Z, dtype=np.float64)
    G = Z @ Z.T if Z.shape[0] <= Z.shape[1] else Z.T @ Z
    if clamp_gram:
        G = np.maximum(G, 0.0)
    return np.linalg.eigvalsh(G)


def effective_rank(s, *, power=1):
    """Effective rank ``exp(-Σ q log q)`` of singular values ``s``.

    ``power=1`` is Roy and Vetterli's ``q = σ/Σσ``; ``power=2`` uses
    ``q = σ²/Σσ²``.

    Examples
    --------
    >>>     >>> round(effective_rank([2.0, 2.0, 2.0]), 12)
    3.0
    """
    s = np.asarray(s, dtype=np.float64)
    return float(np.exp(matrix_entropy(s**power)))


# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause


from dataclasses import dataclass, field
from numbers import Real

import numpy as np


#: Exponents ``e`` of the GCV grid ``Λ = {s̄²·10^e}``: -6, -5.5, ..., 3 (19 points).
GCV_EXPONENTS = np.linspace(-6.0, 3.0, 19)

#: Floor of ``1 - h_i`` in the leave-one-out residuals.
LOO_FLOOR = 1e-12


@dataclass
class RidgeSolution:
    """Result of one ridge fit (see :func:`ridge_svd`).

    Attributes
    ----------
    alpha : float
        The penalty λ used (the GCV minimiser for ``alpha="gcv"``; 0.0 when
        there is no component to penalise).
    loss : float
        The loss asked for: ``train_loss`` or ``loo_loss``.
    train_loss : float
        In-sample MSE ``‖E‖_F²/(n·q)``.
    loo_loss : float
        ``‖E^loo‖_F² / loo_denominator`` (unexplained fraction).
    df : float
        Effective degrees of freedom ``1 + Σ f_j`` (the intercept counts 1).
    fitted : ndarray of shape (n, q)
        In-sample fit ``T̂``, intercept included.
    hat : ndarray of shape (n,)
        Exact hat diagonal with intercept, each ``< 1``.
    target_mean : ndarray of shape (q,)
        Column means ``t̄`` of the target.
    dual_coef : ndarray of shape (n, q)
        ``U diag(1/(s²+λ)) Uᵀ T_c``; predictions on new rows are
        ``t̄ + K_c @ dual_coef`` with the centred cross-Gram ``K_c``.
    gcv_scores : ndarray of shape (19,) or None
        GCV(λ) over :func:`gcv_alpha_grid` when ``alpha="gcv"``.
    coef : ndarray of shape (n_features, q) or None
        Primal coefficients (set by :func:`ridge_fit`).
    intercept : ndarray of shape (q,) or None
        Intercept ``t̄ - āᵀ coef`` (set by :func:`ridge_fit`).
    gram_means : tuple or None
        ``(G.mean(axis=0), G.mean())`` of the training Gram (set by
        :func:`ridge_fit_gram`), used to centre cross-Grams.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> rng = np.random.RandomState(0)
    >>> A, y = rng.normal(size=(20, 3)), rng.normal(size=20)
    >>> sol = ridge_fit(A, y, alpha=1.0)
    >>> sol.predict(A).shape
    (20, 1)
    """

    alpha: float
    loss: float
    train_loss: float
    loo_loss: float
    df: float
    fitted: np.ndarray
    hat: np.ndarray
    target_mean: np.ndarray
    dual_coef: np.ndarray
    gcv_scores: np.ndarray | None = None
    coef: np.ndarray | None = None
    intercept: np.ndarray | None = None
    gram_means: tuple | None = field(default=None, repr=False)
    feature_mean: np.ndarray | None = field(default=None, repr=False)

    def predict(self, A_new):
        """Predict new rows from features (needs :func:`ridge_fit`).

        Parameters
        ----------
        A_new : array-like of shape (n_new, n_features)
            New rows, in the same (unscaled) feature space as the fit.

        Returns
        -------
        T_new : ndarray of shape (n_new, q)
            Predictions.
        """
        if self.coef is None:
            raise ValueError(
                "RidgeSolution: `predict` needs primal coefficients; fit with "
                "ridge_fit, or use predict_cross_gram for a Gram fit."
            )
        return np.asarray(A_new, dtype=np.float64) @ self.coef + self.intercept

    def predict_cross_gram(self, K, *, centered=False):
        """Predict new rows from the cross-Gram ``K = A_new A_fitᵀ``.

        Parameters
        ----------
        K : array-like of shape (n_new, n_fit)
            Inner products of the new rows with the training rows.
        centered : bool, default=False
            Whether ``K`` is already centred with the training means. If False,
            it is centred with :func:`center_cross_gram` (needs a fit by
            :func:`ridge_fit_gram` with ``centered=False``).

        Returns
        -------
        T_new : ndarray of shape (n_new, q)
            Predictions.
        """
        K = np.asarray(K, dtype=np.float64)
        if not centered:
            if self.gram_means is None:
                raise ValueError(
                    "RidgeSolution: `K` must be centred (centered=True) when the "
                    "fit was given a centred Gram."
                )
            col_mean, grand_mean = self.gram_means
            K = K - K.mean(axis=1, keepdims=True) - col_mean[None, :] + grand_mean
        return self.target_mean + K @ self.dual_coef


def gcv_alpha_grid(s):
    """The 19-point GCV grid ``{s̄²·10^e : e = -6, -5.5, ..., 3}``, ascending.

    Parameters
    ----------
    s : array-like of shape (m,)
        Singular values of the centred features (``s̄² = mean_j s_j²``).

    Returns
    -------
    grid : ndarray of shape (19,)
        Candidate penalties, ascending.

    Examples
    --------
    >>>     >>> grid = gcv_alpha_grid([1.0, 1.0])
    >>> len(grid), float(grid[0]), float(grid[-1])
    (19, 1e-06, 1000.0)
    """
    s = np.asarray(s, dtype=np.float64)
    return float(np.mean(s**2)) * 10.0**GCV_EXPONENTS


def _as_2d_target(T):
    T = np.asarray(T, dtype=np.float64)
    return T[:, None] if T.ndim == 1 else T


def _gcv_select(s, z2, tc2, n):
    """Pick λ by GCV over the grid; ties go to the larger λ."""
    grid = gcv_alpha_grid(s)
    s2 = s**2
    scores = np.empty(grid.size)
    for i, lam in enumerate(grid):
        f = s2 / (s2 + lam)
        rss = max(tc2 - float(np.dot(f * (2.0 - f), z2)), 0.0)
        denom = 1.0 - (1.0 + f.sum()) / n
        scores[i] = (rss / n) / denom**2 if denom > 1e-12 else np.inf
    best = 0
    for i in range(1, grid.size):  # ascending scan, ``<=`` keeps the larger λ
        if scores[i] <= scores[best]:
            best = i
    return float(grid[best]), scores


def ridge_svd(U, s, T, *, alpha="gcv", loss="loo", loo_denominator=None):
    """Ridge of ``T`` on centred features given by their thin SVD factors.

    The features are ``A_c = U diag(s) Vᵀ`` (``U`` with orthonormal columns
    orthogonal to the ones vector); ``V`` is not needed. The intercept is free
    (unpenalised), so ``T`` may have any column means.

    Parameters
    ----------
    U : ndarray of shape (n, m)
        Left singular vectors of the centred features (``m`` may be 0).
    s : ndarray of shape (m,)
        Positive singular values.
    T : array-like of shape (n,) or (n, q)
        Target.
    alpha : float or "gcv", default="gcv"
        Penalty λ > 0 (absolute), or ``"gcv"`` to minimise GCV over
        :func:`gcv_alpha_grid`.
    loss : {"loo", "train"}, default="loo"
        Which loss ``RidgeSolution.loss`` reports.
    loo_denominator : float or None, default=None
        Denominator of the LOO loss; None uses ``‖T_c‖_F²`` (the spec fixes it
        to ``‖Y - 1ȳᵀ‖_F²`` of the original targets for a whole selection).

    Returns
    -------
    solution : RidgeSolution
        Fit, losses, hat diagonal and dual coefficients.

    Examples
    --------
    >>> import numpy as np
    >>>     >>>     >>> rng = np.random.RandomState(0)
    >>> A = rng.normal(size=(30, 4))
    >>> y = A @ [1.0, -2.0, 0.0, 0.5] + 0.1 * rng.normal(size=30)
    >>> U, s = thin_svd(A)
    >>> sol = ridge_svd(U, s, y)
    >>> bool(sol.loo_loss < 0.05), bool(np.isin(sol.alpha, gcv_alpha_grid(s)))
    (True, True)
    """
    T = _as_2d_target(T)
    U = np.asarray(U, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    n, q = T.shape
    t_mean = T.mean(axis=0)
    Tc = T - t_mean
    tc2 = float(np.sum(Tc**2))
    Z = U.T @ Tc
    gcv_scores = None
    if s.size == 0:
        lam = float(alpha) if isinstance(alpha, Real) else 0.0
        f = s
    else:
        if isinstance(alpha, str):
            if alpha != "gcv":
                raise ValueError(f"ridge: `alpha` must be > 0 or 'gcv'; got {alpha!r}.")
            lam, gcv_scores = _gcv_select(s, np.sum(Z**2, axis=1), tc2, n)
        else:
            lam = float(alpha)
            if not lam > 0:
                raise ValueError(f"ridge: `alpha` must be > 0 or 'gcv'; got {alpha!r}.")
        f = s**2 / (s**2 + lam)
    fit_c = U @ (f[:, None] * Z)
    E = Tc - fit_c
    hat = 1.0 / n + (U**2) @ f
    E_loo = E / np.maximum(1.0 - hat, LOO_FLOOR)[:, None]
    denom = tc2 if loo_denominator is None else float(loo_denominator)
    train_loss = float(np.sum(E**2)) / (n * q)
    loo_loss = float(np.sum(E_loo**2)) / denom if denom > 0 else 0.0
    dual = U @ (Z / (s**2 + lam)[:, None]) if s.size else np.zeros((n, q))
    if loss not in ("loo", "train"):
        raise ValueError(f"ridge: `loss` must be 'loo' or 'train'; got {loss!r}.")
    return RidgeSolution(
        alpha=lam,
        loss=loo_loss if loss == "loo" else train_loss,
        train_loss=train_loss,
        loo_loss=loo_loss,
        df=1.0 + float(f.sum()),
        fitted=t_mean + fit_c,
        hat=hat,
        target_mean=t_mean,
        dual_coef=dual,
        gcv_scores=gcv_scores,
    )


def ridge_train_loss(s, Z, tc2, n, *, alpha="gcv"):
    """λ and in-sample loss from the spectrum alone (no ``U``, no hat diagonal).

    Uses ``‖E‖_F² = ‖T_c‖² − Σ_j (1 − (1 − f_j)²)‖Z_j‖²``, so it costs
    ``O(m·q)``; :func:`ridge_svd` gives the same ``alpha`` and ``train_loss``.

    Parameters
    ----------
    s : ndarray of shape (m,)
        Singular values of the centred features.
    Z : ndarray of shape (m, q)
        ``Uᵀ T_c``.
    tc2 : float
        ``‖T_c‖_F²``.
    n : int
        Number of rows.
    alpha : float or "gcv", default="gcv"
        See :func:`ridge_svd`.

    Returns
    -------
    alpha : float
        The penalty used.
    train_loss : float
        ``‖E‖_F² / (n·q)``.

    Examples
    --------
    >>> import numpy as np
    >>>     >>>     >>> rng = np.random.RandomState(0)
    >>> A, T = rng.normal(size=(20, 4)), rng.normal(size=(20, 2))
    >>> U, s = thin_svd(A)
    >>> Tc = T - T.mean(0)
    >>> lam, loss = ridge_train_loss(s, U.T @ Tc, float(np.sum(Tc**2)), 20)
    >>> bool(np.isclose(loss, ridge_svd(U, s, T, loss="train").loss))
    True
    """
    s = np.asarray(s, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    Z = Z[:, None] if Z.ndim == 1 else Z
    q = Z.shape[1]
    if s.size == 0:
        return (float(alpha) if isinstance(alpha, Real) else 0.0), tc2 / (n * q)
    z2 = np.sum(Z**2, axis=1)
    lam = _gcv_select(s, z2, tc2, n)[0] if isinstance(alpha, str) else float(alpha)
    f = s**2 / (s**2 + lam)
    return lam, max(tc2 - float(np.dot(f * (2.0 - f), z2)), 0.0) / (n * q)


def ridge_fit(A, T, *, alpha="gcv", loss="loo", loo_denominator=None):
    """Ridge with a free intercept on a feature matrix, with coefficients.

    Parameters
    ----------
    A : array-like of shape (n, n_features)
        Features (rows are samples); centred internally.
    T : array-like of shape (n,) or (n, q)
        Target.
    alpha : float or "gcv", default="gcv"
        See :func:`ridge_svd`.
    loss : {"loo", "train"}, default="loo"
        See :func:`ridge_svd`.
    loo_denominator : float or None, default=None
        See :func:`ridge_svd`.

    Returns
    -------
    solution : RidgeSolution
        With ``coef`` (n_features, q) and ``intercept`` (q,) set, so that
        ``solution.predict(A_new)`` works.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> rng = np.random.RandomState(0)
    >>> A = rng.normal(size=(40, 3))
    >>> y = A @ [1.0, 2.0, -1.0] + 3.0
    >>> sol = ridge_fit(A, y, alpha=1e-8)
    >>> np.round(sol.coef.ravel(), 6).tolist(), round(float(sol.intercept[0]), 6)
    ([1.0, 2.0, -1.0], 3.0)
    """
    A = np.asarray(A, dtype=np.float64)
    a_mean = A.mean(axis=0)
    U, s, V = thin_svd(A, center=True, return_v=True)
    sol = ridge_svd(U, s, T, alpha=alpha, loss=loss, loo_denominator=loo_denominator)
    if s.size:
        Z = U.T @ (_as_2d_target(T) - sol.target_mean)
        sol.coef = V @ ((s / (s**2 + sol.alpha))[:, None] * Z)
    else:
        sol.coef = np.zeros((A.shape[1], sol.target_mean.size))
    sol.intercept = sol.target_mean - a_mean @ sol.coef
    sol.feature_mean = a_mean
    return sol


def center_gram(G):
    """Double-centre a Gram matrix: ``H G H`` with ``H = I - 11ᵀ/n``.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> A = np.random.RandomState(0).normal(size=(5, 3))
    >>> Ac = A - A.mean(0)
    >>> bool(np.allclose(center_gram(A @ A.T), Ac @ Ac.T))
    True
    """
    G = np.asarray(G, dtype=np.float64)
    col = G.mean(axis=0)
    return G - col[None, :] - col[:, None] + G.mean()


def center_cross_gram(K, G):
    """Centre a cross-Gram ``K = A_new Aᵀ`` with the training Gram ``G = A Aᵀ``.

    Returns ``(A_new - 1āᵀ)(A - 1āᵀ)ᵀ`` where ``ā`` is the training mean.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> rng = np.random.RandomState(0)
    >>> A, B = rng.normal(size=(6, 3)), rng.normal(size=(2, 3))
    >>> m = A.mean(0)
    >>> bool(np.allclose(center_cross_gram(B @ A.T, A @ A.T), (B - m) @ (A - m).T))
    True
    """
    K = np.asarray(K, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    return K - K.mean(axis=1, keepdims=True) - G.mean(axis=0)[None, :] + G.mean()


def gram_factors(G, *, centered=False, n_features=None):
    """Thin factors ``(U, s)`` of the centred features from their Gram.

    Eigenpairs with ``s_j² <= s_1²·max(n, n_features)·eps`` are dropped (the
    rank rule of ``thin_svd``).

    Parameters
    ----------
    G : array-like of shape (n, n)
        ``A Aᵀ`` (or ``A_c A_cᵀ`` with ``centered=True``).
    centered : bool, default=False
        Whether ``G`` is already double-centred.
    n_features : int or None, default=None
        Width of ``A`` for the rank tolerance; None uses ``n``.

    Returns
    -------
    U : ndarray of shape (n, m)
    s : ndarray of shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>>     >>> A = np.random.RandomState(0).normal(size=(6, 2))
    >>> U, s = gram_factors(A @ A.T, n_features=2)
    >>> s.shape
    (2,)
    """
    Gc = np.asarray(G, dtype=np.float64) if centered else center_gram(G)
    n = Gc.shape[0]
    w, U = np.linalg.eigh((Gc + Gc.T) / 2.0)
    w, U = w[::-1], U[:, ::-1]
    width = n if n_features is None else max(n, int(n_features))
    keep = (w > max(w[0], 0.0) * width * EPS64) & (w > 0) if w.size else w > 0
    return U[:, keep], np.sqrt(w[keep])


def ridge_fit_gram(
    G,
    T,
    *,
    alpha="gcv",
    loss="loo",
    centered=False,
    n_features=None,
    loo_denominator=None,
):
    """Ridge with a free intercept from the Gram of the training rows.

    Parameters
    ----------
    G : array-like of shape (n, n)
        ``A Aᵀ`` of the training features (a sum of per-layer Grams for a
        concatenation of layers).
    T : array-like of shape (n,) or (n, q)
        Target.
    alpha : float or "gcv", default="gcv"
        See :func:`ridge_svd`.
    loss : {"loo", "train"}, default="loo"
        See :func:`ridge_svd`.
    centered : bool, default=False
        Whether ``G`` is already double-centred. If False, the solution keeps
        the means needed to centre cross-Grams in
        :meth:`RidgeSolution.predict_cross_gram`.
    n_features : int or None, default=None
        Width of ``A`` for the rank tolerance.
    loo_denominator : float or None, default=None
        See :func:`ridge_svd`.

    Returns
    -------
    solution : RidgeSolution
        Predict new rows with ``solution.predict_cross_gram(A_new @ A.T)``.

    Examples
    --------
    >>> import numpy as np
    >>>     >>> rng = np.random.RandomState(0)
    >>> A, B, y = rng.normal(size=(30, 5)), rng.normal(size=(4, 5)), rng.normal(size=30)
    >>> g = ridge_fit_gram(A @ A.T, y, alpha=0.5, n_features=5)
    >>> p = ridge_fit(A, y, alpha=0.5)
    >>> bool(np.allclose(g.predict_cross_gram(B @ A.T), p.predict(B)))
    True
    """
    G = np.asarray(G, dtype=np.float64)
    U, s = gram_factors(G, centered=centered, n_features=n_features)
    sol = ridge_svd(U, s, T, alpha=alpha, loss=loss, loo_denominator=loo_denominator)
    if not centered:
        sol.gram_means = (G.mean(axis=0), float(G.mean()))
    return sol


# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause


import warnings
from math import floor
from numbers import Integral

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state


#: Component values of each variant; ``alpha`` is the score weight.
VARIANTS = {
    "reference": {
        "scaling": "none",
        "ridge_alpha": 1e-3,
        "loss": "train",
        "orthogonalization": "ridge",
        "isotropy": "inv_cv",
        "redundancy": "overlap",
        "triplets": "sampled",
        "alpha": 1.0,
    },
    "robust": {
        "scaling": "unit_variance",
        "ridge_alpha": "gcv",
        "loss": "loo",
        "orthogonalization": "basis",
        "isotropy": "erank",
        "redundancy": "cka",
        "triplets": "auto",
        "alpha": 0.1,
    },
}
COMPONENTS = (
    "scaling",
    "ridge_alpha",
    "loss",
    "orthogonalization",
    "isotropy",
    "redundancy",
    "triplets",
    "alpha",
)
SCORE_KEYS = (
    "score",
    "loss",
    "isotropy",
    "redundancy",
    "triangle",
    "ridge_alpha",
    "retained",
)
ORTH_RIDGE_EPS = 1e-6  # ε_o of the reference projection
DUPLICATE_CKA = 1 - 1e-10  # the duplicate guard's threshold
EXHAUSTED = 1e-10  # ‖X̃‖²/‖X‖² below which a candidate is exhausted


# --------------------------------------------------------------------------
# Calibration rows
# --------------------------------------------------------------------------
def _calibration_rows(max_samples, n, codes, rng):
    """Sorted calibration indices: stratified for classification."""
    if max_samples is None:
        count = n
    elif isinstance(max_samples, Integral):
        count = min(int(max_samples), n)
    else:
        count = min(n, floor(max_samples * n))
    if count >= n:
        return np.arange(n)
    if codes is not None:
        try:
            rows, _ = train_test_split(
                np.arange(n), train_size=count, stratify=codes, random_state=rng
            )
            return np.sort(rows)
        except ValueError:
            pass
    return np.sort(rng.choice(n, size=count, replace=False))


def _draw_triplets(rule, n_classes, rng):
    """The triangle triplets, drawn once per fit."""
    kind, count = rule
    if kind == "sampled":  # uniform over {0..C-1}³, repeats allowed
        count = min(200, 3 * n_classes) if count is None else count
        return rng.randint(0, n_classes, size=(count, 3)).astype(np.intp)
    if count is None and n_classes <= 30:
        return all_triplets(n_classes)
    return sample_distinct_triplets(n_classes, 200 if count is None else count, rng)


# --------------------------------------------------------------------------
# The selection path
# --------------------------------------------------------------------------
class _Layer:
    """One candidate: prepared factors, isotropy and (optionally) raw rows."""

    def __init__(self, X, mean, scale, cfg):
        Xp = X - mean
        if cfg["scaling"] == "unit_variance":
            Xp = Xp / scale
        self.U, self.s = thin_svd(Xp, center=False)
        self.dim = X.shape[1]
        self.energy = float(np.sum(self.s**2))
        n = X.shape[0]
        iso = isotropy_erank if cfg["isotropy"] == "erank" else isotropy_inv_cv
        self.iso = float(iso(self.s, n, self.dim))
        self.raw = X if cfg["redundancy"] == "overlap" else None


def _span_basis(layers, n, cfg):
    """Orthogonaliser of the selected span: ``(Q, shrink)``.

    ``shrink`` is None for the rank-limited basis (X̃ = (I - QQᵀ)X) and
    ``σ²/(σ²+ε_o)`` for the reference ridge projection. The decomposition is
    taken of ``B = [U_j diag(s_j)]`` in its smaller Gram (``n×n`` or
    ``Σm×Σm``), which has the same left singular vectors as ``X_S``.
    """
    B = np.hstack([layer.U * layer.s for layer in layers])
    U, sig = thin_svd(B, center=False)
    sig2 = sig**2
    sum_d = sum(layer.dim for layer in layers)
    rank = int(np.sum(sig2 > sig2[0] * max(n, sum_d) * EPS64)) if sig2.size else 0
    U, sig2 = U[:, :rank], sig2[:rank]
    if cfg["orthogonalization"] == "ridge":
        return U, sig2 / (sig2 + ORTH_RIDGE_EPS)
    r_energy = (
        int(
            np.searchsorted(
                np.cumsum(sig2), cfg["orth_energy"] * sig2.sum() * (1 - 1e-12)
            )
        )
        + 1
        if rank
        else 0
    )
    r = min(r_energy, floor(cfg["orth_max_rank"] * n), rank)
    return U[:, :r], None


def _residual_factors(U, s, basis):
    """``M = (U - QÃ) diag(s)`` with X̃ = M Vᵀ for a layer ``U diag(s) Vᵀ``."""
    Q, shrink = basis
    A = Q.T @ U
    if shrink is not None:
        A = shrink[:, None] * A
    return (U - Q @ A) * s


class _Residual:
    """A candidate orthogonalised against the span: X̃ = (U - QÃ) diag(s) Vᵀ.

    Its Gram ``MᵀM = diag(s)(I - AᵀÃ - ÃᵀA + ÃᵀÃ)diag(s)`` (``A = QᵀU``) is
    formed in the layer's ``m``-dimensional space, so the spectrum, the
    ridge coordinates ``Zᵀ = (U_Mᵀ T)ᵀ`` and the class centroids never need the
    ``n×m`` matrix ``M``; it is built only for the LOO loss or a fitted update.
    """

    def __init__(self, layer, basis, n):
        Q, shrink = basis
        self.layer, self.Q = layer, Q
        A = Q.T @ layer.U
        self.At = A if shrink is None else shrink[:, None] * A
        cross = A.T @ self.At
        inner = np.eye(A.shape[1]) - cross - cross.T + self.At.T @ self.At
        G = layer.s[:, None] * inner * layer.s[None, :]
        w, W = np.linalg.eigh((G + G.T) / 2)
        w, W = w[::-1], W[:, ::-1]
        keep = (
            (w > max(w[0], 0.0) * max(n, w.size) * EPS64) & (w > 0) if w.size else w > 0
        )
        self.sigma, self.W = np.sqrt(w[keep]), W[:, keep]
        self.energy = max(float(np.trace(G)), 0.0)

    def coords(self, UtT, QtT):
        """``U_Mᵀ T`` from ``UᵀT`` and ``QᵀT``."""
        return (self.W / self.sigma).T @ (
            self.layer.s[:, None] * (UtT - self.At.T @ QtT)
        )

    def left(self):
        """``U_M = M W / σ`` (n × m′)."""
        M = (self.layer.U - self.Q @ self.At) * self.layer.s
        return M @ (self.W / self.sigma)

    def centroids(self, cent_U, cent_Q):
        """Class centroids of the rows of ``M`` (V coordinates)."""
        return (cent_U - cent_Q @ self.At) * self.layer.s


class _Path:
    """State of one greedy LOES run on the calibration rows."""

    def __init__(self, stack, y, cfg, rng, name):
        self.cfg, self.name = cfg, name
        n_layers, n_all, dim = stack.shape
        task = cfg["task"]
        classes = None
        if task == "classification":
            classes, codes_all = np.unique(y, return_inverse=True)
        rows = _calibration_rows(
            cfg["max_samples"], n_all, codes_all if classes is not None else None, rng
        )
        n = rows.size
        if n < 3:
            raise ValueError(
                f"{name}: `max_samples` must leave at least 3 "
                f"calibration rows; got {n}."
            )
        self.rows, self.n, self.classes = rows, n, classes
        self._targets(y, codes_all if classes is not None else None)
        self._prepare(stack, rows)
        self.triplets = None
        if task == "classification" and self.n_present >= 3:
            self.triplets = _draw_triplets(cfg["triplet_rule"], self.n_present, rng)

    def _targets(self, y, codes_all):
        task, rows = self.cfg["task"], self.rows
        self.Y = None
        if task == "classification":
            present, self.codes = np.unique(codes_all[rows], return_inverse=True)
            self.n_present = present.size
            self.Y = np.eye(self.classes.size)[codes_all[rows]]
        elif task == "regression":
            Y = y[rows]
            std = Y.std(axis=0)
            if np.any(std <= 1e-12 * np.maximum(np.abs(Y).max(axis=0), 1.0)):
                raise ValueError(
                    f"{self.name}: `y` must not have a constant "
                    "(zero-variance) column on the calibration rows."
                )
            if self.cfg["variant"] == "robust":
                Y = (Y - Y.mean(axis=0)) / std
            self.Y = Y
        if self.Y is not None:
            self.denom = float(np.sum((self.Y - self.Y.mean(axis=0)) ** 2))

    def _prepare(self, stack, rows):
        n_layers = stack.shape[0]
        means, var, raws = [], np.empty(n_layers), []
        for l in range(n_layers):
            X = np.asarray(stack[l][rows], dtype=np.float64)
            means.append(X.mean(axis=0))
            var[l] = float(np.sum((X - means[-1]) ** 2)) / self.n
            raws.append(X)
        self.layer_mean = np.vstack(means)
        self.layer_scale = np.sqrt(var)
        self.degenerate = np.flatnonzero(var <= 1e-12 * var.max())
        first = 0 if self.cfg["include_embedding"] else 1
        self.candidates = [
            l for l in range(first, n_layers) if l not in set(self.degenerate.tolist())
        ]
        if self.degenerate.size:
            warnings.warn(
                f"{self.name}: layers {self.degenerate.tolist()} are degenerate "
                "(total variance <= 1e-12 of the largest) and are excluded.",
                UserWarning,
                stacklevel=4,
            )
        self.layers = {
            l: _Layer(raws[l], self.layer_mean[l], self.layer_scale[l], self.cfg)
            for l in self.candidates
        }
        self._red, self._cka = {}, {}

    def cka(self, a, b):
        key = (min(a, b), max(a, b))
        if key not in self._cka:
            la, lb = self.layers[a], self.layers[b]
            self._cka[key] = cka_from_svd(la.U, la.s, lb.U, lb.s)
        return self._cka[key]

    def redundancy(self, a, b):
        if self.cfg["redundancy"] == "cka":
            return self.cka(a, b)
        key = (min(a, b), max(a, b))
        if key not in self._red:
            self._red[key] = overlap_redundancy(self.layers[a].raw, self.layers[b].raw)
        return self._red[key]

    def ridge(self, U, s, T):
        cfg = self.cfg
        return ridge_svd(
            U,
            s,
            T,
            alpha=cfg["ridge_alpha"],
            loss=cfg["loss"],
            loo_denominator=self.denom,
        )

    def run(self, n_select):
        """Greedy selection of up to ``n_select`` layers."""
        cfg, n, L = self.cfg, self.n, len(self.layer_scale)
        label_free = cfg["task"] == "label_free"
        if not label_free:
            self.Y_hat = np.tile(self.Y.mean(axis=0), (n, 1))
            R = self.Y - self.Y_hat
        order, rows, fits = [], [], []
        for k in range(n_select):
            ctx = None if label_free else self._context(k, order, R)
            table = {key: np.full(L, np.nan) for key in SCORE_KEYS}
            eligible = np.zeros(L, dtype=bool)
            sols = {}
            for l in self.candidates:
                if l in order or (
                    cfg["exclude_duplicates"]
                    and k
                    and max(self.cka(l, j) for j in order) >= DUPLICATE_CKA
                ):
                    continue
                eligible[l] = True
                sols[l] = self._score(l, k, order, ctx, table)
            if not eligible.any():
                warnings.warn(
                    f"{self.name}: no eligible candidate left after "
                    f"{k} step(s); stopping early.",
                    UserWarning,
                    stacklevel=3,
                )
                break
            score = np.where(eligible, table["score"], np.inf)
            best = int(np.argmin(score))  # ties -> smallest index
            table["eligible"] = eligible
            rows.append(table)
            if not label_free:
                fits.append(self._update(best, k, sols[best], ctx))
                R = self.Y - self.Y_hat
            order.append(best)
        self.residual = None if label_free else R
        return order, rows, fits

    def _context(self, k, order, R):
        """Per-step quantities shared by every candidate."""
        cfg, n = self.cfg, self.n
        Rc = R - R.mean(axis=0)
        ctx = {"R": R, "tc2": float(np.sum(Rc**2)), "scale": 1.0, "basis": None}
        if not k:
            return ctx
        Q, shrink = ctx["basis"] = _span_basis([self.layers[j] for j in order], n, cfg)
        ctx["QtR"] = Q.T @ R
        if self.triplets is not None and cfg["eta"] != 0:
            ctx["cent_Q"] = class_centroids(Q, self.codes, self.n_present)
        if cfg["loss_normalization"] == "relative":
            null = ridge_svd(
                np.zeros((n, 0)),
                np.zeros(0),
                R,
                loss=cfg["loss"],
                loo_denominator=self.denom,
            )
            ctx["scale"] = 1.0 / max(null.loss, 1e-300)
        return ctx

    def _score(self, l, k, order, ctx, table):
        cfg, layer = self.cfg, self.layers[l]
        retained, res, sol, tri = 1.0, None, None, 0.0
        if ctx is None:
            table["loss"][l] = 0.0
        elif not k:
            sol = self.ridge(layer.U, layer.s, ctx["R"])
            table["loss"][l], table["ridge_alpha"][l] = sol.loss, sol.alpha
        else:
            res = _Residual(layer, ctx["basis"], self.n)
            retained = res.energy / layer.energy
            if retained < EXHAUSTED and cfg["ridge_alpha"] == "gcv":
                res.sigma, res.W = res.sigma[:0], res.W[:, :0]  # rounding noise only
            if cfg["loss"] == "train":
                Z = res.coords(layer.U.T @ ctx["R"], ctx["QtR"])
                lam, loss = ridge_train_loss(
                    res.sigma, Z, ctx["tc2"], self.n, alpha=cfg["ridge_alpha"]
                )
                sol = (res, lam)
            else:
                sol = self.ridge(res.left(), res.sigma, ctx["R"])
                lam, loss = sol.alpha, sol.loss
            table["loss"][l], table["ridge_alpha"][l] = loss * ctx["scale"], lam
            if "cent_Q" in ctx:
                tri = self._triangle(l, res, ctx["cent_Q"], retained)
        red = max(self.redundancy(l, j) for j in order) if k else 0.0
        table["isotropy"][l] = layer.iso
        table["redundancy"][l] = red
        table["triangle"][l] = tri
        table["retained"][l] = retained
        table["score"][l] = (
            table["loss"][l]
            + cfg["alpha"] * (1 - layer.iso)
            + cfg["gamma"] * red
            - cfg["eta"] * tri
        )
        return sol

    def _triangle(self, l, res, cent_Q, retained):
        """Mean centroid-triangle area of X̃."""
        rescale = self.cfg["scaling"] == "unit_variance"
        if rescale and retained < EXHAUSTED:
            return 0.0  # exhausted candidate
        layer = self.layers[l]
        if not hasattr(layer, "cent_U"):
            layer.cent_U = class_centroids(layer.U, self.codes, self.n_present)
        areas = triangle_areas(res.centroids(layer.cent_U, cent_Q), self.triplets)
        tri = float(areas.mean()) if areas.size else 0.0
        return tri / (res.energy / self.n) if rescale else tri

    def _update(self, best, k, sol, ctx):
        """Stagewise or refit update of ``Ŷ``; returns the contribution."""
        if self.cfg["update"] == "refit" and k:
            layer = self.layers[best]
            fit = self.ridge(layer.U, layer.s, self.Y).fitted
        elif isinstance(sol, tuple):  # spectral-only scoring: build the fit now
            res, lam = sol
            U = res.left() if res.sigma.size else np.zeros((self.n, 0))
            fit = ridge_svd(
                U, res.sigma, ctx["R"], alpha=lam if lam > 0 else 1.0, loss="train"
            ).fitted
        else:
            fit = sol.fitted
        self.Y_hat = self.Y_hat + fit
        return fit


def _loes_path(stack, y, n_select, cfg, random_state, name, clip=False):
    """Fit one LOES path; returns the fitted attributes as a dict.

    With ``clip``, a budget above the number of candidates is lowered to it
    (LOESSelectorCV's ``max_layers_to_select``) instead of raising.
    """
    rng = check_random_state(random_state)
    path = _Path(stack, y, cfg, rng, name)
    if clip:
        n_select = min(n_select, len(path.candidates))
    if n_select > len(path.candidates) or n_select < 1:
        raise ValueError(
            f"{name}: `n_layers_to_select` must be at most the number of candidate "
            f"layers; got {n_select} for {len(path.candidates)} candidate layer(s) "
            f"of {stack.shape[0]} ({stack.shape[0] * stack.shape[2]} feature(s))."
        )
    order, rows, fits = path.run(n_select)
    L = stack.shape[0]
    iso = np.full(L, np.nan)
    for l, layer in path.layers.items():
        iso[l] = layer.iso
    scores = {
        key: np.array([r[key] for r in rows]).reshape(len(rows), L)
        for key in (*SCORE_KEYS, "eligible")
    }
    return {
        "selection_order_": np.asarray(order, dtype=np.intp),
        "scores_": scores,
        "isotropy_": iso,
        "calibration_indices_": path.rows,
        "classes_": path.classes,
        "degenerate_layers_": path.degenerate,
        "layer_mean_": path.layer_mean,
        "layer_scale_": path.layer_scale,
        "candidates_": np.asarray(path.candidates, dtype=np.intp),
        "triplets_": path.triplets,
        "step_fits_": None if not fits else np.stack(fits),
        "residual_": path.residual,
    }


def _resolve_config(est, task):
    """The variant's components with the explicit overrides of ``est``."""
    defaults = VARIANTS[est.variant]
    cfg = {
        c: defaults[c] if getattr(est, c) is None else getattr(est, c)
        for c in COMPONENTS
    }
    t = cfg["triplets"]
    cfg["triplet_rule"] = (
        (defaults["triplets"], int(t)) if isinstance(t, Integral) else (t, None)
    )
    for p in (
        "variant",
        "gamma",
        "eta",
        "update",
        "loss_normalization",
        "include_embedding",
        "exclude_duplicates",
        "orth_energy",
        "orth_max_rank",
        "max_samples",
    ):
        cfg[p] = getattr(est, p)
    cfg["task"] = task
    return cfg
