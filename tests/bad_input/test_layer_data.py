"""Bad input to the estimators of layer data: every selector, probe and head
fitted on a layer stack (or a flat table of layers), their parameters, their
calls after fit, scales and sizes that must still give a result, degenerate
and overflowing layers, candidate grids and layer masks, and GeoRegLoss.

New in issue 34 (the section at the end): LOESSelectorCV's budget rules,
``max_layers_to_select``, ``cv`` and grouped folds; targets of every kind
(regressors given text, classifiers given a continuous target, bytes and
mixed labels); renamed parameters (a former name alone, with its new name,
set after, invalid, and one whose conversion fails).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok, warns  # noqa: E402

from skloes import (  # noqa: E402
    GeoRegClassifier,
    GeoRegLoss,
    LOESSelector,
    LOESSelectorCV,
    heads,
    selection,
)
from skloes.report import LayerReport  # noqa: E402
from skloes.selection import LastKSelector  # noqa: E402

# --------------------------------------------------------------------------
# Today's parameter names: a rename is a one-line change here
# --------------------------------------------------------------------------
K = "n_layers_to_select"  # baselines' budget (was k)
RIDGE_ALPHA = "ridge_alpha"  # RidgeProbe* penalty (was alpha)
ISOTROPY_WEIGHT = "alpha"  # LOES geometry weights (-> isotropy_weight,
REDUNDANCY_WEIGHT = "gamma"  # -> redundancy_weight)
GeoRegHead = GeoRegClassifier  # the classifier on layer features (split by #13)


def finite(result):
    values = result if isinstance(result, (int, float)) else np.asarray(result, float)
    assert np.all(np.isfinite(values)), values


def selects_from(n_layers):
    def check(est):
        support = est.get_support(indices=True)
        assert 1 <= support.size <= n_layers and support.max() < n_layers

    return check


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
RNG = np.random.RandomState(0)
N, L, D = 24, 4, 3
STACK = RNG.randn(L, N, D)
Y = np.arange(N) % 2
Y3 = np.arange(N) % 3


def with_value(value, where=(1, 2, 0)):
    X = STACK.copy()
    X[where] = value
    return X


# Inputs every layer-data estimator must refuse or handle: (id, X, y, outcome).
DATA_CASES = [
    ("empty_samples", np.empty((L, 0, D)), np.empty(0), err(r"sample|`X`")),
    ("empty_layers", np.empty((0, N, D)), Y, err(r"`X`|layer")),
    ("empty_width", np.empty((L, N, 0)), Y, err(r"`X`|feature")),
    ("one_d", STACK[0, :, 0], Y, err(r"`X`|2D|dimension")),
    ("four_d", STACK[None], Y, err(r"`X`|dimension")),
    ("nan", with_value(np.nan), Y, err(r"X.*NaN|NaN.*X")),
    ("inf", with_value(np.inf), Y, err(r"X.*(inf|infinity)")),
    ("strings", np.full((L, N, D), "a", dtype=object), Y, err(r"X|string|float")),
    ("complex", STACK.astype(complex), Y, err(r"[Cc]omplex")),
    ("y_short", STACK, Y[:-3], err(r"`y`|samples|inconsistent")),
    ("y_nan", STACK, np.where(Y == 0, np.nan, 1.0), err(r"y.*NaN|NaN.*y|`y`")),
    ("y_one_class", STACK, np.zeros(N, int), err(r"class(?!.*np\.)")),
    ("y_2d_labels", STACK, np.c_[Y, Y, Y].astype(str), err(r"`y`|y ")),
]


# Every layer-data estimator, built from today's parameter names. Budgets are
# set small so the tiny stack is a valid input.
LAYER_ESTIMATORS = {
    "LOESSelector": lambda: LOESSelector(n_layers_to_select=2, random_state=0),
    "LOESSelectorCV": lambda: LOESSelectorCV(
        selector=LOESSelector(random_state=0), max_layers_to_select=2, cv=3
    ),
    "LastLayerSelector": lambda: selection.LastLayerSelector(),
    "LastKSelector": lambda: selection.LastKSelector(**{K: 2}),
    "AllLayersSelector": lambda: selection.AllLayersSelector(),
    "RandomKSelector": lambda: selection.RandomKSelector(**{K: 2}, random_state=0),
    "BestSingleLayerSelector": lambda: selection.BestSingleLayerSelector(
        cv=3, random_state=0
    ),
    "ExhaustiveSubsetSelector": lambda: selection.ExhaustiveSubsetSelector(
        **{K: 2}, random_state=0
    ),
    "GreedyForwardSelector": lambda: selection.GreedyForwardSelector(
        **{K: 2}, random_state=0
    ),
    "MetricTopKSelector": lambda: selection.MetricTopKSelector(**{K: 2}),
    "RidgeProbeClassifier": lambda: selection.RidgeProbeClassifier(),
    "ScalarMixClassifier": lambda: heads.ScalarMixClassifier(
        max_epochs=2, proj_dim=4, random_state=0
    ),
    "GeoRegClassifier": lambda: GeoRegHead(
        layer_dim=D, max_epochs=2, proj_dim=4, random_state=0, device="cpu"
    ),
    "LayerReport": lambda: LayerReport(n_layers_to_select=2, cv=3, random_state=0),
}


# Label-blind selectors accept any y (it is ignored), so y cases are correct.
LABEL_BLIND = {
    "LastLayerSelector",
    "LastKSelector",
    "AllLayersSelector",
    "RandomKSelector",
    "MetricTopKSelector",
}
NEEDS_LABELS = {"y_short", "y_nan", "y_one_class", "y_2d_labels"}


# The ridge probes are probes on a flat feature table, not layer selectors.
FLAT_ONLY = {"RidgeProbeClassifier"}


def flat(est_name, X):
    """``X`` as the estimator takes it: a stack, or for a probe the flat table."""
    X = np.asarray(X)
    if est_name in FLAT_ONLY and X.ndim == 3:
        return X.transpose(1, 0, 2).reshape(X.shape[1], X.shape[0] * X.shape[2])
    return X


def _data_table():
    for est_name, make in LAYER_ESTIMATORS.items():
        for case, X, y, outcome in DATA_CASES:
            if est_name in LABEL_BLIND and case in NEEDS_LABELS and case != "y_short":
                outcome = ok()
            if est_name in FLAT_ONLY and case in ("empty_layers", "four_d"):
                outcome = err(r"`X`|sample|feature|dim")
            yield pytest.param(
                make, flat(est_name, X), y, outcome, id=f"{est_name}-{case}"
            )


@pytest.mark.parametrize("make, X, y, outcome", list(_data_table()))
def test_layer_data(make, X, y, outcome):
    outcome.check(lambda: make().fit(X, y))


# Sizes and scales that must give a correct result: (id, X, y).
SCALE_CASES = [
    ("tiny_values", STACK * 1e-30, Y),
    ("huge_values", STACK * 1e30, Y),
    ("offset", STACK + 1e8, Y),
    ("float32", STACK.astype(np.float32), Y),
    ("int_values", np.round(STACK * 10).astype(int), Y),
    ("one_feature", STACK[:, :, :1], Y),
    ("many_layers", RNG.randn(40, N, 2), Y),
    ("string_labels", STACK, np.where(Y == 0, "neg", "pos")),
    ("three_classes", STACK, Y3),
]
SCALE_ESTIMATORS = [
    "LOESSelector",
    "LastKSelector",
    "BestSingleLayerSelector",
    "GreedyForwardSelector",
    "MetricTopKSelector",
    "RidgeProbeClassifier",
    "LayerReport",
]


@pytest.mark.parametrize("est_name", SCALE_ESTIMATORS)
@pytest.mark.parametrize("case, X, y", SCALE_CASES, ids=[c[0] for c in SCALE_CASES])
def test_scales_and_sizes_give_a_result(est_name, case, X, y):
    est = LAYER_ESTIMATORS[est_name]()
    X = flat(est_name, X)
    if est_name == "LayerReport" and case == "one_feature":  # see MATRIX_EXCEPTIONS
        # dataset_entropy is undefined on 1-wide layers: NaN, with a warning
        return warns(
            r"dataset_entropy.*undefined on layers \[0, 1, 2, 3\]",
            lambda r: finite(r.probe_scores_),
        ).check(lambda: est.fit(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. degenerate layers
        est.fit(X, y)
    if hasattr(est, "get_support"):
        selects_from(X.shape[0])(est)
        finite(est.transform(X))
    elif hasattr(est, "predict"):
        assert set(np.unique(est.predict(X))) <= set(np.unique(y))
    else:
        finite(est.probe_scores_)


# A constant layer: every selector warns, naming it, and never selects it.
CONSTANT_LAYER = with_value(2.0, where=(1,))
WARNS_ON_CONSTANT = [
    "LOESSelector",
    "LOESSelectorCV",
    "BestSingleLayerSelector",
    "GreedyForwardSelector",
    "ExhaustiveSubsetSelector",
    "MetricTopKSelector",
]


def never_selects(layer):
    def check(est):
        assert layer not in est.get_support(indices=True)

    return check


@pytest.mark.parametrize("est_name", WARNS_ON_CONSTANT)
def test_constant_layer_warns(est_name):
    warns(r"layers \[1\]", never_selects(1)).check(
        lambda: LAYER_ESTIMATORS[est_name]().fit(CONSTANT_LAYER, Y)
    )


# Scale: a layer is degenerate by its own numbers (its
# spread against its own values and their precision), never against the
# largest layer; an overflow is an error naming the layer.
SIGNAL = STACK.copy()


def scaled(layer, factor, stack=SIGNAL):
    X = stack.copy()
    X[layer] = X[layer] * factor
    return X


def rounding_noise(layer=1):
    """Layer ``layer`` constant up to a few float32 ulps (batch-dependent kernels)."""
    X = SIGNAL.astype(np.float32)
    ulps = RNG.randint(-3, 4, size=X[layer].shape).astype(np.float32)
    X[layer] = 1.5 * (1 + ulps * np.finfo(np.float32).eps)
    return X


def no_degenerate_warning(est):
    assert not getattr(est, "degenerate_layers_", np.array([])).size


SCALE_SELECTORS = [
    "LOESSelector",
    "LOESSelectorCV",
    "BestSingleLayerSelector",
    "GreedyForwardSelector",
    "ExhaustiveSubsetSelector",
    "MetricTopKSelector",
]
LAYER_SCALE_CASES = [
    # (id, X, outcome for every selector in SCALE_SELECTORS)
    ("layer_times_1e6", scaled(1, 1e6), ok(no_degenerate_warning)),
    ("layer_times_1e12", scaled(1, 1e12), ok(no_degenerate_warning)),
    ("layer_times_1e-100", scaled(1, 1e-100), ok(no_degenerate_warning)),
    (
        "offset_1e8_plus_noise",
        SIGNAL + np.array([1e8, 0, 0, 0])[:, None, None],
        ok(no_degenerate_warning),
    ),
    (
        "float32_layer_times_1e6",
        scaled(1, 1e6).astype(np.float32),
        ok(no_degenerate_warning),
    ),
    ("layer_times_1e200", scaled(1, 1e200), err(r"layer 1 of `X` overflows")),
    ("layer_times_1e160", scaled(2, 1e160), err(r"layer 2 of `X` overflows")),
    (
        "float32_rounding_noise_layer",
        rounding_noise(),
        warns(r"layers \[1\] are degenerate", never_selects(1)),
    ),
    (
        "constant_layer_next_to_1e9",
        scaled(1, 1e9, with_value(2.0, where=(2,))),
        warns(r"layers \[2\] are degenerate", never_selects(2)),
    ),
    (
        "every_layer_constant",
        np.ones((L, N, D)),
        err(r"no candidate layers: every layer.*degenerate(?!.*n_layers_to_select)"),
    ),
]


@pytest.mark.parametrize("est_name", SCALE_SELECTORS)
@pytest.mark.parametrize(
    "X, outcome", [pytest.param(X, o, id=i) for i, X, o in LAYER_SCALE_CASES]
)
def test_layer_scale(est_name, X, outcome):
    outcome.check(lambda: LAYER_ESTIMATORS[est_name]().fit(X, Y))


@pytest.mark.parametrize("variant", ["robust", "reference"])
@pytest.mark.parametrize("factor", [1e6, 1e-6, 1e12])
def test_one_scaled_layer_leaves_the_others_candidates(variant, factor):
    """The robust variant scales each layer to unit variance: the selection of
    a stack with one layer scaled is the clean one. The reference variant is
    not scale-free, but every layer stays a candidate."""
    clean = LOESSelector(n_layers_to_select=2, variant=variant, random_state=0).fit(
        SIGNAL, Y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        est = LOESSelector(n_layers_to_select=2, variant=variant, random_state=0).fit(
            scaled(1, factor), Y
        )
    assert list(est.candidates_) == list(range(L)) == list(clean.candidates_)
    if variant == "robust":
        np.testing.assert_array_equal(est.selection_order_, clean.selection_order_)


ONE_LAYER = STACK[:1]
NO_EMBEDDING_CASES = [  # include_embedding=False on a one-layer stack
    ("LOESSelector", lambda: LOESSelector(include_embedding=False)),
    (
        "LOESSelectorCV",
        lambda: LOESSelectorCV(selector=LOESSelector(include_embedding=False), cv=3),
    ),
    (
        "BestSingleLayerSelector",
        lambda: selection.BestSingleLayerSelector(include_embedding=False, cv=3),
    ),
    (
        "GreedyForwardSelector",
        lambda: selection.GreedyForwardSelector(include_embedding=False, **{K: 1}),
    ),
    ("LastLayerSelector", lambda: selection.LastLayerSelector(include_embedding=False)),
    ("AllLayersSelector", lambda: selection.AllLayersSelector(include_embedding=False)),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in NO_EMBEDDING_CASES])
def test_no_embedding_on_one_layer_names_include_embedding(make):
    err(r"`include_embedding`=False leaves no candidate layer").check(
        lambda: make().fit(ONE_LAYER, Y)
    )


# --------------------------------------------------------------------------
# Parameters of the layer-data estimators: (id, make, X, y, outcome)
# --------------------------------------------------------------------------
PARAM_CASES = [
    (
        "LOES-budget_0",
        lambda: LOESSelector(n_layers_to_select=0),
        err("n_layers_to_select"),
    ),
    (
        "LOES-budget_float",
        lambda: LOESSelector(n_layers_to_select=1.5),
        err("n_layers_to_select"),
    ),
    (
        "LOES-budget_too_big",
        lambda: LOESSelector(n_layers_to_select=L + 1),
        err("n_layers_to_select"),
    ),
    ("LOES-variant", lambda: LOESSelector(variant="fast"), err("variant")),
    (
        "LOES-isotropy_weight_neg",
        lambda: LOESSelector(**{ISOTROPY_WEIGHT: -1.0}),
        err(ISOTROPY_WEIGHT),
    ),
    (
        "LOES-redundancy_weight_nan",
        lambda: LOESSelector(**{REDUNDANCY_WEIGHT: np.nan}),
        err(REDUNDANCY_WEIGHT),
    ),
    ("LOES-layer_dim_0", lambda: LOESSelector(layer_dim=0), err("layer_dim")),
    ("LOES-task", lambda: LOESSelector(task="ranking"), err("task")),
    ("LOES-random_state", lambda: LOESSelector(random_state="x"), err("random_state")),
    ("LOESCV-cv_1", lambda: LOESSelectorCV(cv=1), err(r"cv|n_splits")),
    ("LOESCV-cv_too_big", lambda: LOESSelectorCV(cv=N + 1), err(r"`cv`")),
    (
        "LOESCV-max_0",
        lambda: LOESSelectorCV(max_layers_to_select=0),
        err("max_layers_to_select"),
    ),
    ("LOESCV-scoring", lambda: LOESSelectorCV(scoring="nope", cv=3), err("scoring")),
    ("LastK-budget_0", lambda: selection.LastKSelector(**{K: 0}), err(rf"\b{K}\b")),
    (
        "LastK-budget_too_big",
        lambda: selection.LastKSelector(**{K: L + 1}),
        err(rf"\b{K}\b"),
    ),
    (
        "RandomK-budget_str",
        lambda: selection.RandomKSelector(**{K: "2"}),
        err(rf"\b{K}\b"),
    ),
    (
        "Greedy-budget_too_big",
        lambda: selection.GreedyForwardSelector(**{K: L + 1}),
        err(rf"\b{K}\b"),
    ),
    (
        "Greedy-validation_fraction",
        lambda: selection.GreedyForwardSelector(validation_fraction=1.5),
        err("validation_fraction"),
    ),
    (
        "Exhaustive-max_subsets_0",
        lambda: selection.ExhaustiveSubsetSelector(max_subsets=0),
        err("max_subsets"),
    ),
    (
        "Exhaustive-too_many_subsets",
        lambda: selection.ExhaustiveSubsetSelector(**{K: 2}, max_subsets=2),
        err("max_subsets"),
    ),
    (
        "BestSingle-cv_1",
        lambda: selection.BestSingleLayerSelector(cv=1),
        err(r"\bcv\b"),
    ),
    (
        "MetricTopK-metric",
        lambda: selection.MetricTopKSelector(metric="nope"),
        err("metric"),
    ),
    (
        "MetricTopK-scores_short",
        lambda: selection.MetricTopKSelector(
            metric="layer_scores", layer_scores=[1.0, 2.0], **{K: 1}
        ),
        err("layer_scores"),
    ),
    (
        "MetricTopK-scores_nan",
        lambda: selection.MetricTopKSelector(
            metric="layer_scores", layer_scores=[1.0, np.nan, 2.0, 3.0], **{K: 1}
        ),
        err("layer_scores"),
    ),
    (
        "MetricTopK-scores_missing",
        lambda: selection.MetricTopKSelector(metric="layer_scores", **{K: 1}),
        err("layer_scores"),
    ),
    (
        "Ridge-penalty_neg",
        lambda: selection.RidgeProbeClassifier(**{RIDGE_ALPHA: -1.0}),
        err(RIDGE_ALPHA),
    ),
    (
        "Ridge-penalty_str",
        lambda: selection.RidgeProbeClassifier(**{RIDGE_ALPHA: "cv"}),
        err(RIDGE_ALPHA),
    ),
    (
        "ScalarMix-max_epochs_0",
        lambda: heads.ScalarMixClassifier(max_epochs=0),
        err("max_epochs"),
    ),
    (
        "ScalarMix-device",
        lambda: heads.ScalarMixClassifier(device="gpu9"),
        err("device"),
    ),
    ("ScalarMix-lr_neg", lambda: heads.ScalarMixClassifier(lr=-1.0), err(r"\blr\b")),
    ("GeoReg-geo_weight_neg", lambda: GeoRegHead(geo_weight=-1.0), err("geo_weight")),
    ("GeoReg-device", lambda: GeoRegHead(device="gpu9", layer_dim=D), err("device")),
    ("GeoReg-batch_size_0", lambda: GeoRegHead(batch_size=0), err("batch_size")),
    (
        "GeoReg-layers_out_of_range",
        lambda: GeoRegHead(layers=[9], layer_dim=D),
        err("layers"),
    ),
    ("Report-cv_1", lambda: LayerReport(cv=1), err(r"\bcv\b")),
    ("Report-metric_unknown", lambda: LayerReport(metrics=["nope"]), err("metrics")),
    (
        "Report-baseline_unknown",
        lambda: LayerReport(baselines=["nope"]),
        err("baselines"),
    ),
    (
        "Report-budget_str",
        lambda: LayerReport(n_layers_to_select="all"),
        err("n_layers_to_select"),
    ),
]


# More classes than rows per fold (500 classes in 600 rows)
MANY_CLASSES = np.r_[np.arange(500), np.arange(100)]
MANY_CLASS_CASES = [
    (
        "LOESSelectorCV",
        lambda: LOESSelectorCV(
            selector=LOESSelector(random_state=0), max_layers_to_select=2, cv=5
        ),
        err(
            r"LOESSelectorCV: `cv`=5 stratified folds.*largest of the 500 classes has 2"
        ),
    ),
    (
        "BestSingleLayerSelector",
        lambda: selection.BestSingleLayerSelector(cv=3),
        err(r"BestSingleLayerSelector: `cv`=3 stratified folds"),
    ),
    (
        "LOESSelectorCV_kfold",
        lambda: LOESSelectorCV(
            selector=LOESSelector(random_state=0),
            max_layers_to_select=2,
            cv=__import__("sklearn").model_selection.KFold(3),
        ),
        ok(selects_from(L)),
    ),
]


@pytest.mark.parametrize(
    "make, outcome", [pytest.param(m, o, id=i) for i, m, o in MANY_CLASS_CASES]
)
def test_more_classes_than_fold_rows(make, outcome):
    X = np.random.RandomState(1).randn(L, MANY_CLASSES.size, D)
    outcome.check(lambda: make().fit(X, MANY_CLASSES))


@pytest.mark.parametrize(
    "make, outcome", [pytest.param(m, o, id=i) for i, m, o in PARAM_CASES]
)
def test_parameters(make, outcome):
    outcome.check(lambda: make().fit(STACK, Y))


# Calls after fit: (id, make, call, outcome)
def _fitted(est_name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LAYER_ESTIMATORS[est_name]().fit(flat(est_name, STACK), Y)


AFTER_FIT_CASES = [
    (
        "LOES-transform_other_width",
        "LOESSelector",
        lambda e: e.transform(STACK[:, :, :2]),
        err(r"`X`.*width|layers"),
    ),
    (
        "LOES-transform_other_layers",
        "LOESSelector",
        lambda e: e.transform(STACK[:3]),
        err(r"`X`.*layers"),
    ),
    (
        "LOES-transform_nan",
        "LOESSelector",
        lambda e: e.transform(with_value(np.nan)),
        err(r"X.*NaN"),
    ),
    (
        "LOES-transform_flat_for_stack",
        "LOESSelector",
        lambda e: e.transform(STACK[0]),
        err(r"`X`|layers"),
    ),
    (
        "LOES-unfitted",
        None,
        lambda e: LOESSelector().transform(STACK),
        err(r"not fitted"),
    ),
    (
        "Ridge-predict_other_width",
        "RidgeProbeClassifier",
        lambda e: e.predict(flat("RidgeProbeClassifier", STACK[:, :, :2])),
        err(r"`X`|features|width"),
    ),
    (
        "Ridge-predict_nan",
        "RidgeProbeClassifier",
        lambda e: e.predict(flat("RidgeProbeClassifier", with_value(np.nan))),
        err(r"X.*NaN"),
    ),
    (
        "ScalarMix-predict_other_layers",
        "ScalarMixClassifier",
        lambda e: e.predict(STACK[:2]),
        err(r"`X`|layers"),
    ),
    (
        "GeoReg-predict_inf",
        "GeoRegClassifier",
        lambda e: e.predict(with_value(np.inf)),
        err(r"X.*(inf|infinity)"),
    ),
    (
        "Report-save_to_a_file",
        "LayerReport",
        lambda e: e.save(__file__),
        err(r"folder|exists|directory", (OSError, ValueError)),
    ),
]


@pytest.mark.parametrize(
    "est, call, outcome",
    [pytest.param(e, c, o, id=i) for i, e, c, o in AFTER_FIT_CASES],
)
def test_after_fit(est, call, outcome):
    fitted = _fitted(est) if est else None
    outcome.check(lambda: call(fitted))


# --------------------------------------------------------------------------
# GeoRegLoss
# --------------------------------------------------------------------------
Z = torch.randn(12, 6, generator=torch.Generator().manual_seed(0))


def finite_tensor(result):
    assert bool(torch.isfinite(result))


LOSS_CASES = [
    (
        "nan",
        lambda: GeoRegLoss()(torch.full((12, 6), float("nan")), torch.arange(12) % 3),
        err(r"`z`.*NaN"),
    ),
    (
        "inf",
        lambda: GeoRegLoss()(
            Z.masked_fill(Z > 1.5, float("inf")), torch.arange(12) % 3
        ),
        err(r"`z`"),
    ),
    ("one_d", lambda: GeoRegLoss()(Z[0], None), err(r"`z`")),
    ("y_short", lambda: GeoRegLoss()(Z, torch.arange(5) % 3), err(r"`y`")),
    ("empty", lambda: GeoRegLoss()(Z[:0], None), err(r"`z`")),
    ("one_sample", lambda: GeoRegLoss()(Z[:1], torch.zeros(1)), ok(finite_tensor)),
    (
        "large_scale",
        lambda: GeoRegLoss()(Z * 1e12, torch.arange(12) % 3),
        ok(finite_tensor),
    ),
    (
        "overflowing_scale",
        lambda: GeoRegLoss()(Z * 1e25, torch.arange(12) % 3),
        err(r"overflows.*`z`"),
    ),
    ("weight_neg", lambda: GeoRegLoss(weight=-1.0), err("weight")),
    ("variant", lambda: GeoRegLoss(variant="x"), err("variant")),
    ("regression", lambda: GeoRegLoss()(Z, None), ok(finite_tensor)),
]


@pytest.mark.parametrize(
    "run, outcome", [pytest.param(r, o, id=i) for i, r, o in LOSS_CASES]
)
def test_georeg_loss(run, outcome):
    outcome.check(run)


@pytest.mark.parametrize("n_samples", [1, 2])
def test_loes_on_too_few_rows_blames_the_rows_not_max_samples(n_samples):
    from skloes.selection import LOESSelector

    X, y = STACK[:, :n_samples], np.arange(n_samples) % 2
    with pytest.raises(ValueError) as info:
        LOESSelector(n_layers_to_select=1, task="regression").fit(X, y.astype(float))
    assert "max_samples" not in str(info.value)
    assert re.search(r"sample", str(info.value))


GEOREG_LAYER_CASES = [
    ("numpy_mask", np.array([False, True, True]), ok()),
    (
        "mask_too_short",
        np.array([True, False]),
        err(r"`layers` is a boolean mask of 2"),
    ),
    ("mask_none", np.zeros(3, bool), err(r"selects no layer")),
    ("bool_scalar", True, err(r"`layers`")),
    ("mixed", [True, 2], err(r"`layers` mixes booleans")),
]


@pytest.mark.parametrize(
    "layers, outcome", [pytest.param(v, o, id=i) for i, v, o in GEOREG_LAYER_CASES]
)
def test_georeg_layers(layers, outcome):
    rng = np.random.RandomState(0)
    stack, y = rng.randn(3, 24, 4), np.arange(24) % 2
    est = GeoRegClassifier(
        layers=layers, max_epochs=1, proj_dim=4, device="cpu", random_state=0
    )

    def run():
        est.fit(stack, y)
        if isinstance(layers, np.ndarray) and layers.dtype == bool:
            assert est.layers_.tolist() == np.flatnonzero(layers).tolist()
        return est

    outcome.check(run)


def grid_is(expected):
    def check(est):
        assert est.grid_layers_.tolist() == expected, est.grid_layers_

    return check


GRID_CASES = [  # a 6-layer stack
    (
        "numpy_mask",
        np.array([False, True, False, True, True, False]),
        ok(grid_is([1, 3, 4])),
    ),
    ("list_mask", [True, True, False, False, False, True], ok(grid_is([0, 1, 5]))),
    ("support_of_a_fitted_selector", "support", ok(grid_is([4, 5]))),
    ("indices_0_1", np.array([0, 1]), ok(grid_is([0, 1]))),
    (
        "mask_too_short",
        np.array([True, False]),
        err(r"`candidate_grid` is a boolean mask of 2.*one per layer \(6"),
    ),
    (
        "mask_selects_none",
        [False] * 6,
        err(r"`candidate_grid` is a boolean mask that selects no layer"),
    ),
    ("mask_mixed_with_ints", [True, 3], err(r"`candidate_grid` mixes booleans")),
    ("mask_2d", np.ones((2, 3), bool), err(r"`candidate_grid` is not 1-D")),
]


@pytest.mark.parametrize("cv", [False, True], ids=["LOESSelector", "LOESSelectorCV"])
@pytest.mark.parametrize(
    "grid, outcome", [pytest.param(g, o, id=i) for i, g, o in GRID_CASES]
)
def test_candidate_grid(grid, outcome, cv):
    """A mask is read as a mask; LOESSelectorCV's picks stay in the grid."""
    from skloes import LOESSelector, LOESSelectorCV

    rng = np.random.RandomState(0)
    stack, y = rng.randn(6, 60, 4), np.arange(60) % 2
    if isinstance(grid, str):  # get_support() of a fitted selector, fed back
        grid = LastKSelector(n_layers_to_select=2).fit(stack, y).get_support()
    selector = LOESSelector(n_layers_to_select=2, candidate_grid=grid, random_state=0)
    if not cv:
        outcome.check(lambda: selector.fit(stack, y))
        return
    est = LOESSelectorCV(selector=selector, max_layers_to_select=2, cv=3)
    if isinstance(outcome, err):
        outcome.check(lambda: est.fit(stack, y))
        return
    picked = est.fit(stack, y).get_support(indices=True).tolist()
    grid = np.asarray(grid)
    allowed = np.flatnonzero(grid) if grid.dtype == bool else grid
    assert set(picked) <= set(allowed.tolist()), (picked, allowed)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpu_fails_at_fit_for_heads():
    from skloes import GeoRegClassifier
    from skloes.heads import ScalarMixClassifier

    stack = np.random.RandomState(0).randn(3, 12, 4)
    y = np.arange(12) % 2
    for est in (
        GeoRegClassifier(device="cuda", max_epochs=1),
        ScalarMixClassifier(device="cuda", max_epochs=1),
    ):
        with pytest.raises(ValueError, match="`device`"):
            est.fit(stack, y)


# -------------------------------------------------- 10. GeoRegLoss on NaN
def test_georeg_loss_on_nan_names_z():
    z = torch.randn(12, 6)
    z[3, 2] = float("nan")
    y = torch.arange(12) % 3
    with pytest.raises(ValueError, match="GeoRegLoss.*`z`.*NaN"):
        GeoRegLoss()(z, y)


# ------------------------------ 10. LOESSelectorCV, classes smaller than cv
def test_loes_cv_names_cv_when_a_class_is_smaller():
    rng = np.random.RandomState(0)
    stack = rng.randn(4, 30, 5)
    y = np.array([0] * 27 + [1] * 3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        LOESSelectorCV(
            selector=LOESSelector(random_state=0), cv=5, max_layers_to_select=2
        ).fit(stack, y)
    messages = [str(w.message) for w in record]
    ours = [m for m in messages if "`cv`=5" in m]
    assert len(ours) == 1
    assert re.search(r"LOESSelectorCV: class 1 has 3 samples", ours[0])
    assert not any("least populated class" in m for m in messages)  # the splitter's
    with pytest.raises(ValueError, match=r"LOESSelectorCV: `cv`=31 folds.*got 30"):
        LOESSelectorCV(cv=31).fit(stack, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        LOESSelectorCV(
            selector=LOESSelector(random_state=0), cv=3, max_layers_to_select=2
        ).fit(stack, y)


# ==========================================================================
# New in issue 34: budget rules, targets of every kind, renamed parameters
# ==========================================================================
BUDGET_STACK = np.random.RandomState(0).randn(5, 40, 4)
BUDGET_Y = np.arange(40) % 2
BUDGET_STACK[3, :, 0] += 2 * BUDGET_Y


def _loes_cv(**params):
    params = {"cv": 3, "max_layers_to_select": 3, **params}
    return LOESSelectorCV(selector=LOESSelector(random_state=0), **params)


def budget_in(low, high):
    def check(est):
        assert low <= est.n_layers_to_select_ <= high, est.n_layers_to_select_
        assert est.get_support(indices=True).size == est.n_layers_to_select_

    return check


BUDGET_CASES = [  # (id, make, fit params, outcome)
    ("rule_unknown", lambda: _loes_cv(budget_rule="median"), {}, err("budget_rule")),
    ("rule_none", lambda: _loes_cv(budget_rule=None), {}, err("budget_rule")),
    ("rule_upper_case", lambda: _loes_cv(budget_rule="BEST"), {}, err("budget_rule")),
    (
        "rule_anchored",
        lambda: _loes_cv(budget_rule="anchored"),
        {},
        ok(budget_in(1, 3)),
    ),
    ("rule_best", lambda: _loes_cv(budget_rule="best"), {}, ok(budget_in(1, 3))),
    ("rule_one_se", lambda: _loes_cv(budget_rule="one_se"), {}, ok(budget_in(1, 3))),
    (
        "rule_paired_se",
        lambda: _loes_cv(budget_rule="paired_se"),
        {},
        ok(budget_in(1, 3)),
    ),
    (
        "max_beyond_the_layers",
        lambda: _loes_cv(max_layers_to_select=50),
        {},
        ok(lambda est: est.cv_results_["n_layers"].max() <= 5),
    ),
    ("max_float", lambda: _loes_cv(max_layers_to_select=2.0), {}, err("max_layers")),
    ("max_auto", lambda: _loes_cv(max_layers_to_select="auto"), {}, err("max_layers")),
    (
        "max_numpy_int",
        lambda: _loes_cv(max_layers_to_select=np.int64(2)),
        {},
        ok(budget_in(1, 2)),
    ),
    ("cv_zero", lambda: _loes_cv(cv=0), {}, err(r"'cv' parameter")),
    ("cv_float", lambda: _loes_cv(cv=2.5), {}, err(r"'cv' parameter")),
    (
        "cv_more_folds_than_rows",
        lambda: _loes_cv(cv=__import__("sklearn").model_selection.KFold(50)),
        {},
        err(r"LOESSelectorCV: `cv`=50 folds need at least 50 samples; got 40"),
    ),
    (
        "cv_a_list_of_splits",
        lambda: _loes_cv(
            cv=list(__import__("sklearn").model_selection.KFold(3).split(BUDGET_Y))
        ),
        {},
        ok(budget_in(1, 3)),
    ),
    (
        "cv_grouped_without_groups",
        lambda: _loes_cv(cv=__import__("sklearn").model_selection.GroupKFold(3)),
        {},
        err(r"`cv`=GroupKFold splits by groups, but no `groups` reached it"),
    ),
    (
        "groups_fewer_than_folds",
        lambda: _loes_cv(),
        {"groups": np.array(["a", "b"] * 20)},
        err(r"`cv`=3 grouped folds need at least 3 groups; `groups` holds 2"),
    ),
    (
        "groups_a_single_one",
        lambda: _loes_cv(),
        {"groups": np.zeros(40)},
        err(r"`groups` must hold at least 2 groups to split by them; got only 0\.0\.$"),
    ),
    (
        "groups_with_a_missing_value",
        lambda: _loes_cv(),
        {"groups": np.r_[np.nan, np.arange(39) % 4]},
        err(r"sample 0 has none \(nan\)"),
    ),
    (
        "groups_four",
        lambda: _loes_cv(),
        {"groups": np.arange(40) % 4},
        ok(budget_in(1, 3)),
    ),
    (
        "sample_weight",
        lambda: _loes_cv(),
        {"sample_weight": np.ones(40)},
        err(r"`sample_weight` cannot be honoured: the LOES path weighs"),
    ),
    (
        "selector_not_loes",
        lambda: LOESSelectorCV(selector=LastKSelector(), cv=3),
        {},
        err(r"'selector' parameter of LOESSelectorCV"),
    ),
    (
        "selector_budget_beyond_the_layers",
        lambda: LOESSelectorCV(
            selector=LOESSelector(n_layers_to_select=9, random_state=0), cv=3
        ),
        {},
        ok(budget_in(1, 5)),
    ),
]


@pytest.mark.parametrize(
    "make, params, outcome",
    [pytest.param(m, p, o, id=i) for i, m, p, o in BUDGET_CASES],
)
def test_budget_rules(make, params, outcome):
    outcome.check(lambda: make().fit(BUDGET_STACK, BUDGET_Y, **params))


TARGET_STACK = np.random.RandomState(1).randn(3, 12, 4)
TEXT_TARGET = ["a", "b"] * 6
TARGET_CASES = [  # (id, make, y, outcome): a regressor or task given text...
    (
        "ridge_regressor_text",
        lambda: selection.RidgeProbeRegressor(),
        TEXT_TARGET,
        err(r"RidgeProbeRegressor: `y` must hold numbers.*got 'a'"),
    ),
    (
        "scalar_mix_regressor_text",
        lambda: heads.ScalarMixRegressor(max_epochs=1, device="cpu"),
        TEXT_TARGET,
        err(r"ScalarMixRegressor: `y` must hold numbers"),
    ),
    (
        "loes_regression_text",
        lambda: LOESSelector(task="regression", n_layers_to_select=1),
        TEXT_TARGET,
        err(r"LOESSelector: `y` must hold numbers"),
    ),
    (
        "loes_cv_regression_text",
        lambda: LOESSelectorCV(
            selector=LOESSelector(task="regression"), cv=2, max_layers_to_select=1
        ),
        TEXT_TARGET,
        err(r"LOESSelectorCV: `y` must hold numbers"),
    ),
    (
        "ridge_classifier_continuous",
        lambda: selection.RidgeProbeClassifier(),
        np.linspace(0, 1, 12),
        err(r"RidgeProbeClassifier: `y` must hold class labels; got continuous"),
    ),
    (
        "scalar_mix_classifier_continuous",
        lambda: heads.ScalarMixClassifier(max_epochs=1, device="cpu"),
        np.linspace(0, 1, 12),
        err(r"ScalarMixClassifier: `y` must hold class labels; got continuous"),
    ),
    (
        "georeg_continuous",
        lambda: GeoRegClassifier(layer_dim=4, max_epochs=1, device="cpu"),
        np.linspace(0, 1, 12),
        err(r"GeoRegClassifier: `y` must hold class labels; got continuous"),
    ),
    (
        "loes_bytes_labels",
        lambda: LOESSelector(n_layers_to_select=1),
        np.array([b"pos", b"neg"] * 6),
        err(r"LOESSelector: `y` holds bytes labels; decode them to str"),
    ),
    (
        "ridge_classifier_bytes_labels",
        lambda: selection.RidgeProbeClassifier(),
        np.array([b"pos", b"neg"] * 6, dtype=object),
        err(r"`y` holds bytes labels"),
    ),
    (
        "loes_mixed_labels",
        lambda: LOESSelector(n_layers_to_select=1),
        np.array([0, "a"] * 6, dtype=object),
        err(r"LOESSelector: `y` mixes text and number labels \(0 at row 0"),
    ),
    (
        "ridge_regressor_numeric_text",
        lambda: selection.RidgeProbeRegressor(),
        ["1.5", "2"] * 6,
        ok(lambda est: np.isfinite(est.predict(TARGET_STACK[0])).all()),
    ),
]


@pytest.mark.parametrize(
    "make, y, outcome", [pytest.param(m, y, o, id=i) for i, m, y, o in TARGET_CASES]
)
def test_targets_of_every_kind(make, y, outcome):
    est = make()
    X = TARGET_STACK[0] if "Ridge" in type(est).__name__ else TARGET_STACK
    outcome.check(lambda: est.fit(X, y))


RENAMED = [  # (id, make, outcome): former names, as scikit-learn deprecates
    (
        "former_name_alone",
        lambda: LastKSelector(k=2),
        warns(
            r"`k` was renamed `n_layers_to_select` in 0.2.*Its value 2 is used",
            lambda est: est.get_support(indices=True).size == 2,
            category=FutureWarning,
        ),
    ),
    (
        "former_and_new_name",
        lambda: LastKSelector(k=2, n_layers_to_select=3),
        err(r"set `n_layers_to_select` only; `k` is its former name"),
    ),
    (
        "former_name_set_after",
        lambda: LastKSelector().set_params(k=1),
        warns(r"`k` was renamed", category=FutureWarning),
    ),
    ("former_name_invalid", lambda: LastKSelector(k=0), err(r"'k' parameter")),
    (
        "loes_weight_former_name",
        lambda: LOESSelector(alpha=0.5, isotropy_weight=0.7),
        err(r"set `isotropy_weight` only; `alpha` is its former name"),
    ),
    (
        "report_entropy_order_former_name",
        lambda: LayerReport(
            alpha=2.0, metrics=("dataset_entropy",), n_layers_to_select=1, nested=False
        ),
        warns(
            r"`alpha` was renamed `entropy_order` in 0.3 and will be removed in 0.5",
            lambda r: r.get_params()["entropy_order"] == 1.0,
            category=FutureWarning,
        ),
    ),
    (
        "report_progress_not_a_flag",
        lambda: LayerReport(progress="yes", n_layers_to_select=1, nested=False),
        err(r"`progress` \(the former name of `verbose`\) must be a value `verbose`"),
    ),
]


@pytest.mark.parametrize(
    "make, outcome", [pytest.param(m, o, id=i) for i, m, o in RENAMED]
)
def test_renamed_parameters(make, outcome):
    outcome.check(lambda: make().fit(STACK, Y))
