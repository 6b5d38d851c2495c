"""The nested comparison of methods and the recommendation computed from it.

:func:`compare_methods` scores LOES and every baseline with the same probe on
the same outer folds (each method selecting its layers inside every fold when
``nested``); the result is a :class:`MethodComparison`, and
:meth:`MethodComparison.recommend` gives the :class:`Recommendation`, the
cheapest method within noise of the best (see :ref:`report_recommendation`).
Every multi-layer method is scored under the report's ``fusion``
(:class:`~skloes.report._fold_fusion.FoldFusion` for the per-layer fusions
and ``"auto"``), from the per-layer table's
:class:`~skloes.report._layer_scoring.LayerScores`. The report,
the command line and the model card read these objects; how they are shown
lives in :mod:`skloes.report._presenting`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, fields
from numbers import Integral

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.model_selection import cross_validate
from sklearn.pipeline import make_pipeline

from skloes.core._contract import fuse_layers, mark_layers
from skloes.core._fusion import CANDIDATES
from skloes.core._noise import cheapest_within_noise, within_noise
from skloes.core._routing import fit_takes, routing_enabled
from skloes.report._fold_fusion import FoldFusion
from skloes.report._layer_scoring import cross_val_scores
from skloes.report._methods import FIXED, method_selector

__all__ = ["MethodComparison", "MethodScore", "Recommendation", "compare_methods"]


def _layer_list(layers, owner, param):
    """Layer indices as a non-empty list of int >= 0."""
    try:
        values = [int(v) for v in layers if int(v) == v and not isinstance(v, bool)]
        valid = len(values) == len(list(layers)) and values and min(values) >= 0
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(
            f"{owner}: `{param}` must be a non-empty list of layer indices (ints "
            f">= 0); got {layers!r:.60}."
        )
    return values


@dataclass(frozen=True)
class MethodScore:
    """One method's layers and its score on each of the shared folds.

    Parameters
    ----------
    method : str
        ``"loes"`` or a baseline's name.
    layers : list of int
        The layers it chose on all rows.
    fold_scores : ndarray of shape (n_folds,)
        Its score on each outer fold (the folds every method shares).
    fold_layers : list of list of int or None, default=None
        With ``nested``, the layers it chose in each fold (pick order).
    fold_fusions : list of str or None, default=None
        The fusion that combined its layers in each fold (None for a fold
        with one layer): the report's ``fusion``, or what ``"auto"`` chose.

        .. versionadded:: 0.3

    See Also
    --------
    MethodComparison : Every method's scores on the same folds.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.report import MethodScore
    >>> entry = MethodScore("last_layer", [12], np.array([0.8, 0.7]))
    >>> round(entry.score, 2)
    0.75
    """

    method: str
    layers: list
    fold_scores: np.ndarray
    fold_layers: list = None
    fold_fusions: list = None

    def __post_init__(self):
        owner = "MethodScore"
        if not isinstance(self.method, str):
            raise TypeError(f"{owner}: `method` must be a str; got {self.method!r}.")
        layers = _layer_list(self.layers, owner, "layers")
        scores = np.asarray(self.fold_scores, dtype=np.float64)
        if scores.ndim != 1 or scores.size == 0:
            raise ValueError(
                f"{owner}: `fold_scores` must be one score per fold (a non-empty "
                f"1-D array); got shape {scores.shape}."
            )
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "fold_scores", scores)
        if self.fold_layers is not None:
            folds = [_layer_list(f, owner, "fold_layers") for f in self.fold_layers]
            object.__setattr__(self, "fold_layers", folds)

    @property
    def score(self):
        """Mean score over the folds."""
        return float(self.fold_scores.mean())

    @property
    def score_std(self):
        """Standard deviation of the score over the folds."""
        return float(self.fold_scores.std())

    def fusion_counts(self):
        """How many folds combined the layers by each fusion.

        Returns
        -------
        counts : dict of str to int
            In the order concatenate, average, stack; empty for a single
            layer.
        """
        counts = Counter(f for f in self.fold_fusions or () if f is not None)
        return {name: counts[name] for name in CANDIDATES if counts[name]}

    def as_dict(self):
        """The JSON-ready entry of ``LayerReport.summary_``.

        Returns
        -------
        entry : dict
            ``method``, ``layers``, ``fold_layers`` (when nested),
            ``fold_fusions`` (when known), ``score``, ``score_std`` and
            ``fold_scores``.
        """
        entry = {"method": self.method, "layers": list(self.layers)}
        if self.fold_layers is not None:
            entry["fold_layers"] = [list(f) for f in self.fold_layers]
        if self.fold_fusions is not None:
            entry["fold_fusions"] = list(self.fold_fusions)
        entry.update(
            score=self.score,
            score_std=self.score_std,
            fold_scores=[float(v) for v in self.fold_scores],
        )
        return entry


@dataclass(frozen=True, eq=False)
class Recommendation(Mapping):
    """The cheapest method within noise of the best, and why.

    Fewest layers kept, then the shallowest deepest block, among the methods
    whose per-fold scores are within one paired standard error of the best
    mean (every method is scored on the same folds). Reads as a mapping too
    (``rec["method"]``), as the report's JSON summary holds it. Made by
    :meth:`MethodComparison.recommend`.

    Parameters
    ----------
    method : str
        The recommended method.
    layers : list of int
        Its layers (chosen on all rows).
    score : float
        Its mean score.
    n_layers_kept : int
        Its cost: the layers a prediction keeps.
    deepest_layer : int
        Its cost: the deepest block a prediction runs.
    best_method : str
        The method with the best mean score.
    best_score : float
        That best mean score.
    difference : float
        The paired difference (recommended minus best) over the folds.
    difference_se : float
        Its standard error.
    within_noise : list of str
        Every method within noise of the best.

    See Also
    --------
    MethodComparison.recommend : Computes it.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.report import MethodComparison, MethodScore
    >>> comparison = MethodComparison(
    ...     [
    ...         MethodScore("loes", [3, 5], np.array([0.80, 0.82, 0.81])),
    ...         MethodScore("last_layer", [6], np.array([0.80, 0.81, 0.81])),
    ...     ],
    ...     nested=True,
    ... )
    >>> rec = comparison.recommend()
    >>> rec.method, rec["n_layers_kept"]
    ('last_layer', 1)
    """

    method: str
    layers: list
    score: float
    n_layers_kept: int
    deepest_layer: int
    best_method: str
    best_score: float
    difference: float
    difference_se: float
    within_noise: list

    def __getitem__(self, key):
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())

    @classmethod
    def _names(cls):
        return [f.name for f in fields(cls)]

    def as_dict(self):
        """A plain dict (JSON-ready).

        Returns
        -------
        rec : dict
            Every field by its name.
        """
        return {name: getattr(self, name) for name in self._names()}

    def text(self, n_splits):
        """The recommendation and why, in one sentence.

        Parameters
        ----------
        n_splits : int
            The number of shared folds the scores come from.

        Returns
        -------
        text : str
            "recommended: METHOD (cost): score: why".
        """
        from skloes.report._presenting import recommendation_text

        return recommendation_text(self, n_splits)


@dataclass(frozen=True)
class MethodComparison:
    """Every method's per-fold scores on the same folds, LOES first.

    ``LayerReport.comparison_`` is one; ``comparison["loes"]`` is a method's
    :class:`MethodScore`.

    Parameters
    ----------
    methods : list of MethodScore
        One per method, LOES first.
    nested : bool
        Whether each method selected its layers inside every fold.

    See Also
    --------
    Recommendation : What :meth:`recommend` returns.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.report import MethodComparison, MethodScore
    >>> comparison = MethodComparison(
    ...     [MethodScore("loes", [3, 5], np.array([0.80, 0.84]))], nested=True
    ... )
    >>> comparison["loes"].layers
    [3, 5]
    """

    methods: list
    nested: bool

    def __post_init__(self):
        owner = "MethodComparison"
        methods = list(self.methods) if isinstance(self.methods, (list, tuple)) else 0
        if not methods or not all(isinstance(e, MethodScore) for e in methods):
            raise TypeError(
                f"{owner}: `methods` must be a non-empty list of MethodScore; got "
                f"{self.methods!r:.80}."
            )
        names = [e.method for e in methods]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{owner}: `methods` names {twice} more than once.")
        folds = {e.fold_scores.size for e in methods}
        if len(folds) > 1:
            raise ValueError(
                f"{owner}: every method must be scored on the same folds; got "
                f"{ {e.method: e.fold_scores.size for e in methods} } folds."
            )
        object.__setattr__(self, "methods", methods)

    def __getitem__(self, method):
        for entry in self.methods:
            if entry.method == method:
                return entry
        raise KeyError(method)

    @property
    def fold_scores(self):
        """Scores as an array of shape (n_folds, n_methods)."""
        return np.array([e.fold_scores for e in self.methods]).T

    def recommend(self):
        """The cheapest method within noise of the best.

        Within noise: less than one paired standard error below the best
        mean over the shared folds (see :ref:`report_recommendation`).

        Returns
        -------
        rec : Recommendation
            The method, its cost and why.
        """
        scores = self.fold_scores
        costs = [(len(e.layers), max(e.layers)) for e in self.methods]
        if np.isnan(scores).any(axis=0).all():
            raise ValueError(
                "MethodComparison: no method was scored on every fold (each has "
                "a NaN score); there is nothing to recommend."
            )
        mask, best = within_noise(scores)
        choice, _ = cheapest_within_noise(scores, costs)
        diff = scores[:, choice] - scores[:, best]
        se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else 0.0
        pick = self.methods[choice]
        return Recommendation(
            method=pick.method,
            layers=list(pick.layers),
            score=pick.score,
            n_layers_kept=costs[choice][0],
            deepest_layer=costs[choice][1],
            best_method=self.methods[best].method,
            best_score=self.methods[best].score,
            difference=float(diff.mean()),
            difference_se=float(se),
            within_noise=[
                e.method for e, m in zip(self.methods, mask, strict=True) if m
            ],
        )


def compare_methods(report, scores, stack, y, probe, *, progress=iter):
    """Score LOES and the report's baselines on the shared folds.

    Parameters
    ----------
    report : LayerReport
        Being fitted: its settings (budget, selector, baselines, ``fusion``,
        ``nested``, seed, jobs), its task, scoring, number of folds and
        per-layer scores (public attributes only).
    scores : LayerScores
        What the per-layer scoring produced: the shared folds, the groups
        and splitter, each layer's fold scores and held-out outputs.
    stack : ndarray of shape (n_layers, n_samples, dim)
        The layers.
    y : ndarray of shape (n_samples,)
        The target.
    probe : estimator
        The probe every method is scored with.
    progress : callable, default=iter
        Wraps the loop over methods (a progress bar).

    Returns
    -------
    comparison : MethodComparison
    loes : estimator
        The LOES selector fitted on all rows.
    inner_cv : int or splitter
        The selectors' own folds.
    """
    return _Comparer(report, scores, stack, y, probe).run(progress)


class _Comparer:
    """One comparison's state: the flat table, the inner folds, a cache of
    fixed layers' scores."""

    def __init__(self, report, scores, stack, y, probe):
        self.report, self.scores, self.stack, self.y = report, scores, stack, y
        self.probe, self.folds, self.groups = probe, scores.folds, scores.groups
        L, n, d = stack.shape
        flat = np.ascontiguousarray(stack.transpose(1, 0, 2)).reshape(n, L * d)
        self.flat = mark_layers(flat, d)
        k = report.n_layers_to_select
        self.k = min(k, L) if k != "auto" else k
        self.inner_cv = self._inner_cv()
        self.cache = {}
        self.fused = None
        if report.fusion != "concatenate":
            self.fused = FoldFusion(
                scores,
                stack,
                y,
                probe,
                fusion=report.fusion,
                inner_cv=self.inner_cv,
                n_jobs=report.n_jobs,
            )

    def run(self, progress):
        report = self.report
        methods, loes = [], None
        for method in progress(["loes", *report.baselines]):
            est = method_selector(
                method,
                self.k,
                report.random_state,
                report.selector,
                self.inner_cv,
                report.task_,
            )
            est = self._grouped(est)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                entry, fitted = self._score(method, est)
            methods.append(entry)
            if method == "loes":
                loes = fitted
        return MethodComparison(methods, bool(report.nested)), loes, self.inner_cv

    def _score(self, method, est):
        report = self.report
        fit_params = self._selector_params(est)
        if method == "best_single_layer" and not report.nested:
            fitted = None  # argmax of the per-layer table
            layers = [int(np.argmax(report.probe_scores_))]
        else:
            fitted = clone(est).fit(self.flat, self.y, **fit_params)
            layers = [int(v) for v in fitted.get_support(indices=True)]
        fold_layers = fold_fusions = None
        if report.nested and method in FIXED:  # no rows: same in every fold
            fold_layers = [layers] * report.n_splits_
            scores, fold_fusions = self._fixed_cv(layers)
        elif report.nested and self.fused is None:  # one probe on the layers
            pipe = make_pipeline(est, clone(self.probe))
            scores, fold_layers = self._nested_cv(pipe, fit_params)
            fold_fusions = [_one_or(f, "concatenate") for f in fold_layers]
        elif report.nested:  # the fold's picks, then their per-layer probes
            fold_layers = self._fold_picks(est, fit_params)
            scores, fold_fusions = self.fused.score(fold_layers)
        else:
            scores, fold_fusions = self._fixed_cv(layers)
        entry = MethodScore(method, layers, scores, fold_layers, fold_fusions)
        return entry, fitted

    def _inner_cv(self):
        """Folds of a selector's own CV: 5, fewer when a nested training fold
        holds fewer rows of a class (at least 2), or of groups; a grouped
        splitter of that many folds with ``groups``."""
        n = 5 if not self.report.nested else self._inner_n_splits()
        return n if self.groups is None else self.scores.splitter(n)

    def _inner_n_splits(self):
        report, y = self.report, self.y
        trains = [train for train, _ in self.folds]
        rows = min(train.size for train in trains)
        if rows < 3:  # a selection needs 3 calibration rows
            raise ValueError(
                f"LayerReport: nested selection needs at least 3 training rows in "
                f"every CV fold; the smallest of the {report.n_splits_} folds has "
                f"{rows}. Pass nested=False or more rows."
            )
        smallest = (
            rows
            if report.task_ == "regression"
            else min(
                np.unique(y[train], return_counts=True)[1].min() for train in trains
            )
        )
        if self.groups is not None:
            groups = min(len(np.unique(self.groups[train])) for train in trains)
            smallest = min(smallest, groups)
        return int(max(2, min(5, smallest)))

    def _grouped(self, selector):
        """With ``groups``, a selector that cross-validates by a number of
        folds (``cv`` an int or None) splits by the groups instead."""
        if self.groups is None or "cv" not in selector.get_params(deep=False):
            return selector
        cv = selector.get_params(deep=False)["cv"]
        if cv is None or isinstance(cv, Integral):
            return clone(selector).set_params(cv=self.inner_cv)
        return selector

    def _selector_params(self, selector):
        """The ``fit`` metadata of a selector: ``groups`` when it splits."""
        groups = self.groups
        if groups is None or not fit_takes(selector, "groups"):
            return {}
        return {"groups": groups}

    def _nested_cv(self, pipe, fit_params):
        """Per-fold scores and each fold's picked layers of a selector
        pipeline. The selector's ``fit_params`` (its ``groups``) reach it
        through scikit-learn's metadata routing when it is on, else as the
        pipeline's step parameters; either way, sliced to each training fold.
        """
        if fit_params and not routing_enabled():
            step = pipe.steps[0][0]
            fit_params = {f"{step}__{k}": v for k, v in fit_params.items()}
        out = cross_validate(
            pipe,
            self.flat,
            self.y,
            cv=self.folds,
            scoring=self.report.scoring_,
            n_jobs=self.report.n_jobs,
            error_score="raise",
            return_estimator=True,
            params=fit_params or None,
        )
        fold_layers = [_pick_order(fitted[0]) for fitted in out["estimator"]]
        return np.asarray(out["test_score"], dtype=np.float64), fold_layers

    def _fold_picks(self, selector, fit_params):
        """The layers ``selector`` picks on each fold's training rows (its
        ``fit_params``, one value per row, sliced to them), in pick order."""
        n = len(self.y)
        jobs = []
        for train, _ in self.folds:
            params = {
                k: np.asarray(v)[train] if np.ndim(v) >= 1 and len(v) == n else v
                for k, v in fit_params.items()
            }
            jobs.append(delayed(_picks)(selector, self.flat, self.y, train, params))
        return Parallel(n_jobs=self.report.n_jobs)(jobs)

    def _fixed_cv(self, layers):
        """Per-fold scores (and fusions) of the probe on fixed ``layers``
        (computed once)."""
        key = tuple(layers)
        if key not in self.cache:
            n = len(self.folds)
            if len(layers) == 1:
                scores = self.scores.fold_scores[layers[0]]
                self.cache[key] = scores, [None] * n
            elif self.fused is None:
                fused = fuse_layers(self.stack, layers)
                scores = cross_val_scores(
                    self.probe,
                    fused,
                    self.y,
                    self.folds,
                    self.report.scoring_,
                    self.report.n_jobs,
                )
                self.cache[key] = scores, ["concatenate"] * n
            else:
                self.cache[key] = self.fused.score([list(layers)] * n)
        return self.cache[key]


def _picks(selector, flat, y, train, params):
    """The layers a clone of ``selector`` picks on the ``train`` rows, in
    pick order."""
    return _pick_order(clone(selector).fit(flat[train], y[train], **params))


def _pick_order(selector):
    """The layers a fitted ``selector`` kept, in pick order where it has one."""
    order = getattr(selector, "selection_order_", None)
    if order is None:
        order = selector.get_support(indices=True)
    return [int(v) for v in order]


def _one_or(layers, fusion):
    return None if len(layers) == 1 else fusion
