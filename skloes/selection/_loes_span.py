"""The LOES path's view of the selected span and of a candidate against it.

:class:`_Span` holds the orthonormal basis of the layers selected so far (in its
smaller Gram form); :class:`_Residual` and :class:`_RowResidual` give a
candidate layer's part orthogonal to it, in the layer's own ``m``-dimensional
space or from its prepared rows; :func:`_spectral_ridge` scores a residual's
ridge fit from its spectrum. Used by :mod:`skloes.selection._loes_path` only.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from math import floor
from types import SimpleNamespace

import numpy as np
from scipy.linalg import lapack

from skloes.core._geometry import class_centroids, rank_mask, thin_svd
from skloes.core._ridge import (
    _gcv_scan,
    tridiagonal_explained,
    tridiagonal_rotate,
    tridiagonalize,
)

ORTH_RIDGE_EPS = 1e-6  # ε_o of the reference projection


class _Span:
    """Orthogonaliser of the selected span, kept in coefficient form.

    ``Q = B T`` with ``B = [U_j diag(s_j)]`` over the selected layers, so
    ``QᵀU_l = Tᵀ [s_j U_jᵀU_l]_j`` comes from the cached cross products
    ``U_jᵀU_l`` (no ``n``-dimensional product per candidate); ``Q`` itself is
    built once per step, only when a residual must be formed in sample space.
    ``shrink`` is None for the robust rank-limited basis and ``σ²/(σ²+ε_o)``
    for the reference ridge projection (user guide, :ref:`loes_variants`).
    """

    def __init__(self, path, order):
        self.path, self.order = path, list(order)
        layers = [path.layers[j] for j in order]
        n, cfg = path.n, path.cfg
        sizes = [layer.s.size for layer in layers]
        self._Q = self.T = None
        if len(layers) == 1:  # the layer's own factors are the span's SVD
            sig2 = layers[0].s ** 2
            self._Q, self._single = layers[0].U, True
        elif sum(sizes) <= n:  # eigh of BᵀB assembled from cross products
            self._single = False
            G = np.empty((sum(sizes), sum(sizes)))
            offs = np.concatenate([[0], np.cumsum(sizes)])
            for a, ja in enumerate(order):
                for b, jb in enumerate(order[a:], start=a):
                    block = (
                        layers[a].s[:, None] * path.cross(ja, jb) * layers[b].s[None, :]
                    )
                    G[offs[a] : offs[a + 1], offs[b] : offs[b + 1]] = block
                    G[offs[b] : offs[b + 1], offs[a] : offs[a + 1]] = block.T
            w, V = np.linalg.eigh(G)
            w, V = w[::-1], V[:, ::-1]
            keep = rank_mask(w, max(n, w.size))
            sig2, V = w[keep], V[:, keep]
            self._V = V
        else:  # more columns than rows: decompose B in its n×n Gram
            self._single = False
            B = np.hstack([layer.U * layer.s for layer in layers])
            self._Q, sig = thin_svd(B, center=False)
            sig2 = sig**2
        sum_d = sum(layer.dim for layer in layers)
        rank = int(rank_mask(sig2, max(n, sum_d)).sum())
        sig2 = sig2[:rank]
        if cfg["orthogonalization"] == "ridge":
            r, self.shrink = rank, sig2 / (sig2 + ORTH_RIDGE_EPS)
        else:
            target = cfg["orth_energy"] * sig2.sum() * (1 - 1e-12)
            r_energy = int(np.searchsorted(np.cumsum(sig2), target)) + 1 if rank else 0
            r, self.shrink = min(r_energy, floor(cfg["orth_max_rank"] * n), rank), None
        self.rank = r
        if self._Q is not None:
            self._Q = self._Q[:, :r]
        else:
            self.T = self._V[:, :r] / np.sqrt(sig2[:r])

    def Qt(self, l=None, M=None):
        """``QᵀU_l`` for a candidate ``l``, or ``QᵀM`` for a sample-space ``M``."""
        path = self.path
        if M is not None:
            if self.T is None:
                return self._Q.T @ M
            return self.T.T @ np.vstack(
                [
                    path.layers[j].s[:, None] * (path.layers[j].U.T @ M)
                    for j in self.order
                ]
            )
        if self._single:
            return path.cross(self.order[0], l)[: self.rank]
        if self.T is None:
            return self._Q.T @ path.layers[l].U
        return self.T.T @ np.vstack(
            [path.layers[j].s[:, None] * path.cross(j, l) for j in self.order]
        )

    def centroids(self, layer_centroids):
        """Class centroids of the rows of ``Q`` (from those of each ``U_j``)."""
        if self.T is None:
            return class_centroids(self._Q, self.path.codes, self.path.n_present)
        blocks = [layer_centroids(j) * self.path.layers[j].s for j in self.order]
        return np.hstack(blocks) @ self.T

    def times(self, C):
        """``Q C`` in sample space, by the cheaper of ``Q`` and ``B (T C)``."""
        if self._Q is not None or C.shape[1] >= self.rank:
            return self.Q @ C
        B = np.hstack(
            [self.path.layers[j].U * self.path.layers[j].s for j in self.order]
        )
        return B @ (self.T @ C)

    @property
    def Q(self):
        """The basis in sample space (``n × r``), built once."""
        if self._Q is None:
            B = np.hstack(
                [self.path.layers[j].U * self.path.layers[j].s for j in self.order]
            )
            self._Q = B @ self.T
        return self._Q


def _span_basis(layers, n, cfg):
    """Orthogonaliser ``(Q, shrink)`` of the span of ``layers``.

    A stand-alone form of :class:`_Span` for factor objects with ``U``, ``s``
    and ``dim``: ``shrink`` is None for the rank-limited basis
    (X̃ = (I - QQᵀ)X) and ``σ²/(σ²+ε_o)`` for the reference ridge projection.
    """
    path = SimpleNamespace(
        layers=dict(enumerate(layers)),
        n=n,
        cfg=cfg,
        cross=lambda a, b: layers[a].U.T @ layers[b].U,
    )
    span = _Span(path, range(len(layers)))
    return span.Q, span.shrink


def _residual_factors(U, s, basis):
    """``M = (U - QÃ) diag(s)`` with X̃ = M Vᵀ for a layer ``U diag(s) Vᵀ``."""
    Q, shrink = basis
    A = Q.T @ U
    if shrink is not None:
        A = shrink[:, None] * A
    return (U - Q @ A) * s


class _Residual:
    """A candidate orthogonalised against the span: X̃ = (U - QÃ) diag(s) Vᵀ.

    Its Gram ``G = MᵀM = diag(s)(I - AᵀÃ - ÃᵀA + ÃᵀÃ)diag(s)`` (``A = QᵀU``)
    lives in the layer's ``m``-dimensional space. Losses come from ``G`` and
    ``b = MᵀR`` by Cholesky solves (:func:`_spectral_ridge`); the
    eigendecomposition and the ``n × m`` matrix ``M`` are built only when
    needed (an LOO hat diagonal, a fitted update, or the exact fallback).
    """

    def __init__(self, layer, span, l, gram=True):
        self.layer, self.span, self.l = layer, span, l
        A = span.Qt(l)
        self.At = A if span.shrink is None else span.shrink[:, None] * A
        if not gram:  # the triangle of the fused objective: trace(G) only
            diag = 1 - 2 * np.sum(A * self.At, axis=0) + np.sum(self.At**2, axis=0)
            self.energy = max(float(np.sum(layer.s**2 * diag)), 0.0)
            return
        cross = A.T @ self.At
        inner = np.eye(A.shape[1]) - cross - cross.T + self.At.T @ self.At
        G = layer.s[:, None] * inner * layer.s[None, :]
        self.G = (G + G.T) / 2
        self.energy = max(float(np.trace(G)), 0.0)
        self._eig = None

    def eig(self, n):
        """``(σ, W)`` of the kept components of ``G`` (the exact route)."""
        if self._eig is None:
            w, W = np.linalg.eigh(self.G)
            w, W = w[::-1], W[:, ::-1]
            keep = rank_mask(w, max(n, w.size))
            self._eig = np.sqrt(w[keep]), W[:, keep]
        return self._eig

    def full_rank(self, n):
        """Eigenvalues of ``G`` (descending) if the rank rule drops none.

        ``G`` is reduced to tridiagonal form ``G = P T Pᵀ`` once (kept for
        :func:`_spectral_ridge`); the eigenvalues come from ``T``.
        """
        m = self.G.shape[0]
        if m < 2:  # nothing to gain; LAPACK wants a non-empty off-diagonal
            return None
        reduction = tridiagonalize(self.G)
        if reduction is None:
            return None
        _, d, e, _ = reduction
        w = np.sort(lapack.dsterf(d, e)[0])[::-1]
        if not rank_mask(w, max(n, m))[-1]:
            return None
        self.tri = reduction
        return w

    def b(self, UtT, QtT):
        """``MᵀT`` from ``UᵀT`` and ``QᵀT``."""
        return self.layer.s[:, None] * (UtT - self.At.T @ QtT)

    def M(self):
        """``M = (U - QÃ) diag(s)`` (n × m)."""
        if self.span.shrink is None:  # robust: many candidates share Q
            return (self.layer.U - self.span.Q @ self.At) * self.layer.s
        return (self.layer.U - self.span.times(self.At)) * self.layer.s

    def apply(self, c):
        """``M c``."""
        return self.M() @ c

    def left(self, n):
        """``U_M = M W / σ`` (n × m′) of the kept components."""
        sigma, W = self.eig(n)
        return self.M() @ (W / sigma)

    def centroids(self, cent_Q):
        """Class centroids of the rows of ``M`` (V coordinates)."""
        cent_U = self.span.path.layer_centroids(self.l)
        return (cent_U - cent_Q @ self.At) * self.layer.s


class _RowResidual:
    """A light candidate against the span, from its prepared rows ``Xp``.

    ``X̃ = Xp - Q diag(shrink) QᵀXp``: its energy is ``‖Xp‖² - Σ (2h - h²)
    ‖(QᵀXp)_i‖²`` (``h = 1`` for the basis) and its class centroids are
    those of ``Xp`` minus ``cent(Q) diag(h) QᵀXp``, the :class:`_Residual`
    quantities rotated back from the layer's singular basis (triangle areas
    do not see a rotation), with no decomposition of the candidate.
    """

    def __init__(self, path, l, span):
        self.path, self.l, self.layer = path, l, path.layers[l]
        P = span.Q.T @ self.layer.Xp
        weight = (
            np.ones(P.shape[0])
            if span.shrink is None
            else 2 * span.shrink - span.shrink**2
        )
        self.energy = max(self.layer.energy - float(weight @ np.sum(P**2, axis=1)), 0.0)
        self.P = P if span.shrink is None else span.shrink[:, None] * P

    def centroids(self, cent_Q):
        """Class centroids of the rows of ``X̃``."""
        layer = self.layer
        if not hasattr(layer, "cent_X"):
            layer.cent_X = class_centroids(
                layer.Xp, self.path.codes, self.path.n_present
            )
        return layer.cent_X - cent_Q @ self.P


def _spectral_ridge(res, w, b, tc2, n, alpha):
    """λ and the in-sample RSS of a ridge on ``M`` from ``G = MᵀM``, ``b = MᵀT``.

    ``w`` are the eigenvalues of ``G`` (all kept by the rank rule). With
    ``f = σ²/(σ²+λ)``, ``Σ f(2-f) z²`` equals ``xᵀ(T + 2λI)x`` with
    ``x = (T + λI)⁻¹Pᵀb`` in the tridiagonal form ``G = P T Pᵀ``, so the GCV
    scan costs one tridiagonal solve per grid point and no eigenvectors
    (:func:`skloes.core._ridge.ridge_svd` gives the same λ and losses).
    """
    bp = tridiagonal_rotate(res.tri, b)

    def rss(lam):
        explained = tridiagonal_explained(res.tri, bp, lam, kernel=False)[0]
        return max(tc2 - explained, 0.0)

    if not isinstance(alpha, str):
        return float(alpha), rss(float(alpha))
    lam = _gcv_scan(w, lambda lam: tc2 - rss(lam), tc2, n)[0]
    return lam, rss(lam)
