"""The public LOES estimators: ``LOESSelector`` and ``LOESSelectorCV``.

Parameters, validation, the fitted attributes and the score table; the path
itself is :mod:`~skloes.selection._loes._path`, its budget cross-validation
:mod:`~skloes.selection._loes._cv`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import inspect
import os
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, clone
from sklearn.metrics import check_scoring
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import FLOAT_DTYPES, validate_layers
from skloes.core._routing import (
    check_groups_array,
    grouped_splitter,
    refuse_sample_weight,
    route_fit,
    router_of,
    routing_splitter,
)
from skloes.core._targets import cv_splits, resolve_task
from skloes.metrics._stability import selection_stability
from skloes.selection._base import (
    N_LAYERS_CONSTRAINT,
    LayerSelectorMixin,
    no_candidates_message,
    resolve_n_layers,
)
from skloes.selection._loes._config import LOESConfig
from skloes.selection._loes._cv import (
    FoldMetadata,
    choose_budget,
    default_estimator,
    probe_scaling,
    score_fold,
)
from skloes.selection._loes._grid import resolve_grid
from skloes.selection._loes._memory import check_selector_memory, memory_path
from skloes.selection._loes._path import loes_path
from skloes.utils._deprecation import renamed_params, resolved_params
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import (
    HasMethods,
    Interval,
    RealNotInt,
    StrOptions,
    fit_context,
)

__all__ = ["LOESSelector", "LOESSelectorCV"]

_LOES_CONSTRAINTS = {
    "variant": [StrOptions({"reference", "robust"})],
    "isotropy_weight": [Interval(Real, 0, None, closed="left"), None],
    "redundancy_weight": [Interval(Real, 0, None, closed="left"), None],
    "volume_weight": [Interval(Real, 0, None, closed="left")],
    "ridge_alpha": [
        Interval(Real, 0, None, closed="neither"),
        StrOptions({"gcv"}),
        None,
    ],
    "scaling": [StrOptions({"none", "unit_variance"}), None],
    "loss": [StrOptions({"train", "loo"}), None],
    "orthogonalization": [StrOptions({"ridge", "basis"}), None],
    "isotropy": [StrOptions({"inv_cv", "erank"}), None],
    "redundancy": [StrOptions({"overlap", "cka"}), None],
    "triplets": [
        StrOptions({"sampled", "auto"}),
        Interval(Integral, 1, None, closed="left"),
        None,
    ],
    "update": [StrOptions({"stagewise", "refit"})],
    "loss_normalization": [StrOptions({"none", "relative"})],
    "objective": [StrOptions({"residual", "fused"}), None],
    "fused_rank": [Interval(Integral, 1, None, closed="left")],
    "include_embedding": ["boolean"],
    "exclude_duplicates": ["boolean"],
    "fusion_scaling": [StrOptions({"layer"}), None],
    "orth_energy": [Interval(Real, 0, 1, closed="right")],
    "orth_max_rank": [Interval(Real, 0, 1, closed="right")],
    "max_samples": [
        Interval(Integral, 1, None, closed="left"),
        Interval(RealNotInt, 0, 1, closed="right"),
        None,
    ],
    "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
    "task": [StrOptions({"auto", "classification", "regression", "label_free"})],
    "candidate_grid": [StrOptions({"auto", "all"}), "array-like"],
    "random_state": ["random_state"],
}


_PARAMS_DOC = """
    variant : {"robust", "reference"}, default="robust"
        ``"reference"`` reproduces the authors' implementation; ``"robust"``
        fixes its documented degeneracies (:ref:`loes_variants`). Every
        component below defaults to None, meaning the variant's value.

    isotropy_weight : float or None, default=None
        Weight of the isotropy term; the authors' α. None means the
        variant's value (reference: 1.0, robust: 0.1), except 0.0 when the
        fused fit scores a step (robust with targets; see :ref:`loes_fused`).

    redundancy_weight : float or None, default=None
        Weight of the redundancy term; the authors' γ. None means 0.0 when
        the fused fit scores a step (robust with targets: a redundant layer
        already adds nothing to it) and 0.5 otherwise (reference,
        ``objective="residual"``, label-free).

    volume_weight : float, default=0.1
        Weight of the class-triangle (simplex volume) term; the authors' η.

    ridge_alpha : float or "gcv", default=None
        Ridge penalty: absolute (reference: 1e-3) or chosen by GCV (robust).

    scaling : {"none", "unit_variance"}, default=None
        Layer preparation: centred only (reference) or also divided by the
        root total variance (robust).

    loss : {"train", "loo"}, default=None
        Fit loss: in-sample MSE (reference) or normalised leave-one-out
        (robust).

    orthogonalization : {"ridge", "basis"}, default=None
        Ridge projection with ε_o = 1e-6 (reference) or rank-limited basis
        (robust).

    isotropy : {"inv_cv", "erank"}, default=None
        Inverse coefficient of variation of the covariance spectrum
        (reference) or bounded effective rank (robust).

    redundancy : {"overlap", "cka"}, default=None
        Normalised overlap on raw features (reference) or linear CKA (robust).

    triplets : {"sampled", "auto"}, int or None, default=None
        Triangle triplets: ``min(200, 3C)`` sampled with repeats (reference),
        or all distinct-class triplets when C <= 30, else 200 (robust). An int
        is that many triplets drawn by the variant's rule.

    update : {"stagewise", "refit"}, default="stagewise"
        Residual update; ``"refit"`` reproduces the authors' experiment
        scripts.

    loss_normalization : {"none", "relative"}, default="none"
        ``"relative"`` divides the loss at steps k >= 1 by the loss before
        the step: of the current residual (``objective="residual"``) or of the
        fused selection so far (``objective="fused"``).

    objective : {"residual", "fused"}, default=None
        What a step's loss scores. ``"residual"`` (reference): a ridge fit of
        the stagewise residual on the candidate orthogonalised against the
        selected layers (the authors' step). ``"fused"`` (robust): one ridge
        fit of the original targets on the fused selection plus the
        candidate, each layer standardised per feature and reduced to its
        ``fused_rank`` leading principal components; the selection's fit
        ``Ŷ`` is that fused fit. See :ref:`loes_fused`.

    fused_rank : int, default=64
        Leading principal components kept per layer in the fused fit
        (``objective="fused"`` only).

    include_embedding : bool, default=True
        Whether layer 0 (the embedding output) is a candidate.

    max_samples : int, float or None, default=2000
        Calibration rows: a count, a fraction of n, or None for all.

    exclude_duplicates : bool, default=True
        Never select a layer whose CKA with a selected one is >= 1 - 1e-10.

    fusion_scaling : {"layer"} or None, default=None
        ``"layer"`` centres each fused block and divides it by its root total
        variance (calibration statistics).

    orth_energy : float, default=0.99
        Energy fraction kept by the robust basis.

    orth_max_rank : float, default=0.5
        Rank cap of the robust basis, as a fraction of the calibration rows.

    layer_dim : int or None, default=None
        Block width of a flat table ``(n_samples, n_layers * layer_dim)``;
        None makes every column its own layer. Ignored for a stack.

    task : {"auto", "classification", "regression", "label_free"}, \
default="auto"
        Resolved from ``y`` with ``"auto"`` (``y=None`` gives label-free).

    candidate_grid : {"auto", "all"}, array-like of int or of bool, default="auto"
        Layers the greedy search may pick from. ``"all"``: every layer (the
        behaviour before 0.2). ``"auto"``: for the robust variant, one layer
        per block of ``step`` neighbours, counted down from the last layer,
        with ``G = min(L, max(2K, ceil(L/4)))`` blocks of ``step =
        ceil(L/G)`` layers (K the budget, or ``max_layers_to_select``, at
        least 4): layers 2, 6, ..., 30 of a 31-layer stack at K <= 4, every
        layer of a stack of 8 or fewer; every layer for the reference variant
        (the authors' search).
        A list gives the layers explicitly (indices 0 = the embedding
        output, or a boolean mask with one entry per layer, as
        ``get_support()`` returns). See :ref:`loes_grid`.

        .. versionadded:: 0.2

        .. versionchanged:: 0.3
           A boolean mask is read as a mask (it was read as the layers 0
           and 1).

    random_state : int, RandomState instance or None, default=None
        Seeds the calibration subsample and the triangle triplets."""

_ATTRS_DOC = """
    selection_order_ : ndarray of shape (n_selected_,)
        Layers in the order they were picked (Hugging Face indices: 0 is the
        embedding output).

    selected_layers_ : ndarray of shape ``(n_selected_,)``
        The same layers, ascending.

    support_ : ndarray of shape ``(n_layers_in_,)``
        Boolean mask of the selected layers.

    scores_ : dict of ndarray of shape (n_selected_, n_layers_in_)
        Row k is step k: ``score``, ``loss``, ``isotropy``, ``redundancy``,
        ``triangle``, ``ridge_alpha``, ``retained`` (fraction of the prepared
        layer's energy left after orthogonalisation) and the boolean
        ``eligible``. NaN marks a layer not evaluated at that step, and the
        redundancy of steps k >= 1 when it has no weight in a fused score
        (``redundancy_weight=0``, the robust default: it is not computed).
        See :meth:`scores_frame`.

    isotropy_ : ndarray of shape (n_layers_in_,)
        Isotropy of each candidate layer (NaN for non-candidates).

    candidates_ : ndarray of shape (n_candidates,)
        Layers offered to the greedy search: the layers of ``grid_layers_``
        except the degenerate ones and, with ``include_embedding=False``,
        layer 0.

    grid_layers_ : ndarray of int
        The layers of the candidate grid, ascending (every layer with
        ``candidate_grid="all"``).

    n_selected_ : int
        Number of layers selected (fewer than asked only after a warning).

    calibration_indices_ : ndarray
        Sorted rows used for the selection.

    classes_ : ndarray or None
        Class labels for classification, else None.

    task_ : str
        The resolved task.

    variant_ : str
        The variant.

    components_ : dict
        The resolved component values and score weights.

    degenerate_layers_ : ndarray
        Layers excluded as degenerate.

    layer_mean_ : ndarray of shape (n_layers_in_, dim_in_)
        Layer means on the calibration rows.

    layer_scale_ : ndarray of shape (n_layers_in_,)
        Root total variances on the calibration rows.

    triplets_ : ndarray of shape (n_triplets, 3) or None
        Class-code triplets of the triangle term.

    step_fits_ : ndarray of shape (n_selected_, n_calibration, q) or None
        Fitted contribution added to the target fit at each step.

    residual_ : ndarray of shape (n_calibration, q) or None
        The residual ``Y - Ŷ`` after the last step.

    n_layers_in_ : int
        Number of layers seen in fit.

    dim_in_ : int
        Width of each layer.

    layer_dim_ : int
        Block width (flat input only).

    n_features_in_ : int
        Number of columns (flat input only).

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, when a flat DataFrame with string names is given."""


_doc = fill_doc(PARAMS=_PARAMS_DOC, ATTRS=_ATTRS_DOC)


# --------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------
#: The fitted attributes named after a path's fields (``field_ = path.field``).
_PATH_FIELDS = (
    "selection_order",
    "scores",
    "isotropy",
    "calibration_indices",
    "classes",
    "degenerate_layers",
    "layer_mean",
    "layer_scale",
    "candidates",
    "triplets",
    "step_fits",
    "residual",
)


class _BaseLOES(LayerSelectorMixin, BaseEstimator):
    """Validation, fitted attributes and the score table of both selectors."""

    def _path_config(self, X, y, params, budget, lazy=False):
        """The validated stack and targets, and the fit's :class:`LOESConfig`.

        ``params`` are the LOES parameters of the fit (renamed ones resolved)
        and ``budget`` the largest budget the candidate grid must leave room
        for. ``lazy``: a layer store stays on disk (only its calibration rows
        are read, by :class:`~skloes.selection._loes._prepare.PreparedLayers`).
        """
        kw = dict(layer_dim=params["layer_dim"], dtype=FLOAT_DTYPES, lazy=lazy)
        if y is None:  # validate_layers(flat, y=None) would return X alone
            stack, y_checked = validate_layers(self, X, **kw), None
        else:
            stack, y_checked = validate_layers(self, X, y, **kw)
        owner = type(self).__name__
        task, _, y_arr = resolve_task(y_checked, params["task"], owner)
        grid = resolve_grid(
            params["candidate_grid"], params["variant"], stack.shape[0], budget, owner
        )
        return stack, y_arr, LOESConfig.resolve(params, task, grid)

    def _set_path(self, path, n_select, cfg):
        """Name the fitted attributes from a :class:`LOESPath` (first ``n_select``
        steps)."""
        path = path.truncate(n_select)
        for field in _PATH_FIELDS:
            setattr(self, f"{field}_", getattr(path, field))
        self.task_, self.variant_ = cfg.task, cfg.variant
        self.grid_layers_ = (
            np.arange(self.n_layers_in_)
            if cfg.grid is None
            else np.asarray(cfg.grid, dtype=np.intp)
        )
        self.components_ = cfg.components()
        return self

    def _selector_param(self, name):
        """The value of one of the selector's parameters."""
        return getattr(self, name)

    def _fusion_statistics(self):
        if self._selector_param("fusion_scaling") == "layer":
            return self.layer_mean_, self.layer_scale_
        return None

    def scores_frame(self):
        """The per-step score table as a long pandas DataFrame.

        Returns
        -------
        frame : pandas.DataFrame
            One row per (step, layer) with the columns ``step``, ``layer``,
            the score terms of ``scores_``, ``eligible`` and ``selected``
            (the layer picked at that step).
        """
        check_is_fitted(self)
        import pandas as pd

        steps, L = self.n_selected_, self.n_layers_in_
        data = {
            "step": np.repeat(np.arange(steps), L),
            "layer": np.tile(np.arange(L), steps),
        }
        for key, value in self.scores_.items():
            data[key] = value.ravel()
        picked = np.zeros((steps, L), dtype=bool)
        picked[np.arange(steps), self.selection_order_] = True
        data["selected"] = picked.ravel()
        return pd.DataFrame(data)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


@renamed_params(alpha="isotropy_weight", gamma="redundancy_weight", eta="volume_weight")
@_doc
class LOESSelector(_BaseLOES):
    """Layer-wise Optimal Embedding Selection (LOES).

    Greedily selects ``n_layers_to_select`` layers of a model's hidden-state
    stack (Batra et al., 2026): at each step every remaining layer is scored by

        score = loss + isotropy_weight·(1 - isotropy)
                + redundancy_weight·redundancy - volume_weight·triangle

    The reference variant's loss is the authors': a ridge fit of the current
    target residual on the layer orthogonalised against the selected ones.
    The robust variant's loss is the leave-one-out error of one ridge fit of
    the targets on the fused selection plus the candidate
    (``objective="fused"``), which is what the downstream probe sees; see
    :ref:`loes_fused`. ``transform`` concatenates the selected layers in index
    order.

    Parameters
    ----------
    n_layers_to_select : int or "auto", default="auto"
        Budget K. ``"auto"`` is ``min(4, number of candidate layers)``, valid
        on any input. Paths over one candidate grid are nested: every
        K-selection is a prefix of a longer one (the automatic grid is the
        same for every K <= 4).

    memory : str, os.PathLike, joblib.Memory or None, default=None
        Caches the selection path on disk (a folder, or a
        :class:`joblib.Memory`), as :class:`~sklearn.pipeline.Pipeline` does.
        A fit with the same data, targets and parameters but another budget
        then reuses the cached path: a smaller budget is a slice of it, a
        larger one extends it from its last step. Works across joblib
        workers, so ``GridSearchCV`` over ``n_layers_to_select`` computes one
        path per fold (see :ref:`scaling`). Results are identical to
        ``memory=None``. The cached results are ``.npz`` archives of arrays
        and JSON, read with pickling off and built from the LOES classes only
        (under ``<memory>/skloes_loes/``): unlike joblib's own cache, which
        reads pickles, reading a folder from an untrusted source cannot run
        code (see :ref:`trust`). A cached result that cannot be read
        (truncated, garbage, a pickle, another class, stored for other
        inputs) is removed with a warning and computed again; a folder that
        cannot be used is an error naming ``memory``.

        .. versionchanged:: 0.2
           An unreadable cached result is computed again (it crashed).

        .. versionchanged:: 0.3
           Results are stored without pickle (joblib's pickles of 0.2 are
           never read; the paths are computed again once).

    {PARAMS}

    Attributes
    ----------
    {ATTRS}

    See Also
    --------
    LOESSelectorCV : Chooses the budget by cross-validation.

    Notes
    -----
    Computation is float64 whatever the input dtype. Each candidate is
    decomposed once; each step decomposes the selected span in its smaller
    Gram form and updates every candidate in ``O(n·m²)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes import LOESSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 3, size=120)
    >>> stack = rng.normal(size=(5, 120, 8))
    >>> stack[3, :, :3] += 3 * np.eye(3)[y]
    >>> sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    >>> int(sel.selection_order_[0])
    3
    >>> sel.transform(stack).shape
    (120, 16)
    """

    _parameter_constraints = {
        "n_layers_to_select": N_LAYERS_CONSTRAINT,
        "memory": [None, str, os.PathLike, HasMethods(["cache"])],
        **_LOES_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_layers_to_select="auto",
        memory=None,
        variant="robust",
        isotropy_weight=None,
        redundancy_weight=None,
        volume_weight=0.1,
        ridge_alpha=None,
        scaling=None,
        loss=None,
        orthogonalization=None,
        isotropy=None,
        redundancy=None,
        triplets=None,
        update="stagewise",
        loss_normalization="none",
        objective=None,
        fused_rank=64,
        include_embedding=True,
        max_samples=2000,
        exclude_duplicates=True,
        fusion_scaling=None,
        orth_energy=0.99,
        orth_max_rank=0.5,
        layer_dim=None,
        task="auto",
        candidate_grid="auto",
        random_state=None,
        alpha="deprecated",
        gamma="deprecated",
        eta="deprecated",
    ):
        self.n_layers_to_select = n_layers_to_select
        self.memory = memory
        self.variant = variant
        self.isotropy_weight = isotropy_weight
        self.redundancy_weight = redundancy_weight
        self.volume_weight = volume_weight
        self.ridge_alpha = ridge_alpha
        self.scaling = scaling
        self.loss = loss
        self.orthogonalization = orthogonalization
        self.isotropy = isotropy
        self.redundancy = redundancy
        self.triplets = triplets
        self.update = update
        self.loss_normalization = loss_normalization
        self.objective = objective
        self.fused_rank = fused_rank
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.exclude_duplicates = exclude_duplicates
        self.fusion_scaling = fusion_scaling
        self.orth_energy = orth_energy
        self.orth_max_rank = orth_max_rank
        self.layer_dim = layer_dim
        self.task = task
        self.candidate_grid = candidate_grid
        self.random_state = random_state
        self.alpha = alpha
        self.gamma = gamma
        self.eta = eta

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Select layers on the calibration rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack or a flat table of ``layer_dim``-wide blocks, or a
            layer store (:class:`~skloes.scale.LayerStore` or a view of one),
            of which only the calibration rows are read.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs), \
default=None
            Class labels or continuous targets; None selects label-free.

        Returns
        -------
        self : object
            The fitted selector.
        """
        params = self.get_params(deep=False)
        budget = self.n_layers_to_select
        owner = type(self).__name__
        memory = check_selector_memory(self.memory, owner)
        # a cached path hashes the whole stack; without a location, none
        lazy = getattr(memory, "location", None) is None
        stack, y_arr, cfg = self._path_config(X, y, params, budget, lazy=lazy)
        path = memory_path(stack, y_arr, budget, cfg, self.random_state, owner, memory)
        return self._set_path(path, path.selection_order.size, cfg)


#: LOESSelector's parameters that LOESSelectorCV took directly before 0.3
#: (they keep working, with a FutureWarning, until 0.5).
_SELECTOR_PARAMS = tuple(
    p
    for p in LOESSelector._get_param_names()
    if p not in ("n_layers_to_select", "memory")
)

_CV_DOC = """
    Because LOES paths are nested, one selection path per fold scores every
    budget ``1..max_layers_to_select`` (as ``RFECV`` does): a fold fits one
    ``selector`` on its training rows, then fits ``estimator`` on the fused
    layers of each prefix of the path and scores it on the held-out rows.
    The final selection is one full-data path truncated to the chosen
    budget, so the fitted object behaves as a fitted :class:`LOESSelector`.
    Total cost: ``n_splits + 1`` paths."""


@fill_doc(ATTRS=_ATTRS_DOC, INTRO=_CV_DOC)
class LOESSelectorCV(_BaseLOES):
    """LOES with the budget chosen by cross-validation (see :ref:`loes_cv`).

    {INTRO}

    Parameters
    ----------
    estimator : estimator instance or None, default=None
        Scored on the fused layers of each budget; None uses the ridge probe
        (:class:`~skloes.selection.RidgeProbeClassifier` or
        :class:`~skloes.selection.RidgeProbeRegressor`).

    selector : LOESSelector or None, default=None
        The selector whose path is cross-validated, with all its parameters
        (``variant``, the score weights, ``candidate_grid``, ``layer_dim``,
        ``random_state``, ...); None is ``LOESSelector()``. Its
        ``n_layers_to_select`` is the budget ``budget_rule="anchored"``
        keeps unless the folds rule it out, and its automatic candidate
        grid is the one it searches at that budget, so that the path
        cross-validated holds the selector's own answer; ``memory`` is not
        used. Search over its parameters as ``selector__<name>``.

        .. versionadded:: 0.3

    max_layers_to_select : int, default=10
        Largest budget tried, clipped to the number of candidate layers
        (the selector's grid: 8 on a 31-layer stack).

    cv : int, cross-validation generator or iterable, default=5
        Passed to :func:`~sklearn.model_selection.check_cv` (stratified for
        classification).

    scoring : str, callable or None, default=None
        Passed to :func:`~sklearn.metrics.check_scoring`; None uses the
        estimator's ``score`` (accuracy or R²).

    n_jobs : int or None, default=None
        Folds run in parallel with joblib.

    budget_rule : {"anchored", "paired_se", "one_se", "best"}, \
default="anchored"
        How the budget is read off the cross-validated scores:
        ``"anchored"``, of the budgets within noise of the best (the paired
        rule below), the one nearest to the selector's own
        ``n_layers_to_select`` (``"auto"``: 4), the smaller on ties;
        ``"paired_se"``, the smallest budget within noise of the best by the
        paired rule (its fold-wise difference to the best budget is not
        below zero by more than one standard error of that difference; the
        rule of :class:`~skloes.report.LayerReport`'s recommendation);
        ``"one_se"``, the smallest budget whose mean score is within one
        standard error of the best budget's fold scores (the default of 0.2);
        ``"best"``, the smallest budget with the best mean score (the rule
        before 0.2). See :ref:`loes_cv`.

        .. versionadded:: 0.2

        .. versionchanged:: 0.3
           The default is ``"anchored"`` (was ``"one_se"``): the folds share
           their difficulty, which the unpaired standard error counts as
           noise, so ``"one_se"`` sent the budget to one layer; and on noisy
           folds the smallest budget within noise (``"paired_se"``) still
           fell to one layer where the selector's own budget held up.

    Attributes
    ----------
    n_layers_to_select_ : int
        The budget chosen by ``budget_rule``.

    fold_selections_ : list of ndarray
        The layers each fold's path picked at that budget, in pick order.

        .. versionadded:: 0.2

    selection_stability_ : float
        Chance-corrected stability of ``fold_selections_`` (Nogueira et al.,
        2018; :func:`~skloes.metrics.selection_stability` over the
        ``n_layers_in_`` layers): 1 when every fold picked the same layers,
        0 for chance.

        .. versionadded:: 0.2

    cv_results_ : dict of ndarray
        ``n_layers``, ``mean_test_score``, ``std_test_score``,
        ``split{i}_test_score`` and ``split{i}_selection_order`` (the fold's
        path, padded with -1 if it stopped early; the scores of budgets a fold
        did not reach are NaN).

    {ATTRS}

    See Also
    --------
    LOESSelector : The selector with a fixed budget.

    Notes
    -----
    .. deprecated:: 0.3
       :class:`LOESSelector`'s parameters given to ``LOESSelectorCV``
       directly, as before 0.3 (``LOESSelectorCV(variant="reference",
       random_state=0)``), still work until 0.5, with a ``FutureWarning``:
       they are set on ``selector``. Pass them through ``selector``.

    With ``fusion_scaling="layer"``, each fold scales the fused blocks with
    its own training rows, exactly as a ``Pipeline([LOESSelector(...),
    estimator])`` in ``GridSearchCV`` does when the calibration rows cover the
    training rows.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skloes import LOESSelector, LOESSelectorCV
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=100)
    >>> stack = rng.normal(size=(4, 100, 6))
    >>> stack[1, :, 0] += 3 * y
    >>> cv = LOESSelectorCV(LogisticRegression(), selector=LOESSelector(random_state=0),
    ...                     max_layers_to_select=3, cv=3).fit(stack, y)
    >>> cv.cv_results_["mean_test_score"].shape
    (3,)
    >>> int(cv.selection_order_[0])
    1
    """

    _parameter_constraints = {
        "estimator": "no_validation",
        "selector": [LOESSelector, None],
        "max_layers_to_select": [Interval(Integral, 1, None, closed="left")],
        "cv": ["cv_object"],
        "scoring": [str, callable, None],
        "n_jobs": [Integral, None],
        "budget_rule": [StrOptions({"anchored", "best", "one_se", "paired_se"})],
    }

    def __init__(
        self,
        estimator=None,
        *,
        selector=None,
        max_layers_to_select=10,
        cv=5,
        scoring=None,
        n_jobs=None,
        budget_rule="anchored",
        **selector_params,
    ):
        self.estimator = estimator
        self.selector = selector
        self.max_layers_to_select = max_layers_to_select
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.budget_rule = budget_rule
        for key, value in selector_params.items():
            if key not in _SELECTOR_PARAMS:
                raise TypeError(
                    f"LOESSelectorCV.__init__() got an unexpected keyword argument "
                    f"{key!r}"
                )
            setattr(self, key, value)

    def _selector_param(self, name):
        flat = self._flat_params()
        if name in flat:
            return flat[name]
        selector = LOESSelector() if self.selector is None else self.selector
        return getattr(selector, name)

    def _flat_params(self):
        """The deprecated flat selector parameters that are set."""
        return {key: vars(self)[key] for key in _SELECTOR_PARAMS if key in vars(self)}

    def get_params(self, deep=True):
        """Get parameters for this estimator.

        Parameters
        ----------
        deep : bool, default=True
            If True, also the parameters of the sub-estimators.

        Returns
        -------
        params : dict
            Parameter names mapped to their values (the deprecated flat
            selector parameters included when they are set).
        """
        return {**super().get_params(deep=deep), **self._flat_params()}

    def set_params(self, **params):
        """Set the parameters of this estimator.

        Parameters
        ----------
        **params : dict
            Estimator parameters (the deprecated flat selector parameters
            included).

        Returns
        -------
        self : object
            This estimator.
        """
        for key in [key for key in params if key in _SELECTOR_PARAMS]:
            setattr(self, key, params.pop(key))
        return super().set_params(**params)

    def _selector_params(self):
        """The parameters of the cross-validated selector (renames resolved)."""
        owner, flat = type(self).__name__, self._flat_params()
        if flat and self.selector is not None:
            raise ValueError(
                f"{owner}: set the selector's parameters on `selector` only; got "
                f"`selector` and {sorted(flat)}."
            )
        if flat:
            warnings.warn(
                f"{owner}: passing LOESSelector's parameters {sorted(flat)} directly "
                "is deprecated since 0.3 and will be removed in 0.5; pass "
                "`selector=LOESSelector(...)` instead.",
                FutureWarning,
                stacklevel=4,
            )
        selector = LOESSelector() if self.selector is None else clone(self.selector)
        selector.set_params(**flat)
        selector._validate_params()
        return resolved_params(selector)

    def _fold_selector(self, params, k_max, cfg, seed):
        """The selector each fold fits: the budget ``k_max`` on the final
        path's grid, on a fold's stack."""
        grid = "all" if cfg.grid is None else list(cfg.grid)
        fold = {**params, "n_layers_to_select": k_max, "task": cfg.task}
        fold["candidate_grid"] = grid
        fold.update(random_state=seed, layer_dim=None, memory=None)
        return LOESSelector(**fold)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, **params):
        """Score every budget by cross-validation, then select on all rows.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack or a flat table of ``layer_dim``-wide blocks.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Class labels or continuous targets (required).
        **params : dict
            ``groups``: the group of each sample; the folds keep each group
            on one side (an int ``cv`` becomes that many grouped folds). With
            ``sklearn.set_config(enable_metadata_routing=True)``, metadata is
            routed to the splitter, the estimator's ``fit`` and the scorer as
            they request it (``groups`` reach this selector from an outer
            ``cross_validate`` or ``Pipeline`` without ``set_fit_request``);
            ``sample_weight`` is refused: the LOES path weighs every row
            alike.

            .. versionadded:: 0.3

        Returns
        -------
        self : object
            The fitted selector.
        """
        owner = type(self).__name__
        if y is None:
            raise ValueError(f"{owner}: `y` is required; got None.")
        refuse_sample_weight(params, self, "the LOES path weighs every row alike")
        routed = route_fit(self, params, {"estimator": self._estimator()}, True)
        params = self._selector_params()
        own = params["n_layers_to_select"]  # the grid of the selector's budget
        stack, y_arr, cfg = self._path_config(X, y, params, own)
        if cfg.task == "label_free":
            raise ValueError(
                f"{owner}: `task` must not be 'label_free'; cross-validation needs "
                "targets."
            )
        classification = cfg.task == "classification"
        y_fit = y_arr if classification or y_arr.shape[1] > 1 else y_arr.ravel()
        first = 0 if cfg.include_embedding else 1
        k_max = min(self.max_layers_to_select, stack.shape[0] - first)
        if cfg.grid is not None:
            k_max = min(k_max, len(cfg.grid))
        if k_max < 1:
            raise ValueError(
                no_candidates_message(owner, stack.shape[0], cfg.include_embedding)
            )
        anchor = resolve_n_layers(own, k_max, owner, clip=True)
        estimator = self._estimator(cfg.task)
        scorer = check_scoring(estimator, scoring=self.scoring)
        seed = params["random_state"]  # one seed for every fold and the final path
        if isinstance(seed, np.random.RandomState):
            seed = int(seed.randint(np.iinfo(np.int32).max))
        selector = self._fold_selector(params, k_max, cfg, seed)
        probe = probe_scaling(
            estimator, self.scoring, params["fusion_scaling"], stack.shape[2]
        )
        metadata = FoldMetadata(routed.estimator.fit, routed.scorer.score)
        if metadata:  # the closed-form probe takes no metadata: fit it
            probe = None
        out = Parallel(n_jobs=self.n_jobs)(
            delayed(score_fold)(
                clone(selector),
                stack,
                y_fit,
                tr,
                te,
                k_max,
                estimator,
                scorer,
                probe,
                metadata,
            )
            for tr, te in self._splits(y_fit, classification, routed.splitter.split)
        )
        self._record_folds(out, k_max, stack.shape[0], anchor)
        path = loes_path(stack, y_arr, k_max, cfg, seed, owner, clip=True)
        return self._set_path(path, self.n_layers_to_select_, cfg)

    def _estimator(self, task="classification"):
        """The estimator scored on each budget (the ridge probe by default)."""
        return default_estimator(task) if self.estimator is None else self.estimator

    def _splits(self, y, classification, split_params):
        """The folds, grouped when ``groups`` reached ``fit``."""
        owner, groups = type(self).__name__, split_params.get("groups")
        groups = check_groups_array(groups, len(y), owner)
        cv = grouped_splitter(self.cv, y, classification, groups, self)
        return cv_splits(cv, y, owner, groups=groups)

    def get_metadata_routing(self):
        """Get the metadata routing of this selector.

        ``fit`` routes ``groups`` to the splitter (an int ``cv`` asks for
        them: it becomes grouped folds when they come), and what the
        estimator and the scorer request to them; see
        scikit-learn's `metadata routing
        <https://scikit-learn.org/stable/metadata_routing.html>`_.

        .. versionadded:: 0.3

        Returns
        -------
        routing : sklearn.utils.metadata_routing.MetadataRouter
            The routing of ``fit``.
        """
        estimator = self._estimator()
        return router_of(
            self,
            {"estimator": estimator},
            splitter=routing_splitter(self.cv),
            scorer=check_scoring(estimator, scoring=self.scoring),
        )

    def _record_folds(self, out, k_max, n_layers, anchor):
        """``cv_results_``, the chosen budget and the folds' picks at it
        (``anchor``: the selector's own budget)."""
        scores = np.array([s for s, _ in out])
        self.cv_results_ = {
            "n_layers": np.arange(1, k_max + 1),
            "mean_test_score": scores.mean(axis=0),  # NaN where a fold stopped
            "std_test_score": scores.std(axis=0),
        }
        for i, (s, order) in enumerate(out):
            self.cv_results_[f"split{i}_test_score"] = s
            padded = np.full(k_max, -1, dtype=np.intp)
            padded[: order.size] = order
            self.cv_results_[f"split{i}_selection_order"] = padded
        k = self.n_layers_to_select_ = choose_budget(scores, self.budget_rule, anchor)
        self.fold_selections_ = [order[:k] for _, order in out]
        self.selection_stability_ = (  # undefined on one layer
            selection_stability(self.fold_selections_, n_layers)
            if n_layers > 1
            else np.nan
        )


# The signature shows the parameters of LOESSelectorCV; the deprecated flat
# LOES parameters that ``**selector_params`` still accepts are not among them
# (scikit-learn reads parameters from the signature, and ``get_params`` adds
# the flat ones that are set).
LOESSelectorCV.__init__.__signature__ = inspect.signature(
    LOESSelectorCV.__init__
).replace(
    parameters=[
        p
        for p in inspect.signature(LOESSelectorCV.__init__).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
)
