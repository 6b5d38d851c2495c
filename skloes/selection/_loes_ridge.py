"""The reference ridge projection in factor-row form (``orthogonalization="ridge"``).

Each candidate layer is held as *factor rows* ``F`` (``n × m``) with
``F Fᵀ = U diag(s²) Uᵀ``, its thin SVD on the components the rank rule keeps:
the centred rows themselves when no component is dropped, the rows turned off
the dropped directions by Householder reflectors otherwise (``n > d``), and
``U diag(s)`` when ``n <= d``. Then ``F = U diag(s) R`` for an orthogonal ``R``,
and every quantity the path reads (Grams, residual energies, ridge losses and
fits, class-centroid triangles, overlaps) is invariant under such a turn of a
layer's columns, so it equals the one from ``U`` and ``s`` without forming ``U``
or ``V`` (the ``n × d × m`` product of a thin SVD).

The selected layers ``B = [F_j]`` enter only through the ridge projection
``P = B (BᵀB + εI)⁻¹ Bᵀ``. When every eigenvalue of ``BᵀB`` clears the rank rule
(certified by a Cholesky factorisation of ``BᵀB - τI``), ``P`` acts through a
Cholesky factor of ``BᵀB + εI`` and no eigendecomposition is needed; otherwise
the two eigen forms of :class:`skloes.selection._loes_span._Span` (``BᵀB``, or
the ``n × n`` form once the span is wider than ``n``) are used, with the same
rank rules. Used by :mod:`skloes.selection._loes_path` only.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh as scipy_eigh
from scipy.linalg import lapack, solve_triangular

from skloes.core._geometry import class_centroids, rank_mask, rank_tol, thin_svd
from skloes.selection._loes_span import ORTH_RIDGE_EPS, _Residual

#: Margin of the Cholesky certificate over the rank rule's cut-off (a failed
#: certificate only sends the step to the eigendecomposition forms).
CERTIFICATE_MARGIN = 8.0


def factor_rows(Xp):
    """Factor rows of the prepared rows ``Xp`` (``n × d``): ``(F, H, s, turn)``.

    ``H = FᵀF``, ``s`` the kept singular values (descending, the rank rule of
    :func:`skloes.core._geometry.thin_svd`) and ``turn(v)`` the coordinates in
    ``F``'s columns of a ``d``-vector ``v`` projected on the kept directions
    (``Vᵀv`` up to the turn ``R``).
    """
    n, d = Xp.shape
    if n <= d:  # the n × n Gram form: the thin SVD itself
        U, s = thin_svd(Xp, center=False)
        return U * s, np.diag(s**2), s, lambda v: (U.T @ (Xp @ v)) / s
    gram = Xp.T @ Xp
    w = np.linalg.eigvalsh(gram)[::-1]
    keep = rank_mask(w, max(n, d))
    s, drop = np.sqrt(w[keep]), d - int(keep.sum())
    if not drop:
        return Xp, gram, s, lambda v: np.asarray(v, dtype=np.float64)
    # the dropped directions (smallest eigenvalues), then reflectors that map
    # them onto the first ``drop`` axes: F = (Xp H)[:, drop:]
    V_drop = scipy_eigh(gram, subset_by_index=[0, drop - 1], driver="evr")[1]
    qr, tau = lapack.dgeqrf(V_drop)[:2]

    def right(M):  # M H (H the d × d product of the reflectors)
        return lapack.dormqr("R", "N", qr, tau, M, lwork=max(64 * M.shape[0], d))[0]

    def left(M):  # Hᵀ M
        return lapack.dormqr("L", "T", qr, tau, M, lwork=max(64 * M.shape[1], d))[0]

    F = np.ascontiguousarray(right(np.array(Xp, order="F"))[:, drop:])
    H = left(right(np.array(gram, order="F")))[drop:, drop:]
    return F, (H + H.T) / 2, s, lambda v: left(np.asarray(v, float)[:, None])[drop:, 0]


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


class _RidgeSpan:
    """The ridge projection ``P`` of the selected span on factor rows.

    ``P F_l = S Z_l`` for a basis ``S`` of the span: ``S = B`` with
    ``Z = (BᵀB + εI)⁻¹BᵀF_l`` in the Cholesky form (``form="cholesky"``), and
    an orthonormal ``S`` (``B T`` from ``eigh(BᵀB)``, or ``Q`` from the
    ``n × n`` form) with ``Z = diag(h) SᵀF_l``, ``h = σ²/(σ² + ε)``, in the eigen
    forms (``"gram"``, ``"rows"``), as :class:`skloes.selection._loes_span._Span`
    builds them.
    """

    def __init__(self, path, order):
        self.path, self.order = path, list(order)
        layers = [path.layers[j] for j in self.order]
        n = path.n
        width = sum(layer.F.shape[1] for layer in layers)
        size = max(n, sum(layer.dim for layer in layers))
        self.T = self.Q = self.L = None
        if width <= n:
            Gs = self._gram(layers)
            if _certified(Gs, size):
                Gs[np.diag_indices_from(Gs)] += ORTH_RIDGE_EPS
                self.form, self.L = "cholesky", np.linalg.cholesky(Gs)
                return
            self.form = "gram"
            w, V = np.linalg.eigh(Gs)
            w, V = w[::-1], V[:, ::-1]
            keep = rank_mask(w, max(n, w.size))
            sig2, V = w[keep], V[:, keep]
        else:
            self.form = "rows"
            self.Q, sig = thin_svd(
                np.hstack([layer.F for layer in layers]), center=False
            )
            sig2 = sig**2
        rank = int(rank_mask(sig2, size).sum())
        sig2 = sig2[:rank]
        self.shrink = sig2 / (sig2 + ORTH_RIDGE_EPS)
        if self.form == "gram":
            self.T = V[:, :rank] / np.sqrt(sig2)
        else:
            self.Q = self.Q[:, :rank]

    def _gram(self, layers):
        """``BᵀB`` assembled from the path's cached cross products."""
        sizes = [layer.F.shape[1] for layer in layers]
        offs = np.concatenate([[0], np.cumsum(sizes)])
        G = np.empty((offs[-1], offs[-1]))
        for a, ja in enumerate(self.order):
            for b, jb in enumerate(self.order[a:], start=a):
                block = self.path.cross(ja, jb)
                G[offs[a] : offs[a + 1], offs[b] : offs[b + 1]] = block
                G[offs[b] : offs[b + 1], offs[a] : offs[a + 1]] = block.T
        return G

    def _B(self):
        return np.hstack([self.path.layers[j].F for j in self.order])

    def coefficients(self, l):
        """``(Z, K)`` of candidate ``l``: ``P F_l = S Z`` and
        ``K = F_lᵀ(2P - P²)F_l`` (so its residual Gram is ``H_l - K``)."""
        if self.form == "rows":
            A = self.Q.T @ self.path.layers[l].F
        else:
            A = np.vstack([self.path.cross(j, l) for j in self.order])
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
        BtM = np.vstack([self.path.layers[j].F.T @ M for j in self.order])
        return BtM if self.T is None else self.T.T @ BtM

    def times(self, Z):
        """``S Z`` in sample space."""
        if self.form == "rows":
            return self.Q @ Z
        return self._B() @ (Z if self.T is None else self.T @ Z)

    def centroids(self, layer_centroids):
        """Class centroids of the rows of ``S``."""
        if self.form == "rows":
            return class_centroids(self.Q, self.path.codes, self.path.n_present)
        cent = np.hstack([layer_centroids(j) for j in self.order])
        return cent if self.T is None else cent @ self.T


class _RidgeResidual(_Residual):
    """A candidate's factor rows less their ridge projection: ``M = F - S Z``.

    Its Gram ``G = MᵀM = H - K`` (``K`` from :meth:`_RidgeSpan.coefficients`)
    lives in the layer's ``m``-dimensional space; with no span (step 0, a
    refit) ``M = F``. The eigen route, the tridiagonal reduction and ``left``
    are :class:`skloes.selection._loes_span._Residual`'s.
    """

    def __init__(self, path, l, span):
        self.path, self.l, self.span = path, l, span
        self.layer = path.layers[l]
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
        cent = self.path.layer_centroids(self.l)
        return cent if self.Z is None else cent - cent_S @ self.Z
