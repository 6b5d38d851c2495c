"""The parameter and attribute sections of :class:`~skloes.report.LayerReport`'s
docstring (filled in by :func:`~skloes.utils._docstrings.fill_doc`), kept
apart from the code they describe so that the estimator's module reads as
code."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

__all__ = ["ATTRS", "PARAMS"]

PARAMS = """
    metrics : tuple of str, default=("dataset_entropy", "erank_sigma", \
            "isotropy", "intrinsic_dim")
        Dataset-level metrics to compute, by their names in the registry of
        :mod:`skloes.metrics`: ``"dataset_entropy"``, ``"erank_sigma"`` (also
        ``"effective_rank"``), ``"erank_sigma2"``, ``"isotropy"``,
        ``"intrinsic_dim"`` and ``"simplex_volume"`` (classification only).
    n_layers_to_select : int or "auto", default=4
        LOES budget K, clipped to the number of layers; ``"auto"`` chooses it
        with ``LOESSelectorCV``. Also the k of the last-k baseline.
    task : {"auto", "classification", "regression"}, default="auto"
        What ``y`` is; ``"auto"`` reads it from ``type_of_target(y)``, which
        takes integer-valued numbers (ratings 1-5, ages) for classes:
        ``"regression"`` reads them as a continuous target. Given to the
        selectors that take a ``task``.

        .. versionadded:: 0.3
    selector : estimator or None, default=None
        A layer selector used instead of the default ``LOESSelector``; it is
        fitted on the flat table of the layers, which declares its layout
        (see :ref:`data_contract`).
    baselines : tuple of str, default=("last_layer", "best_single_layer", \
            "last_k", "all_layers")
        Baselines of the summary, among those and ``"entropy_top_k"``.
    probe : estimator or None, default=None
        Probe scored per layer and on every fused selection; None means
        standardisation followed by ``LogisticRegression(C=0.01)``
        (classification; a strong penalty suits hundreds of standardised
        features on a few thousand rows, and converges several times faster
        than ``C=1``) or ``RidgeCV`` over 1e-3..1e3 (regression).
    fusion : {"auto", "average", "stack", "concatenate"}, default="auto"
        How every multi-layer method (LOES, last k, all layers) combines its
        layers, as :class:`~skloes.probe.LayerProbeClassifier`'s ``fusion``:
        ``"average"``, one ``probe`` per layer and the mean of their
        probabilities (predictions, for regression); ``"stack"``, a meta
        model on their out-of-fold outputs; ``"concatenate"``, one ``probe``
        on the concatenated layers; ``"auto"``, in each fold the one of
        those three the probe's closed-form leave-one-out rule picks on the
        fold's training rows (``fusion_`` says which). Every method is
        scored under it, so the recommendation compares like with like; a
        single layer is its own probe under every fusion (see :ref:`fusion`).

        The per-layer table's fitted probes are reused: an averaged method's
        score on a fold is the mean of its layers' held-out outputs there
        (the number a refit gives, without refitting). For ``"stack"`` and
        ``"auto"`` the inner folds of each fold are the other folds, so one
        fit per layer and pair of folds gives every fold's out-of-fold
        outputs (10 fits per layer for 5 folds, not 25); with 2 folds each
        fold's training rows are split in 5 instead.

        .. versionadded:: 0.3
    cv : int, default=5
        Number of folds (stratified and shuffled for classification), reduced
        to the smallest class size when that is smaller, and for regression
        to half the rows, so that every test fold has two rows at least (the
        R² of one row is undefined).

        .. versionchanged:: 0.3
           Regression folds keep two test rows (one-row folds made every
           score NaN).
    nested : bool, default=True
        If True, every summary method selects its layers inside each CV fold
        (a ``Pipeline`` of selector and probe): unbiased, one selector fit per
        fold, and the folds' picks give ``fold_selections_``. If False, each
        selector is fitted once on all rows and its layers are scored with the
        probe's CV; the best single layer is then the argmax of the per-layer
        table. The label-driven methods (LOES, best single layer) are then
        optimistic.

        .. versionchanged:: 0.2
           The default is True (it was False).
    entropy_order : float, default=1.0
        Rényi order α of ``dataset_entropy`` (the ``alpha`` of
        :func:`~skloes.metrics.dataset_entropy`).

        .. versionadded:: 0.3
           Formerly ``alpha``.
    normalization : str, default="maxEntropy"
        Normalisation of ``dataset_entropy``.
    max_prompts : int or None, default=1000
        Row subsample of the dataset-level metrics.
    random_state : int, RandomState instance or None, default=0
        Seeds the folds, the metric subsamples and the selectors.
    n_jobs : int or None, default=None
        Parallel jobs of the cross-validation.
    layer_dim : int or None, default=None
        Block width of a flat table ``X``. None reads the width the table
        declares (the output of :class:`~skloes.extraction.HiddenStatesTransformer`) and
        a plain table as one column per layer; see :ref:`data_contract`.
        Ignored for a stack.
    verbose : int, default=0
        Progress bars (needs tqdm) when >= 1.
"""

ATTRS = """
    task_ : {"classification", "regression"}
        The task: ``task``, or with ``"auto"`` read from ``type_of_target(y)``.
    scoring_ : str
        ``"accuracy"`` or ``"r2"``.
    layers_ : ndarray of shape (n_layers,)
        Layer indices.
    probe_scores_ : ndarray of shape (n_layers,)
        Mean CV score of the probe on each layer.
    probe_scores_std_ : ndarray of shape (n_layers,)
        Standard deviation over folds.
    metrics_ : dict of str to ndarray of shape (n_layers,)
        Every metric, computed and supplied.
    selected_layers_ : ndarray
        Layers chosen by the selector on all rows, ascending.
    selection_order_ : ndarray
        The same layers in the order they were picked.
    summary_ : list of dict
        One entry per method (``"loes"`` first): ``method``, ``layers``
        (chosen on all rows), ``score`` and ``score_std`` (mean and standard
        deviation of the CV score of the probe on those layers, or of the
        selection and the probe together when ``nested``), ``fold_scores``
        (the score on each fold, the folds shared by every method), and when
        ``nested`` ``fold_layers`` (the layers each fold picked), and
        ``fold_fusions`` (the fusion each fold's layers were combined by;
        None for a single layer).
    fusion_ : dict of str to dict
        For each method, how many folds combined its layers by each fusion
        (``{"average": 3, "stack": 2}``; empty for a single layer): with
        ``fusion="auto"``, what the probe's rule chose in each fold.

        .. versionadded:: 0.3
    comparison_ : MethodComparison
        The nested comparison: every method's layers and per-fold scores on
        the shared folds (``comparison_["loes"].fold_scores``), the objects
        ``summary_`` is written from.

        .. versionadded:: 0.3
    recommendation_ : Recommendation
        The cheapest method within noise of the best (see
        :ref:`report_recommendation`): ``method``, ``layers``, ``score``,
        its cost (``n_layers_kept``, ``deepest_layer``: the deepest block a
        prediction runs), ``best_method`` and ``best_score``, the paired
        ``difference`` to the best and its standard error
        (``difference_se``), and ``within_noise`` (every method within noise
        of the best). It reads as a dict too (``rec["method"]``), and
        ``recommendation_.text(n_splits_)`` says it in words.

        .. versionadded:: 0.3
    fold_selections_ : list of ndarray or None
        The layers the LOES selector picked in each CV fold, in pick order
        (``nested``, or a ``LOESSelectorCV`` selector's folds); else None.
    selection_stability_ : float
        Chance-corrected stability of ``fold_selections_`` over the layers
        (Nogueira et al., 2018): 1 when every fold picked the same layers, 0
        for chance; NaN without fold selections.
    selection_frequency_ : ndarray of shape (n_layers,) or None
        Fraction of the folds that picked each layer.
    selector_ : estimator
        The LOES selector fitted on all rows.
    n_splits_ : int
        Number of folds used.
    n_groups_ : int or None
        Number of distinct ``groups`` the folds were split by (None without).

        .. versionadded:: 0.3
"""
