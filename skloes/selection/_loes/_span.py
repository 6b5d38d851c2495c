"""The selected span, and a candidate layer orthogonalised against it.

A LOES step scores each candidate by the part of it that the selected layers
do not already span. :class:`Span` holds an orthonormal basis of the selected
layers' span (in its smaller Gram form) and :class:`Residual` a candidate's
part orthogonal to it, in the layer's own ``m``-dimensional space;
:class:`RowResidual` gives the same energy and class centroids from a light
layer's rows. :class:`RidgeSpan` and :class:`RidgeResidual` are the reference
ridge projection ``P = B (BᵀB + εI)⁻¹ Bᵀ`` on factor rows
(:func:`~skloes.selection._loes._prepare.factor_rows`): when every eigenvalue
of ``BᵀB`` clears the rank rule (certified by a Cholesky factorisation of
``BᵀB - τI``), ``P`` acts through a Cholesky factor of ``BᵀB + εI`` with no
eigendecomposition. :func:`spectral_ridge` scores a residual's ridge fit from
its spectrum.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from math import floor

import numpy as np
from scipy.linalg import lapack, solve_triangular

from skloes.core._geometry import (
    block_gram,
    class_centroids,
    eigh_descending,
    rank_mask,
    rank_tol,
    thin_svd,
)
from skloes.core._ridge import (
    gcv_scan,
    tridiagonal_explained,
    tridiagonal_rotate,
    tridiagonalize,
)

ORTH_RIDGE_EPS = 1e-6  # ε_o of the reference projection

#: Margin of the Cholesky certificate over the rank rule's cut-off (a failed
#: certificate only sends the step to the eigendecomposition forms).
CERTIFICATE_MARGIN = 8.0


class Span:
    """Orthogonaliser of the selected span, kept in coefficient form.

    ``Q = B T`` with ``B = [U_j diag(s_j)]`` over the selected layers, so
    ``QᵀU_l = Tᵀ [s_j U_jᵀU_l]_j`` comes from the cached cross products
    ``U_jᵀU_l`` (no ``n``-dimensional product per candidate); ``Q`` itself is
    built once per step, only when a residual must be formed in sample space.
    ``shrink`` is None for the robust rank-limited basis and ``σ²/(σ²+ε_o)``
    for the reference ridge projection (user guide, :ref:`loes_variants`).

    Parameters
    ----------
    prep : PreparedLayers
        The fit's prepared layers (their ``U``, ``s`` and cross products).
    order : sequence of int
        The selected layers.
    """

    def __init__(self, prep, order):
        self.prep, self.order = prep, list(order)
        layers = [prep.layers[j] for j in self.order]
        n, cfg = prep.n, prep.cfg
        sizes = [layer.s.size for layer in layers]
        self._Q = self.T = None
        if len(layers) == 1:  # the layer's own factors are the span's SVD
            sig2 = layers[0].s ** 2
            self._Q, self._single = layers[0].U, True
        elif sum(sizes) <= n:  # eigh of BᵀB assembled from cross products
            self._single = False
            G, _ = block_gram(sizes, self._moment_block)
            sig2, self._V = eigh_descending(G, keep_size=max(n, G.shape[0]))
        else:  # more columns than rows: decompose B in its n×n Gram
            self._single = False
            self._Q, sig = thin_svd(self._B(), center=False)
            sig2 = sig**2
        sum_d = sum(layer.dim for layer in layers)
        rank = int(rank_mask(sig2, max(n, sum_d)).sum())
        sig2 = sig2[:rank]
        if cfg.orthogonalization == "ridge":
            r, self.shrink = rank, sig2 / (sig2 + ORTH_RIDGE_EPS)
        else:
            target = cfg.orth_energy * sig2.sum() * (1 - 1e-12)
            r_energy = int(np.searchsorted(np.cumsum(sig2), target)) + 1 if rank else 0
            r, self.shrink = min(r_energy, floor(cfg.orth_max_rank * n), rank), None
        self.rank = r
        if self._Q is not None:
            self._Q = self._Q[:, :r]
        else:
            self.T = self._V[:, :r] / np.sqrt(sig2[:r])

    def _moment_block(self, a, b):
        la, lb = self.prep.layers[self.order[a]], self.prep.layers[self.order[b]]
        cross = self.prep.cross(self.order[a], self.order[b])
        return la.s[:, None] * cross * lb.s[None, :]

    def _B(self):
        layers = self.prep.layers
        return np.hstack([layers[j].U * layers[j].s for j in self.order])

    def Qt(self, l=None, M=None):
        """``QᵀU_l`` for a candidate ``l``, or ``QᵀM`` for a sample-space ``M``."""
        prep = self.prep
        if M is not None:
            if self.T is None:
                return self._Q.T @ M
            return self.T.T @ np.vstack(
                [
                    prep.layers[j].s[:, None] * (prep.layers[j].U.T @ M)
                    for j in self.order
                ]
            )
        if self._single:
            return prep.cross(self.order[0], l)[: self.rank]
        if self.T is None:
            return self._Q.T @ prep.layers[l].U
        return self.T.T @ np.vstack(
            [prep.layers[j].s[:, None] * prep.cross(j, l) for j in self.order]
        )

    def centroids(self):
        """Class centroids of the rows of ``Q`` (from those of each ``U_j``)."""
        if self.T is None:
            return class_centroids(self._Q, self.prep.codes, self.prep.n_present)
        blocks = [self.prep.centroids(j) * self.prep.layers[j].s for j in self.order]
        return np.hstack(blocks) @ self.T

    def times(self, C):
        """``Q C`` in sample space, by the cheaper of ``Q`` and ``B (T C)``."""
        if self._Q is not None or C.shape[1] >= self.rank:
            return self.Q @ C
        return self._B() @ (self.T @ C)

    @property
    def Q(self):
        """The basis in sample space (``n × r``), built once."""
        if self._Q is None:
            self._Q = self._B() @ self.T
        return self._Q


class Residual:
    """A candidate orthogonalised against the span: X̃ = (U - QÃ) diag(s) Vᵀ.

    Its Gram ``G = MᵀM = diag(s)(I - AᵀÃ - ÃᵀA + ÃᵀÃ)diag(s)`` (``A = QᵀU``)
    lives in the layer's ``m``-dimensional space. Losses come from ``G`` and
    ``b = MᵀR`` by Cholesky solves (:func:`spectral_ridge`); the
    eigendecomposition and the ``n × m`` matrix ``M`` are built only when
    needed (an LOO hat diagonal, a fitted update, or the exact fallback).
    With ``gram=False`` only its energy is computed (the triangle of the fused
    objective reads no more).
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
            w, W = eigh_descending(self.G, keep_size=max(n, self.G.shape[0]))
            self._eig = np.sqrt(w), W
        return self._eig

    def drop_components(self):
        """Treat the candidate as exhausted: no component is kept."""
        self._eig = (np.zeros(0), np.zeros((self.G.shape[0], 0)))

    def full_rank(self, n):
        """Eigenvalues of ``G`` (descending) if the rank rule drops none.

        ``G`` is reduced to tridiagonal form ``G = P T Pᵀ`` once (kept for
        :func:`spectral_ridge`); the eigenvalues come from ``T``.
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
        if not sigma.size:
            return np.zeros((n, 0))
        return self.M() @ (W / sigma)

    def centroids(self, cent_Q):
        """Class centroids of the rows of ``M`` (V coordinates)."""
        cent_U = self.span.prep.centroids(self.l)
        return (cent_U - cent_Q @ self.At) * self.layer.s


class RowResidual:
    """A light candidate against the span, from its prepared rows ``Xp``.

    ``X̃ = Xp - Q diag(shrink) QᵀXp``: its energy is ``‖Xp‖² - Σ (2h - h²)
    ‖(QᵀXp)_i‖²`` (``h = 1`` for the basis) and its class centroids are
    those of ``Xp`` minus ``cent(Q) diag(h) QᵀXp``, the :class:`Residual`
    quantities rotated back from the layer's singular basis (triangle areas
    do not see a rotation), with no decomposition of the candidate.
    """

    def __init__(self, prep, l, span):
        self.prep, self.l, self.layer = prep, l, prep.layers[l]
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
                layer.Xp, self.prep.codes, self.prep.n_present
            )
        return layer.cent_X - cent_Q @ self.P


def spectral_ridge(res, w, b, tc2, n, alpha):
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
    lam = gcv_scan(w, lambda lam: tc2 - rss(lam), tc2, n)[0]
    return lam, rss(lam)


# --------------------------------------------------------------------------
# The reference ridge projection on factor rows
# --------------------------------------------------------------------------
def _certified(Gs, size):
    """Whether every eigenvalue of the Gram ``Gs`` clears the rank rule with margin.

    ``Gs - τI`` with ``τ`` a few times the cut-off of :func:`rank_tol` (taken at
    an upper bound of the largest eigenvalue) has a Cholesky factor only if its
    smallest eigenvalue exceeds ``τ`` less the factorisation's backward error,
    which is of the order of the cut-off itself.
    """
    top = min(float(np.trace(Gs)), float(np.abs(Gs).sum(axis=0).max()))
    tau = CERTIFICATE_MARGIN * rank_tol(top, size)
    shifted = Gs - tau * np.eye(Gs.shape[0])
    return lapack.dpotrf(shifted, lower=1, clean=0, overwrite_a=1)[1] == 0


class RidgeSpan:
    """The ridge projection ``P`` of the selected span on factor rows.

    ``P F_l = S Z_l`` for a basis ``S`` of the span: ``S = B`` with
    ``Z = (BᵀB + εI)⁻¹BᵀF_l`` in the Cholesky form (``form="cholesky"``), and
    an orthonormal ``S`` (``B T`` from ``eigh(BᵀB)``, or ``Q`` from the
    ``n × n`` form) with ``Z = diag(h) SᵀF_l``, ``h = σ²/(σ² + ε)``, in the eigen
    forms (``"gram"``, ``"rows"``), as :class:`Span` builds them.
    """

    def __init__(self, prep, order):
        self.prep, self.order = prep, list(order)
        layers = [prep.layers[j] for j in self.order]
        n = prep.n
        width = sum(layer.F.shape[1] for layer in layers)
        size = max(n, sum(layer.dim for layer in layers))
        self.T = self.Q = self.L = None
        if width <= n:
            sizes = [layer.F.shape[1] for layer in layers]
            Gs, _ = block_gram(
                sizes, lambda a, b: prep.cross(self.order[a], self.order[b])
            )
            if _certified(Gs, size):
                Gs[np.diag_indices_from(Gs)] += ORTH_RIDGE_EPS
                self.form, self.L = "cholesky", np.linalg.cholesky(Gs)
                return
            self.form = "gram"
            sig2, V = eigh_descending(Gs, keep_size=max(n, Gs.shape[0]))
        else:
            self.form = "rows"
            self.Q, sig = thin_svd(self._B(), center=False)
            sig2 = sig**2
        rank = int(rank_mask(sig2, size).sum())
        sig2 = sig2[:rank]
        self.shrink = sig2 / (sig2 + ORTH_RIDGE_EPS)
        if self.form == "gram":
            self.T = V[:, :rank] / np.sqrt(sig2)
        else:
            self.Q = self.Q[:, :rank]

    def _B(self):
        return np.hstack([self.prep.layers[j].F for j in self.order])

    def coefficients(self, l):
        """``(Z, K)`` of candidate ``l``: ``P F_l = S Z`` and
        ``K = F_lᵀ(2P - P²)F_l`` (so its residual Gram is ``H_l - K``)."""
        if self.form == "rows":
            A = self.Q.T @ self.prep.layers[l].F
        else:
            A = np.vstack([self.prep.cross(j, l) for j in self.order])
        if self.form == "cholesky":  # K = Aᵀ(G+ε)⁻¹A + ε Aᵀ(G+ε)⁻²A
            W = solve_triangular(self.L, A, lower=True, check_finite=False)
            Z = solve_triangular(self.L.T, W, lower=False, check_finite=False)
            return Z, W.T @ W + ORTH_RIDGE_EPS * (Z.T @ Z)
        if self.form == "gram":
            A = self.T.T @ A
        Z = self.shrink[:, None] * A
        cross = A.T @ Z
        return Z, cross + cross.T - Z.T @ Z

    def Qt(self, M):
        """``SᵀM`` for a sample-space ``M`` (``n × q``)."""
        if self.form == "rows":
            return self.Q.T @ M
        BtM = np.vstack([self.prep.layers[j].F.T @ M for j in self.order])
        return BtM if self.T is None else self.T.T @ BtM

    def times(self, Z):
        """``S Z`` in sample space."""
        if self.form == "rows":
            return self.Q @ Z
        return self._B() @ (Z if self.T is None else self.T @ Z)

    def centroids(self):
        """Class centroids of the rows of ``S``."""
        if self.form == "rows":
            return class_centroids(self.Q, self.prep.codes, self.prep.n_present)
        cent = np.hstack([self.prep.centroids(j) for j in self.order])
        return cent if self.T is None else cent @ self.T


class RidgeResidual(Residual):
    """A candidate's factor rows less their ridge projection: ``M = F - S Z``.

    Its Gram ``G = MᵀM = H - K`` (``K`` from :meth:`RidgeSpan.coefficients`)
    lives in the layer's ``m``-dimensional space; with no span (step 0, a
    refit) ``M = F``. The eigen route, the tridiagonal reduction and ``left``
    are :class:`Residual`'s.
    """

    def __init__(self, prep, l, span):
        self.prep, self.l, self.span = prep, l, span
        self.layer = prep.layers[l]
        G, self.Z = self.layer.H, None
        if span is not None:
            self.Z, K = span.coefficients(l)
            G = G - K
        self.G = (G + G.T) / 2
        self.energy = max(float(np.trace(self.G)), 0.0)
        self._eig = None

    def b(self, FtT, StT):
        """``MᵀT`` from ``FᵀT`` and ``SᵀT``."""
        return FtT if self.Z is None else FtT - self.Z.T @ StT

    def M(self):
        """``M = F - S Z`` (``n × m``)."""
        F = self.layer.F
        return F if self.Z is None else F - self.span.times(self.Z)

    def apply(self, c):
        """``M c`` without forming ``M``."""
        fit = self.layer.F @ c
        return fit if self.Z is None else fit - self.span.times(self.Z @ c)

    def centroids(self, cent_S):
        """Class centroids of the rows of ``M``."""
        cent = self.prep.centroids(self.l)
        return cent if self.Z is None else cent - cent_S @ self.Z
