"""The authors' step loss (``objective="residual"``): the residual's ridge fit.

Step 0 fits a ridge of the targets on each prepared layer; a later step fits
the current residual ``R = Y - Ŷ`` on each candidate orthogonalised against
the selected layers (:mod:`~skloes.selection._loes._span`). The loss is the
in-sample MSE (``loss="train"``) or the normalised leave-one-out error
(``"loo"``); the winner's fit is added to ``Ŷ`` (``update="stagewise"``), or
``Ŷ`` is refitted on the winner alone (``"refit"``, the authors' experiment
scripts).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from skloes.core._ridge import LOO_FLOOR, ridge_svd, ridge_train_loss
from skloes.selection._loes._objective import Candidate, FitSummary, StepContext
from skloes.selection._loes._span import (
    Residual,
    RidgeResidual,
    RidgeSpan,
    Span,
    spectral_ridge,
)
from skloes.selection._loes._terms import EXHAUSTED


class ResidualObjective:
    """Scores candidates by a ridge fit of the residual on their new part.

    Parameters
    ----------
    prep : PreparedLayers
        The prepared layers, calibration rows and targets.
    """

    def __init__(self, prep):
        self.prep, self.cfg = prep, prep.cfg
        self._span_type = RidgeSpan if prep.form == "factor_rows" else Span

    def context(self, k, order, R):
        """Per-step quantities shared by every candidate of step ``k``."""
        cfg, prep = self.cfg, self.prep
        Rc = R - R.mean(axis=0)
        ctx = StepContext(R=R, tc2=float(np.sum(Rc**2)), order=list(order))
        if not k:
            return ctx
        span = ctx.span = self._span_type(prep, order)
        ctx.QtR = span.Qt(M=R)
        if prep.triangle:
            ctx.cent_span = span.centroids()
        if cfg.loss_normalization == "relative":
            null = ridge_svd(
                np.zeros((prep.n, 0)),
                np.zeros(0),
                R,
                loss=cfg.loss,
                loo_denominator=prep.denom,
            )
            ctx.scale = 1.0 / max(null.loss, 1e-300)
        return ctx

    def ridge(self, U, s, T):
        """The variant's ridge of ``T`` on the factors ``U diag(s)``."""
        cfg = self.cfg
        return ridge_svd(
            U,
            s,
            T,
            alpha=cfg.ridge_alpha,
            loss=cfg.loss,
            loo_denominator=self.prep.denom,
        )

    def candidate(self, l, k, ctx):
        """The loss of candidate ``l`` at step ``k`` and its fit if it wins."""
        prep, cfg, n = self.prep, self.cfg, self.prep.n
        layer = prep.layers[l]
        if prep.form == "factor_rows":  # step 0 too: the layer's factor rows
            res = RidgeResidual(prep, l, ctx.span)
        elif not k:
            sol = self.ridge(layer.U, layer.s, ctx.R)
            return Candidate(sol.loss, sol.alpha, None, lambda: sol.fitted)
        else:
            res = Residual(layer, ctx.span, l)
        exhausted = res.energy / layer.energy < EXHAUSTED
        w = None if exhausted else res.full_rank(n)
        if w is None:
            return self._eigen_candidate(l, res, exhausted, ctx)
        b = res.b(prep.coords(l, ctx.R), ctx.QtR)
        lam, rss = spectral_ridge(res, w, b, ctx.tc2, n, cfg.ridge_alpha)
        if cfg.loss == "train":  # the fit (no hat diagonal) only if it wins
            loss = rss / (n * ctx.R.shape[1])
            return Candidate(
                loss, lam, res, lambda: self._loo(res, b, lam, ctx.R, hat=False).fitted
            )
        fit = self._loo(res, b, lam, ctx.R)
        return Candidate(fit.loss, lam, res, lambda: fit.fitted)

    def _eigen_candidate(self, l, res, exhausted, ctx):
        """The exact route: the residual's kept eigenpairs (a rank-deficient
        or exhausted candidate)."""
        cfg, n = self.cfg, self.prep.n
        if exhausted and cfg.ridge_alpha == "gcv":
            res.drop_components()  # rounding noise only
        sigma, W = res.eig(n)
        if cfg.loss == "train":
            Z = (W / sigma).T @ res.b(self.prep.coords(l, ctx.R), ctx.QtR)
            lam, loss = ridge_train_loss(sigma, Z, ctx.tc2, n, alpha=cfg.ridge_alpha)

            def fitted():
                return ridge_svd(
                    res.left(n),
                    sigma,
                    ctx.R,
                    alpha=lam if lam > 0 else 1.0,
                    loss="train",
                ).fitted

            return Candidate(loss, lam, res, fitted)
        sol = self.ridge(res.left(n), sigma, ctx.R)
        return Candidate(sol.loss, sol.alpha, res, lambda: sol.fitted)

    def _loo(self, res, b, lam, R, hat=True):
        """The ridge on ``M`` at ``λ``: its fit and normalised LOO loss.

        ``hat=False`` skips the hat diagonal (a fit without its loss).
        """
        n = self.prep.n
        L = np.linalg.cholesky(res.G + lam * np.eye(res.G.shape[0]))
        c = cho_solve((L, True), b)
        t_mean = R.mean(axis=0)
        if not hat:
            return FitSummary(lam, np.nan, t_mean + res.apply(c))
        M = res.M()
        fit_c = M @ c
        E = (R - t_mean) - fit_c
        hat = 1.0 / n + np.sum(solve_triangular(L, M.T, lower=True) ** 2, axis=0)
        E_loo = E / np.maximum(1.0 - hat, LOO_FLOOR)[:, None]
        denom = self.prep.denom
        loss = float(np.sum(E_loo**2)) / denom if denom > 0 else 0.0
        return FitSummary(lam, loss, t_mean + fit_c)

    def contribution(self, best, k, winner, Y_hat):
        """What the step adds to the target fit ``Ŷ``."""
        if self.cfg.update == "refit" and k:
            prep = self.prep
            return self.ridge(*prep.svd_factors(best), prep.Y).fitted
        return winner.fitted()
