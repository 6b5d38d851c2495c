"""The fused step loss of LOES (``objective="fused"``, the robust default).

Instead of fitting the stagewise residual on the candidate orthogonalised
against the selected layers (the authors' step, ``objective="residual"``),
a step scores the candidate by the leave-one-out (or training) loss of one
ridge fit of the original targets on the *fused* selection ``S ∪ {l}``. Each
layer is prepared as the usual downstream probe sees it (every feature
standardised, as ``StandardScaler`` does, then the layer scaled to unit total
variance so that no layer dominates by its width) and reduced to its
``fused_rank`` leading principal components; the layers are concatenated. A
layer is thus added only for what it adds to the fused representation; see
:ref:`loes_fused` in the user guide for the failure it fixes and the numbers.

Cost: one partial eigendecomposition per layer (the ``fused_rank`` leading
pairs of the smaller Gram); the Gram of the fused components is assembled
from cached pairwise blocks ``F_iᵀF_j`` (``r×r``, ``r = fused_rank``), so a
candidate costs one tridiagonal reduction and one Cholesky factorisation of
an ``|S|r × |S|r`` matrix (:func:`skloes.core._ridge.ridge_factor`) and one
``n × |S|r × |S|r`` triangular solve for the leave-one-out hat diagonal.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from scipy.linalg import blas, cho_solve

from skloes.core._geometry import block_gram, eigh_descending, rank_mask
from skloes.core._ridge import LOO_FLOOR, ridge_factor, ridge_svd
from skloes.selection._loes._objective import Candidate, FitSummary, StepContext
from skloes.selection._loes._span import Residual, RowResidual, Span


def standardized_components(X, rank, gram=None):
    """The ``rank`` leading principal components ``U diag(s)`` of a layer.

    The calibration rows ``X`` are centred, every column is divided by its
    standard deviation (constant columns stay 0), and the layer by its root
    total variance per row; only the leading eigenpairs of the smaller Gram
    are computed. ``gram``, when given (and ``n > d``), is ``X_cᵀX_c`` of the
    centred rows, already computed by the caller: the standardised Gram is
    then a rescaling of it and no second ``n × d × d`` product is needed.
    """
    X = X - X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    n, d = X.shape
    if gram is not None and n > d:
        small = gram / np.outer(sd, sd)
        total = float(np.trace(small)) / n
        if total <= 0:
            return np.zeros((n, 0))
        small = small / total
        scale = 1.0 / (sd * np.sqrt(total))
    else:
        X = X / sd
        total = float(np.sum(X**2)) / n
        if total <= 0:
            return np.zeros((n, 0))
        X = X / np.sqrt(total)
        small = X @ X.T if n <= d else X.T @ X
        scale = None
    w, V = eigh_descending(small, top=min(rank, small.shape[0]))
    keep = rank_mask(w, max(n, d))
    w, V = w[keep], V[:, keep]
    if n <= d:
        return V * np.sqrt(w)
    return X @ (V if scale is None else V * scale[:, None])


class FusedRidge:
    """Ridge of the targets on the fused leading components of a selection.

    Parameters
    ----------
    components : dict of int -> ndarray of shape (n, r)
        Standardised leading components of each candidate layer
        (:func:`standardized_components`).
    Y : ndarray of shape (n, q)
        Original targets (one-hot for classification).
    ridge_alpha : float or "gcv"
        Penalty of the fused ridge.
    loss : {"loo", "train"}
        Which loss :class:`~skloes.core._ridge.RidgeSolution` reports.
    denominator : float
        Fixed denominator of the LOO loss (``‖Y - 1ȳᵀ‖_F²``).
    """

    def __init__(self, components, Y, ridge_alpha, loss, denominator):
        self.Y, self.ridge_alpha, self.loss = Y, ridge_alpha, loss
        self.denominator = denominator
        self.F = components
        self._blocks = {}
        self.t_mean = Y.mean(axis=0)
        self.Tc = Y - self.t_mean
        self.tc2 = float(np.sum(self.Tc**2))
        self._targets = {}

    def _block(self, i, j):
        if (i, j) not in self._blocks:
            block = self.F[i].T @ self.F[j]
            self._blocks[(i, j)], self._blocks[(j, i)] = block, block.T
        return self._blocks[(i, j)]

    def _target(self, i):
        """``F_iᵀT_c``, computed once per layer."""
        if i not in self._targets:
            self._targets[i] = self.F[i].T @ self.Tc
        return self._targets[i]

    def _gram(self, subset):
        sizes = [self.F[l].shape[1] for l in subset]
        G, _ = block_gram(sizes, lambda a, b: self._block(subset[a], subset[b]))
        return (G + G.T) / 2

    def factors(self, subset):
        """Thin-SVD factors ``(U, s)`` of the fused components of ``subset``."""
        subset = sorted(subset)
        G = self._gram(subset)
        w, W = eigh_descending(G, keep_size=max(self.Y.shape[0], G.shape[0]))
        s = np.sqrt(w)
        F = np.hstack([self.F[l] for l in subset])
        return F @ (W / s), s

    def __call__(self, subset):
        """The ridge fit of ``Y`` on the fused ``subset`` (λ, loss, fitted).

        The λ and losses of :func:`~skloes.core._ridge.ridge_svd` on
        :meth:`factors`, to rounding, without eigenvectors.
        """
        subset = sorted(subset)
        F = np.hstack([self.F[l] for l in subset])
        n, p = F.shape
        B = np.vstack([self._target(l) for l in subset])
        lam, factor = ridge_factor(
            self._gram(subset),
            B,
            self.tc2,
            n,
            kernel=False,
            size=max(n, p),
            alpha=self.ridge_alpha,
        )
        if factor is None:  # tiny, empty or failed: the eigenvector route
            U, s = self.factors(subset)
            return ridge_svd(
                U,
                s,
                self.Y,
                alpha=self.ridge_alpha,
                loss=self.loss,
                loo_denominator=self.denominator,
            )
        fit_c = F @ cho_solve(factor, B, check_finite=False)
        E = self.Tc - fit_c
        if self.loss == "train":
            loss = float(np.sum(E**2)) / E.size
        else:
            # F L⁻ᵀ by a right-side triangular solve (BLAS trsm on F's columns)
            half = blas.dtrsm(
                1.0, factor[0], np.asfortranarray(F), side=1, lower=1, trans_a=1
            )
            hat = 1.0 / n + np.sum(half**2, axis=1)
            E_loo = E / np.maximum(1.0 - hat, LOO_FLOOR)[:, None]
            loss = (
                float(np.sum(E_loo**2)) / self.denominator
                if self.denominator > 0
                else 0.0
            )
        return FitSummary(lam, loss, self.t_mean + fit_c)


class FusedObjective:
    """Scores candidates by the fused ridge fit of the selection plus the candidate.

    Parameters
    ----------
    prep : PreparedLayers
        The prepared layers, while their raw calibration rows (and shared
        Grams) are still held: the standardised components are computed here.
    """

    def __init__(self, prep):
        self.prep, self.cfg = prep, prep.cfg
        cfg = prep.cfg
        components = {
            l: standardized_components(
                prep.raws[l], cfg.fused_rank, prep.layers[l].gram
            )
            for l in prep.candidates
        }
        self.ridge = FusedRidge(
            components, prep.Y, cfg.ridge_alpha, cfg.loss, prep.denom
        )

    def context(self, k, order, R):
        """Per-step quantities: the span and its centroids for the triangle."""
        prep = self.prep
        Rc = R - R.mean(axis=0)
        ctx = StepContext(R=R, tc2=float(np.sum(Rc**2)), order=list(order))
        if not k:
            return ctx
        if prep.triangle:
            if prep.form == "light":  # a light layer is decomposed once selected
                for j in order:
                    prep.layers[j].factors()
            span = ctx.span = Span(prep, order)
            ctx.cent_span = span.centroids()
        if self.cfg.loss_normalization == "relative":
            ctx.scale = 1.0 / max(self.ridge(order).loss, 1e-300)
        return ctx

    def candidate(self, l, k, ctx):
        """The fused fit's loss with ``l`` added; its residual for the triangle."""
        sol = self.ridge([*ctx.order, l])
        res = None
        if ctx.span is not None:
            if self.prep.form == "light":
                res = RowResidual(self.prep, l, ctx.span)
            else:
                res = Residual(self.prep.layers[l], ctx.span, l, gram=False)
        return Candidate(sol.loss, sol.alpha, res, lambda: sol.fitted)

    def contribution(self, best, k, winner, Y_hat):
        """The fused fit replaces ``Ŷ``."""
        return winner.fitted() - Y_hat
