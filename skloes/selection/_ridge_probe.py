"""The ridge probe of the baselines: public estimators and subset scoring.

Each layer block is centred and scaled to unit total variance with fit-part
statistics; ridge with an unpenalised intercept and a GCV penalty (the
primitive of :mod:`skloes.core._ridge`) fits one-hot or standardised targets.
:class:`SubsetScorer` scores layer subsets on one fit/held-out split from
cached per-layer Grams (a concatenation's Gram is the sum of its layers').
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.model_selection import GroupShuffleSplit, train_test_split
from sklearn.utils.validation import check_is_fitted, validate_data

from skloes.core._contract import (
    check_layer_dim,
    flat_width,
    one_line_input_errors,
)
from skloes.core._geometry import block_gram
from skloes.core._ridge import ridge_fit, ridge_solve
from skloes.core._targets import (
    check_class_targets,
    check_classes,
    check_continuous_target,
    refuse_mixed_labels,
)
from skloes.utils._deprecation import renamed_params, warn_renamed
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import (
    Interval,
    RealNotInt,
    StrOptions,
    fit_context,
)

__all__ = ["RidgeProbeClassifier", "RidgeProbeRegressor"]


def _fit_targets(target, fit):
    """One-hot (classification) or standardised (regression) fit targets."""
    task, classes, values = target
    if task == "classification":
        return np.eye(classes.size)[values[fit]]
    Y = values[fit]
    std = Y.std(axis=0)
    return (Y - Y.mean(axis=0)) / np.where(std > 0, std, 1.0)


def _probe_score(pred, target, rows):
    """Accuracy (argmax) or uniform-average R² of predictions on ``rows``."""
    task, _, values = target
    if task == "classification":
        return float(np.mean(pred.argmax(axis=1) == values[rows]))
    truth = values[rows]
    ss_res = ((truth - pred) ** 2).sum(axis=0)
    ss_tot = ((truth - truth.mean(axis=0)) ** 2).sum(axis=0)
    r2 = np.where(
        ss_tot > 0,
        1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0),
        np.where(ss_res > 0, 0.0, 1.0),
    )
    return float(r2.mean())


class SubsetScorer:
    """Score layer subsets with the ridge probe on one fit/held-out split.

    Each layer is centred with fit-row means and scaled with fit-row
    statistics (lazily, once): ``scaling="layer"`` gives every layer unit
    total variance (the probe with one block per layer), ``"global"`` divides
    the subset's concatenation by its root total variance (the probe on a
    plain table). A subset is solved in whichever form is smaller: the
    features' Gram ``AᵀA`` (from the layers' cross products) when their width
    is below ``n_fit``, else the fit Gram ``Σ_l G_l`` (and cross-Gram
    ``Σ_l K_l``) of cached per-layer Grams; either costs one tridiagonal
    reduction (:func:`skloes.core._ridge.ridge_solve`).
    """

    def __init__(self, stack, target, fit, held_out, scaling="layer", alpha="gcv"):
        self.stack, self.target = stack, target
        self.fit, self.held_out, self.scaling = fit, held_out, scaling
        self.alpha = alpha
        self.T = _fit_targets(target, fit)
        self.t_mean = self.T.mean(axis=0)
        self.Tc = self.T - self.t_mean
        self.tc2 = float(np.sum(self.Tc**2))
        if target[0] == "regression":  # score in the fit-standardised units
            Y = target[2]
            std = Y[fit].std(axis=0)
            std = np.where(std > 0, std, 1.0)
            self.target = (target[0], None, (Y - Y[fit].mean(axis=0)) / std)
        self._blocks, self._grams = {}, {}

    def _block(self, layer):
        """Centred fit and held-out rows of ``layer`` and its total variance."""
        if layer not in self._blocks:
            X = np.asarray(self.stack[layer], dtype=np.float64)
            Xf = X[self.fit]
            mean = Xf.mean(axis=0)
            Xf = Xf - mean
            var = float((Xf**2).sum()) / Xf.shape[0]
            self._blocks[layer] = (Xf, X[self.held_out] - mean, var)
        return self._blocks[layer]

    def _gram(self, layer):
        if layer not in self._grams:
            Xf, Xh, _ = self._block(layer)
            self._grams[layer] = (Xf @ Xf.T, Xh @ Xf.T)
        return self._grams[layer]

    def _factors(self, subset):
        """The scale of each layer's block, as the probe would set it."""
        var = np.array([self._block(l)[2] for l in subset])
        if self.scaling == "global":
            var = np.full(var.size, var.sum())
        return 1.0 / np.sqrt(np.where(var > 0, var, 1.0))

    def _primal(self, subset, a, crosses):
        """The fit Gram ``AᵀA`` and ``AᵀT_c`` of the scaled concatenation ``A``,
        from the layers' cross products (kept in ``crosses`` when given)."""
        blocks = [self._block(l)[0] for l in subset]

        def block(i, j):
            C = None if crosses is None else crosses.get((subset[i], subset[j]))
            if C is None:
                C = blocks[i].T @ blocks[j]
                if crosses is not None:
                    crosses[subset[i], subset[j]] = C
            return (a[i] * a[j]) * C

        S, offs = block_gram([X.shape[1] for X in blocks], block)
        B = np.vstack([f * (X.T @ self.Tc) for X, f in zip(blocks, a, strict=True)])
        return S, B, offs

    def _kernel(self, subset, a, kept):
        """``Σ_l f_l² G_l`` and ``Σ_l f_l² K_l`` over ``subset``; with per-layer
        scales, the sums of a smaller subset kept in ``kept`` are extended."""
        done, G, K = (), 0.0, 0.0
        if kept is not None and self.scaling == "layer":
            done, G, K = kept.get("kernel", ((), 0.0, 0.0))
            if not set(done) <= set(subset):
                done, G, K = (), 0.0, 0.0
        for l, f in zip(subset, a, strict=True):
            if l not in done:
                G_l, K_l = self._gram(l)
                G, K = G + f**2 * G_l, K + f**2 * K_l
        if kept is not None:
            kept["kernel"] = (tuple(subset), G, K)
        return G, K

    def predict(self, subset, crosses=None):
        """Held-out predictions of the probe fitted on ``subset``.

        ``crosses`` (a dict) keeps the layers' cross products and the kernel
        sums for the next subsets (the nested prefixes of :meth:`prefix_scores`).
        """
        a = self._factors(subset)
        n = self.fit.size
        width = sum(self._block(l)[0].shape[1] for l in subset)
        if width < n:
            S, B, offs = self._primal(subset, a, crosses)
            _, coef = ridge_solve(
                S, B, self.tc2, n, kernel=False, size=n, alpha=self.alpha
            )
            pred = self.t_mean
            for i, (l, f) in enumerate(zip(subset, a, strict=True)):
                pred = pred + f * (self._block(l)[1] @ coef[offs[i] : offs[i + 1]])
            return pred
        G, K = self._kernel(subset, a, crosses)
        _, dual = ridge_solve(
            G, self.Tc, self.tc2, n, kernel=True, size=width, alpha=self.alpha
        )
        return self.t_mean + K @ dual

    def prefix_scores(self, order):
        """Scores of the prefixes of ``order`` (each fitted on its sorted layers),
        every pair's cross product and every layer's kernel term added once."""
        crosses = {}
        return [
            _probe_score(
                self.predict(sorted(order[:k]), crosses), self.target, self.held_out
            )
            for k in range(1, len(order) + 1)
        ]

    def __call__(self, subset):
        return _probe_score(self.predict(subset), self.target, self.held_out)


def _held_out_split(n, target, fraction, rng, groups=None):
    """Stratified (when possible) fit/held-out split of the calibration rows;
    with ``groups``, a split of the groups (none on both sides)."""
    rows = np.arange(n)
    if groups is not None:
        split = GroupShuffleSplit(n_splits=1, test_size=fraction, random_state=rng)
        fit, held = next(split.split(rows, groups=groups))
        return np.sort(fit), np.sort(held)
    strat = target[2] if target[0] == "classification" else None
    try:
        fit, held = train_test_split(
            rows, test_size=fraction, stratify=strat, random_state=rng
        )
    except ValueError:
        fit, held = train_test_split(rows, test_size=fraction, random_state=rng)
    return np.sort(fit), np.sort(held)


# --------------------------------------------------------------------------
# Public ridge probes on flat tables
# --------------------------------------------------------------------------
_probe_doc = fill_doc(
    LAYER_DIM="""
    layer_dim : int or None, default=None
        Block width of the flat table; each block gets its own scale. None
        reads the width the table declares (the output of
        :class:`~skloes.extraction.HiddenStatesTransformer`), and a plain table as one
        block; see :ref:`data_contract`.""",
    BLOCK_SCALES="""
    layer_mean_, layer_scale_ : ndarray of shape (n_features,)
        Column means and per-column block scales from the training rows.

    n_features_in_ : int
        Number of columns seen in fit.""",
)


class _RidgeProbe(BaseEstimator):
    """Shared fit: block scaling, GCV ridge, coefficients in input units."""

    _parameter_constraints = {
        "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
        "ridge_alpha": [
            Interval(RealNotInt, 0, None, closed="neither"),
            StrOptions({"gcv"}),
        ],
    }

    def __init__(self, *, layer_dim=None, ridge_alpha="gcv", alpha="deprecated"):
        self.layer_dim = layer_dim
        self.ridge_alpha = ridge_alpha
        self.alpha = alpha

    @property
    def alpha_(self):
        """Deprecated: the former name of ``ridge_alpha_`` (removed in 0.4)."""
        check_is_fitted(self)
        warn_renamed(type(self).__name__, "alpha_", "ridge_alpha_", what="attribute")
        return self.ridge_alpha_

    def _block_width(self, X):
        """Block width by the layer data contract; a plain table is one block."""
        return flat_width(type(self).__name__, X, self.layer_dim, plain="one_layer")

    def _fit_scaled(self, X, T, width):
        """Centre/scale X, ridge on T, store coefficients in input units."""
        n, p = X.shape
        width = check_layer_dim(type(self).__name__, width, p)
        mean = X.mean(axis=0)
        Xc = X - mean
        v = (Xc**2).reshape(n, p // width, width).sum(axis=(0, 2)) / n
        scale = np.repeat(np.where(v > 0, np.sqrt(v), 1.0), width)
        sol = ridge_fit(Xc / scale, T, alpha=self.ridge_alpha)
        self.ridge_alpha_ = sol.alpha
        self.layer_mean_, self.layer_scale_ = mean, scale
        coef = sol.coef / scale[:, None]  # (p, q) in input units
        return coef, sol.intercept - mean @ coef

    def _raw_scores(self, X):
        check_is_fitted(self)
        with one_line_input_errors(type(self).__name__):
            X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self._coef + self._intercept


@renamed_params(alpha="ridge_alpha")
@_probe_doc
class RidgeProbeClassifier(ClassifierMixin, _RidgeProbe):
    """Ridge probe classifier: one-hot ridge with a GCV penalty, argmax.

    Each ``layer_dim``-wide block of the flat table is centred and scaled to
    unit total variance with training statistics (``layer_dim=None``: one
    global scale). The one-hot targets are fitted by ridge with an
    unpenalised intercept, λ chosen by GCV on the 19-point log grid of
    :func:`skloes.core._ridge.gcv_alpha_grid`; the prediction is the argmax. This
    is the probe that :class:`BestSingleLayerSelector`,
    :class:`ExhaustiveSubsetSelector` and
    :class:`GreedyForwardSelector` use.

    Parameters
    ----------
    {LAYER_DIM}

    ridge_alpha : float or "gcv", default="gcv"
        Ridge penalty on the scaled features, or "gcv" (generalised
        cross-validation over a log grid, :mod:`skloes.core._ridge`).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.

    coef_ : ndarray of shape (n_classes, n_features)
        Coefficients of each one-hot column, in input units.

    intercept_ : ndarray of shape (n_classes,)
        Intercepts.

    ridge_alpha_ : float
        The penalty used (on the scaled features).

    {BLOCK_SCALES}

    See Also
    --------
    RidgeProbeRegressor : The regression probe.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import RidgeProbeClassifier
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 3, size=90)
    >>> X = rng.normal(size=(90, 6)) + np.eye(6)[y] * 4
    >>> clf = RidgeProbeClassifier(layer_dim=3).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the probe.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted probe.
        """
        width = self._block_width(X)
        refuse_mixed_labels(y, type(self).__name__)  # before numpy makes them text
        with one_line_input_errors(type(self).__name__):
            X, y = validate_data(self, X, y, dtype=np.float64)
        y = check_class_targets(y, type(self).__name__)
        self.classes_, codes = np.unique(y, return_inverse=True)
        check_classes(self.classes_, type(self).__name__)
        coef, intercept = self._fit_scaled(X, np.eye(self.classes_.size)[codes], width)
        self._coef, self._intercept = coef, intercept
        self.coef_, self.intercept_ = coef.T.copy(), intercept.copy()
        return self

    def decision_function(self, X):
        """Ridge scores of the one-hot columns.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, the second column minus the first.
        """
        scores = self._raw_scores(X)
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def predict(self, X):
        """Predict class labels (argmax of the ridge scores).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels.
        """
        scores = self._raw_scores(X)
        return self.classes_[np.argmax(scores, axis=1)]


@renamed_params(alpha="ridge_alpha")
@_probe_doc
class RidgeProbeRegressor(RegressorMixin, _RidgeProbe):
    """Ridge probe regressor on standardised targets, with a GCV penalty.

    Blocks are scaled as in :class:`RidgeProbeClassifier`; targets are
    standardised per column for the fit and mapped back for prediction;
    ``score`` is R² (uniform average over targets).

    Parameters
    ----------
    {LAYER_DIM}

    ridge_alpha : float or "gcv", default="gcv"
        Ridge penalty on the scaled features and standardised targets, or
        "gcv" (generalised cross-validation over a log grid).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients in input units.

    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts.

    ridge_alpha_ : float
        The penalty used.

    {BLOCK_SCALES}

    See Also
    --------
    RidgeProbeClassifier : The classification probe.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import RidgeProbeRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(50, 4))
    >>> y = X @ [1.0, 0.0, -2.0, 0.5] + 10
    >>> bool(RidgeProbeRegressor().fit(X, y).score(X, y) > 0.99)
    True
    """

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the probe.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        self : object
            The fitted probe.
        """
        width = self._block_width(X)
        y = check_continuous_target(y, type(self).__name__, multioutput=True)
        with one_line_input_errors(type(self).__name__):
            X, y = validate_data(
                self, X, y, dtype=np.float64, multi_output=True, y_numeric=True
            )
        Y = y.reshape(y.shape[0], -1)
        mean, std = Y.mean(axis=0), Y.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        coef, intercept = self._fit_scaled(X, (Y - mean) / std, width)
        self._coef, self._intercept = coef * std, intercept * std + mean
        self._single = y.ndim == 1
        self.coef_ = self._coef[:, 0].copy() if self._single else self._coef.T.copy()
        self.intercept_ = (
            float(self._intercept[0]) if self._single else self._intercept.copy()
        )
        return self

    def predict(self, X):
        """Predict targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictions.
        """
        pred = self._raw_scores(X)
        return pred[:, 0] if self._single else pred

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
