"""The greedy LOES path: prepare once, then pick one layer per step.

:class:`PreparedPath` holds what every step reads (the prepared layers, the
score terms and the objective); :meth:`PreparedPath.run` scores every eligible
candidate at each step and picks the lowest score, updating the target fit.
The result is a :class:`LOESPath`, whose prefixes are the paths of smaller
budgets (paths are nested). :func:`loes_path` is the entry point of the
estimators; :mod:`~skloes.selection._loes._memory` caches it on disk.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
from sklearn.utils import check_random_state

from skloes.selection._base import resolve_n_layers
from skloes.selection._loes._fused import FusedObjective
from skloes.selection._loes._prepare import PreparedLayers
from skloes.selection._loes._residual import ResidualObjective
from skloes.selection._loes._terms import SCORE_KEYS, ScoreTerms


@dataclass
class LOESPath:
    """The result of one greedy LOES run on the calibration rows.

    The estimators name their fitted attributes from it; :meth:`truncate`
    gives the prefix for a smaller budget (paths are nested).
    """

    selection_order: np.ndarray
    scores: dict
    isotropy: np.ndarray
    calibration_indices: np.ndarray
    classes: np.ndarray | None
    degenerate_layers: np.ndarray
    layer_mean: np.ndarray
    layer_scale: np.ndarray
    candidates: np.ndarray
    triplets: np.ndarray | None
    step_fits: np.ndarray | None
    residual: np.ndarray | None
    complete: bool = False

    def truncate(self, n_select):
        """The path of the first ``n_select`` steps (a stagewise residual is
        restored by adding back the later steps' fits)."""
        k = min(n_select, self.selection_order.size)
        residual, fits = self.residual, self.step_fits
        if fits is not None:
            residual = self.residual + fits[k:].sum(axis=0)
            fits = fits[:k]
        return replace(
            self,
            selection_order=self.selection_order[:k],
            scores={key: v[:k] for key, v in self.scores.items()},
            step_fits=fits,
            residual=residual,
            complete=self.complete and k == self.selection_order.size,
        )


class PreparedPath:
    """Everything the steps of one LOES fit read, prepared once.

    Parameters
    ----------
    stack : ndarray of shape (n_layers, n_samples, dim)
        The layer stack.
    y : ndarray or None
        The targets (None: label-free).
    cfg : LOESConfig
        The fit's configuration.
    random_state : int, RandomState instance or None
        Draws the calibration rows and the triangle triplets.
    owner : str
        Estimator name for the messages.
    form : str or None, default=None
        How candidate layers are held
        (:func:`~skloes.selection._loes._prepare.layer_form`).
    """

    def __init__(self, stack, y, cfg, random_state, owner, form=None):
        self.cfg, self.owner = cfg, owner
        rng = check_random_state(random_state)
        prep = self.prep = PreparedLayers(stack, y, cfg, rng, owner, form)
        self.terms = ScoreTerms(prep)
        self.objective = None
        if cfg.has_targets:
            objective = FusedObjective if cfg.fused else ResidualObjective
            self.objective = objective(prep)
        prep.release()

    @property
    def candidates(self):
        """The candidate layers, ascending."""
        return self.prep.candidates

    def budget(self, n_select, shape, clip=False):
        """The number of steps a budget asks for (:func:`resolve_n_layers`)."""
        return resolve_n_layers(
            n_select,
            len(self.candidates),
            self.owner,
            clip=clip,
            shape=shape,
            degenerate=self.prep.degenerate,
        )

    def run(self, n_select, start=None):
        """Greedy selection of up to ``n_select`` layers.

        ``start`` (a :class:`LOESPath` of this same preparation) continues a
        shorter path instead of recomputing its steps.
        """
        prep = self.prep
        order, rows, fits = [], [], []
        Y_hat = None if prep.Y is None else np.tile(prep.Y.mean(axis=0), (prep.n, 1))
        if start is not None:
            order = start.selection_order.tolist()
            rows = [
                {key: value[i] for key, value in start.scores.items()}
                for i in range(len(order))
            ]
            if prep.Y is not None:
                fits = list(start.step_fits)
                Y_hat = prep.Y - start.residual
        stopped = False
        for k in range(len(order), n_select):
            R = None if Y_hat is None else prep.Y - Y_hat
            table, winners = self._step(k, order, R)
            if table is None:
                warnings.warn(
                    f"{self.owner}: no eligible candidate left after {k} step(s); "
                    "stopping early.",
                    UserWarning,
                    stacklevel=5,
                )
                stopped = True
                break
            best = int(np.argmin(np.where(table["eligible"], table["score"], np.inf)))
            rows.append(table)  # ties -> smallest index
            if self.objective is not None:
                fit = self.objective.contribution(best, k, winners[best], Y_hat)
                fits.append(fit)
                Y_hat = Y_hat + fit
            order.append(best)
        residual = None if Y_hat is None else prep.Y - Y_hat
        return self._result(order, rows, fits, residual, stopped)

    def _eligible(self, l, order):
        """Whether ``l`` may be picked after ``order`` (not picked, no duplicate)."""
        if l in order:
            return False
        return not (
            self.cfg.exclude_duplicates
            and order
            and any(self.terms.duplicate(l, j) for j in order)
        )

    def _step(self, k, order, R):
        """The score table of step ``k`` and each eligible candidate's result;
        ``(None, None)`` when no candidate is eligible."""
        n_layers = len(self.prep.layer_scale)
        ctx = None if self.objective is None else self.objective.context(k, order, R)
        table = {key: np.full(n_layers, np.nan) for key in SCORE_KEYS}
        table["eligible"] = np.zeros(n_layers, dtype=bool)
        results = {}
        for l in self.candidates:
            if self._eligible(l, order):
                table["eligible"][l] = True
                results[l] = self._score(l, k, order, ctx, table)
        if not results:
            return None, None
        return table, results

    def _score(self, l, k, order, ctx, table):
        """Fill candidate ``l``'s row of the step's table; returns its result."""
        layer, terms = self.prep.layers[l], self.terms
        retained, result, tri, loss = 1.0, None, 0.0, 0.0
        if ctx is not None:
            result = self.objective.candidate(l, k, ctx)
            loss = result.loss * ctx.scale
            table["ridge_alpha"][l] = result.alpha
            if result.residual is not None:
                retained = result.residual.energy / layer.energy
                if ctx.cent_span is not None:
                    tri = terms.triangle(result.residual, ctx.cent_span, retained)
        red = terms.redundancy_term(l, order)
        table["loss"][l] = loss
        table["isotropy"][l] = layer.iso
        table["redundancy"][l] = red
        table["triangle"][l] = tri
        table["retained"][l] = retained
        table["score"][l] = terms.score(loss, l, red, tri)
        return result

    def _result(self, order, rows, fits, residual, stopped):
        prep = self.prep
        n_layers = len(prep.layer_scale)
        iso = np.full(n_layers, np.nan)
        for l, layer in prep.layers.items():
            iso[l] = layer.iso
        keys = (*SCORE_KEYS, "eligible")
        scores = {
            key: np.array([r[key] for r in rows]).reshape(len(rows), n_layers)
            for key in keys
        }
        return LOESPath(
            selection_order=np.asarray(order, dtype=np.intp),
            scores=scores,
            isotropy=iso,
            calibration_indices=prep.rows,
            classes=prep.classes,
            degenerate_layers=prep.degenerate,
            layer_mean=prep.layer_mean,
            layer_scale=prep.layer_scale,
            candidates=np.asarray(prep.candidates, dtype=np.intp),
            triplets=prep.triplets,
            step_fits=None if not fits else np.stack(fits),
            residual=residual,
            complete=stopped or len(order) == len(prep.candidates),
        )


def loes_path(stack, y, n_select, cfg, random_state, owner, clip=False):
    """Fit one LOES path; returns a :class:`LOESPath`.

    Parameters
    ----------
    stack : ndarray of shape (n_layers, n_samples, dim)
        The layer stack.
    y : ndarray or None
        The targets (None: label-free).
    n_select : int or "auto"
        The budget.
    cfg : LOESConfig
        The fit's configuration.
    random_state : int, RandomState instance or None
        Seeds the calibration rows and the triangle triplets.
    owner : str
        Estimator name for the messages.
    clip : bool, default=False
        Lower a budget above the number of candidates to it instead of
        raising (LOESSelectorCV's ``max_layers_to_select``).
    """
    path = PreparedPath(stack, y, cfg, random_state, owner)
    return path.run(path.budget(n_select, stack.shape, clip))
