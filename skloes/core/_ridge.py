"""Ridge regression with an unpenalised intercept on thin-SVD or Gram factors.

This is the ridge primitive (see :ref:`loes_score`), shared by ``LOESSelector``
and the ridge probe of ``skloes.baselines``. A fit is described by the centred
thin SVD ``A_c = U diag(s) Vᵀ`` of the features (or the eigendecomposition of
the centred Gram ``A_c A_cᵀ = U diag(s²) Uᵀ``) and a target ``T``:

    f_j = s_j² / (s_j² + λ)        T̂ = 1 t̄ᵀ + U diag(f) Uᵀ T_c
    h_i = 1/n + Σ_j f_j U_ij²      df = 1 + Σ_j f_j

Everything (fitted values, exact hat diagonal, train and leave-one-out
losses, the GCV choice of λ over a 19-point grid, primal and dual
coefficients) follows from ``U``, ``s`` and ``Z = Uᵀ T_c`` without a solve.

Entry points:

- :func:`ridge_svd`: from factors ``(U, s)`` of already-centred features.
- :func:`ridge_fit`: from a feature matrix ``A`` (rows = samples); gives
  ``coef_``/``intercept_`` for prediction on new rows.
- :func:`ridge_fit_gram`: from an (uncentred or centred) Gram matrix
  ``G = A Aᵀ``; predicts new rows from the cross-Gram ``K = A_new Aᵀ``
  (:meth:`RidgeSolution.predict_cross_gram`). Per-layer Grams add up, so a
  concatenation of layers costs one ``n×n`` eigendecomposition.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real

import numpy as np
from scipy.linalg import cho_factor, lapack

from skloes.core._geometry import eigh_descending, rank_mask, thin_svd

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
    >>> from skloes.core._ridge import ridge_fit
    >>> rng = np.random.RandomState(0)
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
    >>> from skloes.core._ridge import gcv_alpha_grid
    >>> grid = gcv_alpha_grid([1.0, 1.0])
    >>> len(grid), float(grid[0]), float(grid[-1])
    (19, 1e-06, 1000.0)
    """
    s = np.asarray(s, dtype=np.float64)
    return float(np.mean(s**2)) * 10.0**GCV_EXPONENTS


def _as_2d_target(T):
    T = np.asarray(T, dtype=np.float64)
    return T[:, None] if T.ndim == 1 else T


def free_rows(n, m, n_features):
    """The rows a ridge fit can reach, the ``n`` of the GCV denominator.

    ``n`` unless the rows limit the rank (``n_features >= n - 1``: the fit
    can interpolate) and the centred rows span only ``m < n - 1``
    directions, as repeated rows do; then ``m + 1``. With ``n`` there, the
    fit would interpolate every distinct row as ``λ → 0`` (residual → 0)
    while ``1 - df/n`` stayed at ``(n - 1 - m)/n``, so GCV would tend to 0
    and pick the smallest λ of the grid: one repeated text among 640 rows
    of a 1,536-wide fused table gave 48 % held-out accuracy instead of 70 %.

    Examples
    --------
    >>> from skloes.core._ridge import free_rows
    >>> free_rows(640, 638, 1536), free_rows(640, 639, 1536), free_rows(640, 300, 300)
    (639, 640, 640)
    """
    if n_features is None or n_features < n - 1:
        return n
    return min(n, m + 1)


def _width(S, n, *, kernel, size):
    """The features' width behind a Gram ``S`` (None when a kernel Gram
    cannot tell: ``size = max(n, p)`` equals ``n``)."""
    if not kernel:
        return S.shape[0]
    return size if size > n else None


def gcv_scan(s2, explained, tc2, n, free=None):
    """GCV over the grid of the spectrum ``s2``; ties go to the larger λ.

    ``explained(λ)`` is ``Σ_j f_j(2 - f_j) z_j²``, the part of ``‖T_c‖²`` the
    fit at ``λ`` removes; ``free`` (:func:`free_rows`, default ``n``) is the
    number of rows of the degrees-of-freedom term.
    """
    free = n if free is None else free
    grid = gcv_alpha_grid(np.sqrt(s2))
    scores = np.empty(grid.size)
    for i, lam in enumerate(grid):
        rss = max(tc2 - explained(lam), 0.0)
        denom = 1.0 - (1.0 + float(np.sum(s2 / (s2 + lam)))) / free
        scores[i] = (rss / n) / denom**2 if denom > 1e-12 else np.inf
    best = 0
    for i in range(1, grid.size):  # ascending scan, ``<=`` keeps the larger λ
        if scores[i] <= scores[best]:
            best = i
    return float(grid[best]), scores


def _gcv_select(s, z2, tc2, n, free=None):
    """Pick λ by GCV over the grid from the factors' projections ``z2``."""
    s2 = s**2

    def explained(lam):
        f = s2 / (s2 + lam)
        return float(np.dot(f * (2.0 - f), z2))

    return gcv_scan(s2, explained, tc2, n, free)


def tridiagonalize(S):
    """LAPACK's reduction ``S = P M Pᵀ`` of a symmetric ``S`` (``m >= 2``).

    Returns ``(c, d, e, tau)``: the reflectors of ``P`` (``c``, ``tau``) and
    the diagonal ``d`` and off-diagonal ``e`` of the tridiagonal ``M``; None
    when LAPACK reports a failure.
    """
    m = S.shape[0]
    c, d, e, tau, info = lapack.dsytrd(S, lower=1, lwork=max(64 * m, 1))
    return None if info else (c, d, e, tau)


def tridiagonal_rotate(reduction, B, *, back=False):
    """``PᵀB`` (``P B`` with ``back``) for a reduction ``S = P M Pᵀ`` from
    :func:`tridiagonalize`.

    ``P = diag(1, H_1 ⋯ H_{m-1})`` whose reflectors sit below the first
    subdiagonal in QR layout, so LAPACK's ``dormqr`` applies them.
    """
    c, _, _, tau = reduction
    B = np.array(B, dtype=np.float64)
    m, q = B.shape
    B[1:] = lapack.dormqr(
        "L", "N" if back else "T", c[1:, :-1], tau, B[1:], lwork=max(64 * q, m)
    )[0]
    return B


def tridiagonal_explained(reduction, Bp, lam, *, kernel):
    """``Σ_j f_j(2 - f_j) z_j²`` of a ridge at ``λ``, by one tridiagonal solve.

    ``Bp = PᵀB`` (:func:`tridiagonal_rotate`). With ``x = (M + λI)⁻¹Bp``:
    ``xᵀ(M + 2λI)x`` in the primal form (``B = A_cᵀT_c``) and
    ``xᵀM(M + 2λI)x`` in the kernel form (``B = T_c``). Returns the sum and
    LAPACK's ``info`` (nonzero: ``M + λI`` is not positive definite).
    """
    _, d, e, _ = reduction
    x, info = lapack.dptsv(d + lam, e, Bp)[2:4]
    y = d[:, None] * x  # y = M x
    y[1:] += e[:, None] * x[:-1]
    y[:-1] += e[:, None] * x[1:]
    if kernel:
        return float(np.sum(y * y) + 2.0 * lam * np.sum(x * y)), info
    return float(np.sum(x * y) + 2.0 * lam * np.sum(x * x)), info


def ridge_solve(S, B, tc2, n, *, kernel, size, alpha="gcv"):
    """λ as :func:`ridge_svd` picks it, and ``(S + λI)⁻¹B``, with no eigenvectors.

    ``S`` is the Gram of centred features ``A_c`` (``n`` rows): ``A_cᵀA_c``
    with ``B = A_cᵀT_c``, or ``A_cA_cᵀ`` with ``B = T_c`` (``kernel=True``).
    One tridiagonal reduction ``S = P M Pᵀ`` gives the spectrum (the grid and
    the degrees of freedom) and, by one tridiagonal solve per grid point, the
    residual; the solution is ``P (M + λI)⁻¹PᵀB``, one more tridiagonal solve.
    It costs about half an eigendecomposition with vectors. Components under
    the rank rule (``size`` is ``max`` of the shape of ``A_c``) enter the
    residual only at rounding level, so λ is the one of :func:`ridge_svd`
    unless two GCV scores tie to rounding. A tiny ``S``, one with no component
    kept, or a numerical failure takes the eigendecomposition route instead.

    Returns
    -------
    alpha : float
        The penalty (0.0 when no component is kept and ``alpha="gcv"``).
    solution : ndarray of the shape of ``B``
        ``(S + λI)⁻¹B`` (on the kept components in the eigendecomposition
        route; zeros when no component is kept).
    """
    B = _as_2d_target(B)
    lam, reduction, Bp = _ridge_reduce(
        S, B, tc2, n, kernel=kernel, size=size, alpha=alpha
    )
    if reduction is not None:
        d, e = reduction[1:3]
        Bp = tridiagonal_rotate(reduction, B) if Bp is None else Bp
        x, info = lapack.dptsv(d + lam, e, Bp)[2:4]
        if not info:
            return lam, tridiagonal_rotate(reduction, x, back=True)
    return _ridge_solve_eigh(
        np.asarray(S, dtype=np.float64), B, tc2, n, kernel, size, alpha
    )


def ridge_factor(S, B, tc2, n, *, kernel, size, alpha="gcv"):
    """λ of :func:`ridge_solve` and the Cholesky factor of ``S + λI``.

    The factor is ``cho_factor``'s ``(c, lower)``; ``(None, None)`` when there
    is none to give (``S`` under 2 × 2, no component kept by the rank rule, or
    a numerical failure): the caller then takes the eigendecomposition route.
    """
    S = np.asarray(S, dtype=np.float64)
    lam, reduction, _ = _ridge_reduce(
        S, _as_2d_target(B), tc2, n, kernel=kernel, size=size, alpha=alpha
    )
    if reduction is None:
        return None, None
    try:
        return lam, cho_factor(
            S + lam * np.eye(S.shape[0]), lower=True, check_finite=False
        )
    except np.linalg.LinAlgError:
        return None, None


def _ridge_reduce(S, B, tc2, n, *, kernel, size, alpha):
    """λ of :func:`ridge_solve`, the reduction of ``S`` and ``PᵀB``.

    ``PᵀB`` is None when λ is given (no GCV scan); everything is None when
    there is no reduction to use (``S`` under 2 × 2, no component kept, or a
    numerical failure).
    """
    S = np.asarray(S, dtype=np.float64)
    reduction = tridiagonalize(S) if S.shape[0] >= 2 else None  # LAPACK: m >= 2
    if reduction is None:
        return None, None, None
    _, d, e, _ = reduction
    w = np.sort(lapack.dsterf(d, e)[0])[::-1]
    s2 = w[rank_mask(w, size)]
    if not s2.size:
        return None, None, None
    if isinstance(alpha, Real):
        return float(alpha), reduction, None
    Bp = tridiagonal_rotate(reduction, B)

    def explained(lam):
        value, info = tridiagonal_explained(reduction, Bp, lam, kernel=kernel)
        if info:
            raise np.linalg.LinAlgError
        return value

    n_features = _width(S, n, kernel=kernel, size=size)
    try:
        free = free_rows(n, s2.size, n_features)
        return gcv_scan(s2, explained, tc2, n, free)[0], reduction, Bp
    except np.linalg.LinAlgError:
        return None, None, None


def _ridge_solve_eigh(S, B, tc2, n, kernel, size, alpha):
    """:func:`ridge_solve` by an eigendecomposition."""
    s2, V = eigh_descending(S, keep_size=size)
    if not s2.size:
        return (float(alpha) if isinstance(alpha, Real) else 0.0), np.zeros_like(B)
    Z2 = np.sum((V.T @ B) ** 2, axis=1)
    z2 = Z2 if kernel else Z2 / s2  # primal: z_j = v_jᵀB / s_j
    free = free_rows(n, s2.size, _width(S, n, kernel=kernel, size=size))
    lam = (
        float(alpha)
        if isinstance(alpha, Real)
        else _gcv_select(np.sqrt(s2), z2, tc2, n, free)[0]
    )
    return lam, V @ ((V.T @ B) / (s2 + lam)[:, None])


def ridge_svd(
    U, s, T, *, alpha="gcv", loss="loo", loo_denominator=None, n_features=None
):
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
        Denominator of the LOO loss; None uses ``‖T_c‖_F²`` (a LOES path fixes
        it to ``‖Y - 1ȳᵀ‖_F²`` of the original targets for a whole selection).
    n_features : int or None, default=None
        Width of the features; with ``n_features >= n - 1`` GCV counts only
        the rows the fit can reach (:func:`free_rows`). None: ``n``.

    Returns
    -------
    solution : RidgeSolution
        Fit, losses, hat diagonal and dual coefficients.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._geometry import thin_svd
    >>> from skloes.core._ridge import gcv_alpha_grid, ridge_svd
    >>> rng = np.random.RandomState(0)
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
            free = free_rows(n, s.size, n_features)
            lam, gcv_scores = _gcv_select(s, np.sum(Z**2, axis=1), tc2, n, free)
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
    >>> from skloes.core._geometry import thin_svd
    >>> from skloes.core._ridge import ridge_svd, ridge_train_loss
    >>> rng = np.random.RandomState(0)
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
    >>> from skloes.core._ridge import ridge_fit
    >>> rng = np.random.RandomState(0)
    >>> A = rng.normal(size=(40, 3))
    >>> y = A @ [1.0, 2.0, -1.0] + 3.0
    >>> sol = ridge_fit(A, y, alpha=1e-8)
    >>> np.round(sol.coef.ravel(), 6).tolist(), round(float(sol.intercept[0]), 6)
    ([1.0, 2.0, -1.0], 3.0)
    """
    A = np.asarray(A, dtype=np.float64)
    a_mean = A.mean(axis=0)
    Ac = A - a_mean
    wide = A.shape[0] <= A.shape[1]  # coefficients from Acᵀ, V never formed
    U, s, *V = thin_svd(Ac, center=False, return_v=not wide)
    sol = ridge_svd(
        U,
        s,
        T,
        alpha=alpha,
        loss=loss,
        loo_denominator=loo_denominator,
        n_features=A.shape[1],
    )
    if s.size:
        Z = U.T @ (_as_2d_target(T) - sol.target_mean)
        if wide:  # V diag(s/(s²+λ)) Z = Acᵀ U diag(1/(s²+λ)) Z
            sol.coef = Ac.T @ (U @ (Z / (s**2 + sol.alpha)[:, None]))
        else:
            sol.coef = V[0] @ ((s / (s**2 + sol.alpha))[:, None] * Z)
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
    >>> from skloes.core._ridge import center_gram
    >>> A = np.random.RandomState(0).normal(size=(5, 3))
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
    >>> from skloes.core._ridge import center_cross_gram
    >>> rng = np.random.RandomState(0)
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
    >>> from skloes.core._ridge import gram_factors
    >>> A = np.random.RandomState(0).normal(size=(6, 2))
    >>> U, s = gram_factors(A @ A.T, n_features=2)
    >>> s.shape
    (2,)
    """
    Gc = np.asarray(G, dtype=np.float64) if centered else center_gram(G)
    n = Gc.shape[0]
    width = n if n_features is None else max(n, int(n_features))
    w, U = eigh_descending((Gc + Gc.T) / 2.0, keep_size=width)
    return U, np.sqrt(w)


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
    >>> from skloes.core._ridge import ridge_fit, ridge_fit_gram
    >>> rng = np.random.RandomState(0)
    >>> A, B, y = rng.normal(size=(30, 5)), rng.normal(size=(4, 5)), rng.normal(size=30)
    >>> g = ridge_fit_gram(A @ A.T, y, alpha=0.5, n_features=5)
    >>> p = ridge_fit(A, y, alpha=0.5)
    >>> bool(np.allclose(g.predict_cross_gram(B @ A.T), p.predict(B)))
    True
    """
    G = np.asarray(G, dtype=np.float64)
    U, s = gram_factors(G, centered=centered, n_features=n_features)
    sol = ridge_svd(
        U,
        s,
        T,
        alpha=alpha,
        loss=loss,
        loo_denominator=loo_denominator,
        n_features=n_features,
    )
    if not centered:
        sol.gram_means = (G.mean(axis=0), float(G.mean()))
    return sol


def ridge_loo_predictions(A, T, alpha, *, gram=None):
    """Leave-one-out predictions of ridge with a fixed penalty, by Cholesky.

    The ridge of ``T`` on the features ``A`` with a free intercept and the
    penalty ``alpha``: each row's prediction by the fit on the other rows,
    ``T - (T - T̂) / (1 - h)`` with the exact hat diagonal ``h``. One Cholesky
    factor of the smaller of ``A_cᵀA_c + αI`` and ``A_cA_cᵀ + αI`` gives
    both (no eigendecomposition: the penalty is known).

    Parameters
    ----------
    A : ndarray of shape (n, n_features) or None
        Features (rows are samples); centred here. May be None when ``gram``
        is given.
    T : array-like of shape (n,) or (n, q)
        Target.
    alpha : float
        Penalty λ > 0.
    gram : ndarray of shape (n, n) or None, default=None
        ``A_c A_cᵀ`` of the centred features, when the caller has it (a sum of
        per-layer Grams for a concatenation of layers); then the dual is used.

    Returns
    -------
    loo : ndarray of shape (n, q)
        Leave-one-out predictions.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from skloes.core._ridge import ridge_loo_predictions
    >>> rng = np.random.RandomState(0)
    >>> A, y = rng.normal(size=(12, 3)), rng.normal(size=12)
    >>> loo = ridge_loo_predictions(A, y, 2.0)
    >>> fit = Ridge(alpha=2.0).fit(A[1:], y[1:])
    >>> bool(np.isclose(loo[0, 0], fit.predict(A[:1])[0]))
    True
    """
    T = _as_2d_target(T)
    n = T.shape[0]
    t_mean = T.mean(axis=0)
    Tc = T - t_mean
    if gram is None:
        A = np.asarray(A, dtype=np.float64)
        A = A - A.mean(axis=0)
    if gram is not None or A.shape[0] <= A.shape[1]:
        G = A @ A.T if gram is None else np.asarray(gram, dtype=np.float64)
        factor = cho_factor(G + alpha * np.eye(n), lower=True, check_finite=False)
        dual = lapack.dpotrs(factor[0], Tc, lower=1)[0]
        fit_c = Tc - alpha * dual  # G (G + αI)⁻¹ Tc
        inv_l = np.tril(lapack.dtrtri(factor[0], lower=1)[0])
        # diag(G (G + αI)⁻¹) = 1 - α diag((G + αI)⁻¹) = 1 - α Σ_k (L⁻¹)_ki²
        hat = 1.0 / n + 1.0 - alpha * np.einsum("ki,ki->i", inv_l, inv_l)
    else:
        C = A.T @ A
        C[np.diag_indices_from(C)] += alpha
        factor = cho_factor(C, lower=True, check_finite=False)
        coef = lapack.dpotrs(factor[0], A.T @ Tc, lower=1)[0]
        fit_c = A @ coef
        half = lapack.dtrtrs(factor[0], A.T, lower=1)[0]  # L⁻¹ A_cᵀ
        hat = 1.0 / n + np.einsum("ki,ki->i", half, half)
    E = Tc - fit_c
    return T - E / np.maximum(1.0 - hat, LOO_FLOOR)[:, None]
