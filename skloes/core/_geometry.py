"""Shared geometric quantities: one definition each, for numpy and torch.

The selector, the metrics and the GeoReg loss all call this module, so every
quantity (thin decomposition, isotropy, CKA, overlap, matrix entropy, effective
rank, centroid-simplex areas, spectral imbalance) is defined exactly once.
Nothing here imports an estimator. Numpy functions compute in float64; torch
functions are differentiable and never backpropagate through eigenvectors.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
from scipy.linalg import eigh

from skloes.core._torch import torch

EPS64 = np.finfo(np.float64).eps


def rank_tol(top, size):
    """The rank rule's cut-off: a spectral value at most ``top·size·eps`` is zero.

    One rule for every numerical rank in skloes (thin SVDs, Gram spectra, ridge
    factors, the LOES span basis): ``top`` is the largest squared singular
    value (or eigenvalue) and ``size`` the larger dimension of the matrix.

    Parameters
    ----------
    top : float
        Largest value of the spectrum.
    size : int
        ``max(n_rows, n_columns)`` of the decomposed matrix.

    Returns
    -------
    tol : float

    Examples
    --------
    >>> from skloes.core._geometry import EPS64, rank_tol
    >>> bool(rank_tol(4.0, 10) == 40 * EPS64)
    True
    """
    return top * size * EPS64


def rank_mask(w, size):
    """Which values of a spectrum the rank rule keeps (:func:`rank_tol`).

    The one keep-mask of skloes: a value is kept when it is positive and above
    ``max(w)·size·eps``. Every numerical rank (thin SVDs, Gram spectra, ridge
    factors, the LOES span) and every spectrum cleaned of round-off (the
    entropies) uses it.

    Parameters
    ----------
    w : ndarray of shape (r,)
        Squared singular values or eigenvalues, in any order.
    size : int
        ``max(n_rows, n_columns)`` of the decomposed matrix.

    Returns
    -------
    keep : ndarray of shape (r,), dtype bool

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._geometry import rank_mask
    >>> rank_mask(np.array([4.0, 1e-20, 0.0, -1e-17]), 10).tolist()
    [True, False, False, False]
    """
    w = np.asarray(w)
    if not w.size:
        return np.zeros(0, dtype=bool)
    return w > rank_tol(max(float(w.max()), 0.0), size)


# --------------------------------------------------------------------------
# Symmetric decompositions: the descending eigh, the thin SVD, block Grams
# --------------------------------------------------------------------------
def eigh_descending(G, *, keep_size=None, top=None):
    """Eigenpairs of a symmetric matrix, largest eigenvalue first.

    Parameters
    ----------
    G : ndarray of shape (m, m)
        Symmetric matrix (its lower triangle is read).
    keep_size : int or None, default=None
        When given, only the pairs the rank rule keeps
        (:func:`rank_mask` with this ``size``).
    top : int or None, default=None
        When given, only the ``top`` largest pairs are computed (a partial
        decomposition, :func:`scipy.linalg.eigh` with ``subset_by_index``).

    Returns
    -------
    w : ndarray of shape (r,)
        Eigenvalues, descending.
    V : ndarray of shape (m, r)
        Orthonormal eigenvectors, in the same order.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._geometry import eigh_descending
    >>> w, V = eigh_descending(np.diag([1.0, 3.0, 0.0]), keep_size=3)
    >>> w.tolist(), V.shape
    ([3.0, 1.0], (3, 2))
    """
    if top is None:
        w, V = np.linalg.eigh(G)
    else:
        size = G.shape[0]
        w, V = eigh(G, subset_by_index=[size - top, size - 1])
    w, V = w[::-1], V[:, ::-1]
    if keep_size is not None:
        keep = rank_mask(w, keep_size)
        w, V = w[keep], V[:, keep]
    return w, V


def block_gram(sizes, block):
    """A symmetric matrix assembled from its upper blocks.

    Parameters
    ----------
    sizes : sequence of int
        Width of each block row (and column).
    block : callable
        ``block(a, b)`` for ``a <= b`` returns the ``(sizes[a], sizes[b])``
        block; the block ``(b, a)`` is its transpose (so is a diagonal block,
        which is written as its own transpose).

    Returns
    -------
    G : ndarray of shape (sum(sizes), sum(sizes))
    offsets : ndarray of shape (len(sizes) + 1,)
        Where each block starts (and the total).

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._geometry import block_gram
    >>> A = [np.ones((4, 1)), np.arange(8.0).reshape(4, 2)]
    >>> G, offsets = block_gram([1, 2], lambda a, b: A[a].T @ A[b])
    >>> bool(np.allclose(G, np.hstack(A).T @ np.hstack(A))), offsets.tolist()
    (True, [0, 1, 3])
    """
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
    G = np.empty((offs[-1], offs[-1]))
    for a in range(len(sizes)):
        for b in range(a, len(sizes)):
            B = block(a, b)
            G[offs[a] : offs[a + 1], offs[b] : offs[b + 1]] = B
            G[offs[b] : offs[b + 1], offs[a] : offs[a + 1]] = B.T
    return G, offs


def thin_svd(X, *, center=True, return_v=False, gram=None):
    """Thin SVD ``X_c = U diag(s) Vᵀ`` from ``eigh`` of the smaller Gram.

    Components with ``s_j² <= s_1²·max(n, d)·eps`` are dropped (the rank rule
    :func:`rank_tol`), so ``U`` has orthonormal columns spanning the numerical
    column space of the (centred) data.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Data matrix.
    center : bool, default=True
        Subtract the column means first.
    return_v : bool, default=False
        Also return the right singular vectors.
    gram : ndarray of shape (d, d), default=None
        ``XᵀX`` of the (centred) data when the caller already has it; used
        only when ``n > d``.

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
    >>> from skloes.core._geometry import thin_svd
    >>> X = np.random.RandomState(0).normal(size=(5, 3))
    >>> U, s = thin_svd(X)
    >>> np.allclose(s, np.linalg.svd(X - X.mean(0), compute_uv=False)[:len(s)])
    True
    """
    X = np.asarray(X, dtype=np.float64)
    if center:
        X = X - X.mean(axis=0)
    n, d = X.shape
    small = X @ X.T if n <= d else (X.T @ X if gram is None else gram)
    w, W = eigh_descending(small, keep_size=max(n, d))
    s = np.sqrt(w)
    if n <= d:
        U = W
        V = (X.T @ U) / s if return_v else None
    else:
        V = W
        U = (X @ V) / s
    return (U, s, V) if return_v else (U, s)


# --------------------------------------------------------------------------
# Isotropy, redundancy
# --------------------------------------------------------------------------
def isotropy_erank(s, n, d):
    """Bounded isotropy: exp(entropy of s²/Σs²) / min(n-1, d), in (0, 1].

    Examples
    --------
    >>> from skloes.core._geometry import isotropy_erank
    >>> round(isotropy_erank([1.0, 1.0, 1.0], n=10, d=3), 12)
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
    >>> from skloes.core._geometry import isotropy_inv_cv
    >>> isotropy_inv_cv([1.0, 1.0], n=4, d=2) > 1e5
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
    >>> from skloes.core._geometry import cka_from_svd, thin_svd
    >>> X = np.random.RandomState(0).normal(size=(20, 4))
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
    >>> from skloes.core._geometry import cka
    >>> A = np.random.RandomState(0).normal(size=(30, 5))
    >>> round(cka(A, -2 * A), 12)
    1.0
    """
    return cka_from_svd(*thin_svd(A), *thin_svd(B))


def overlap_redundancy(A, B):
    """The authors' redundancy ``‖AᵀB‖_F / (‖A‖_F ‖B‖_F)`` on raw (uncentred) data.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._geometry import overlap_redundancy
    >>> round(overlap_redundancy(np.ones((4, 2)), np.ones((4, 3))), 12)
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
    members = np.zeros((n_classes, X.shape[0]))
    members[codes, np.arange(X.shape[0])] = 1.0
    counts = members.sum(axis=1)
    return (members @ X) / np.maximum(counts, 1.0)[:, None]  # a GEMM: np.add.at is slow


def triangle_areas(centroids, triplets):
    """Areas ½√max(0, ‖u‖²‖v‖² − (u·v)²) of centroid triangles (numpy).

    ``u = μ_a − μ_b`` and ``v = μ_a − μ_c`` for each row ``(a, b, c)`` of
    ``triplets``; repeated indices give 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._geometry import triangle_areas
    >>> tri = np.array([[0, 0], [2, 0], [1, np.sqrt(3)]])
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
    >>> from skloes.core._geometry import matrix_entropy
    >>> bool(np.isclose(matrix_entropy(np.ones(8)), np.log(8)))
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


def spectrum_effective_rank(s, *, power=1):
    """Effective rank ``exp(-Σ q log q)`` of singular values ``s``.

    ``power=1`` is Roy and Vetterli's ``q = σ/Σσ``; ``power=2`` uses
    ``q = σ²/Σσ²``.

    Examples
    --------
    >>> from skloes.core._geometry import spectrum_effective_rank
    >>> round(spectrum_effective_rank([2.0, 2.0, 2.0]), 12)
    3.0
    """
    s = np.asarray(s, dtype=np.float64)
    return float(np.exp(matrix_entropy(s**power)))


# --------------------------------------------------------------------------
# Differentiable torch versions (GeoReg)
# --------------------------------------------------------------------------
def triangle_areas_torch(centroids, triplets, floor=0.0):
    """Differentiable ``½√max(‖u‖²‖v‖² − (u·v)², floor)`` for each triplet."""

    a, b, c = (centroids[triplets[:, i]] for i in range(3))
    u, v = a - b, a - c
    uu, vv, uv = (u * u).sum(-1), (v * v).sum(-1), (u * v).sum(-1)
    return 0.5 * torch.sqrt(torch.clamp(uu * vv - uv**2, min=floor))


def class_centroids_torch(Z, codes, n_classes):
    """Differentiable row means of ``Z`` per class code ``0..n_classes-1``.

    Every code in ``0..n_classes-1`` must occur in ``codes`` (a LongTensor).
    """

    sums = torch.zeros(n_classes, Z.shape[1], dtype=Z.dtype, device=Z.device)
    sums = sums.index_add(0, codes, Z)
    counts = torch.bincount(codes, minlength=n_classes).to(Z.dtype)
    return sums / counts.clamp(min=1.0)[:, None]


def covariance_eigenvalues_torch(Z):
    """Nonzero-capable eigenvalues of ``Z_cᵀZ_c/(B-1)`` from the smaller Gram.

    Returns ``min(B, D)`` eigenvalues in ascending order (``eigvalsh``; no
    gradient through eigenvectors). The decomposition runs in float64 on the
    max-abs-scaled data: float32 LAPACK returns NaN on near-zero matrices with
    subnormal entries (a collapsed batch), and the scaling keeps float64 away
    from them too. The result has ``Z``'s dtype.
    """

    B, D = Z.shape
    Zc = (Z - Z.mean(dim=0, keepdim=True)).to(torch.float64)
    scale = Zc.detach().abs().max().clamp(min=1e-150)
    Zc = Zc / scale
    G = Zc @ Zc.T if B <= D else Zc.T @ Zc
    return (torch.linalg.eigvalsh(G) * scale**2 / (B - 1)).to(Z.dtype)


def spectral_imbalance_torch(Z, variant="robust"):
    """GeoReg's spectral term of a batch embedding ``Z`` (B, D').

    ``"robust"``: ``V̂ = mean((λ̂ - 1)²)`` over the top ``r = min(B-1, D')``
    eigenvalues of the covariance plus ``δ = 1e-6·tr/D'``, normalised by their
    mean: scale-invariant, 0 for a flat spectrum, ``r - 1`` at rank 1.
    ``"reference"``: the variance (ddof 1) of the ``D'`` eigenvalues of the
    covariance plus ``1e-4·I``, clamped at 1e-6 (the authors' form).
    """

    B, D = Z.shape
    lam = covariance_eigenvalues_torch(Z)
    if variant == "reference":
        lam = lam + 1e-4
        if B < D:
            pad = torch.full((D - B,), 1e-4, dtype=Z.dtype, device=Z.device)
            lam = torch.cat([lam, pad])
        lam = torch.clamp(lam, min=1e-6)
        return ((lam - lam.mean()) ** 2).sum() / (D - 1)
    r = min(B - 1, D)
    delta = 1e-6 * lam.sum() / D
    top = torch.clamp(lam[-r:] + delta, min=0.0)
    scaled = top / torch.clamp(top.mean(), min=1e-12)
    return ((scaled - 1.0) ** 2).mean()


def draw_triplets(rule, n_classes, rng):
    """The triangle triplets, drawn once per fit (``triplets`` parameter)."""
    kind, count = rule
    if kind == "sampled":  # uniform over {0..C-1}³, repeats allowed
        count = min(200, 3 * n_classes) if count is None else count
        return rng.randint(0, n_classes, size=(count, 3)).astype(np.intp)
    if count is None and n_classes <= 30:
        return all_triplets(n_classes)
    return sample_distinct_triplets(n_classes, 200 if count is None else count, rng)
