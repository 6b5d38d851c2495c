"""The bad-input matrix: every public estimator, function and CLI option, fed
what a hostile but realistic user would feed it.

Each case asserts one of three outcomes:

- ``err(param)``: an exception whose message names the parameter (or input)
  at fault, on one line, with no raw third-party text in place of ours;
- ``warns(match)``: a warning, and then a result;
- ``ok(check)``: a correct result (``check`` says what correct is).

The tables are grouped per estimator; the ``make_*`` factories hold today's
parameter names, so a rename is a one-line change there.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from skloes import (  # noqa: E402
    GeoRegClassifier,
    GeoRegLoss,
    HiddenStatesTransformer,
    LOESSelector,
    LOESSelectorCV,
    datasets,
    heads,
    metrics,
    selection,
)
from skloes.report import LayerReport, layer_report  # noqa: E402

# --------------------------------------------------------------------------
# Today's parameter names: a rename is a one-line change here
# --------------------------------------------------------------------------
K = "n_layers_to_select"  # baselines' budget (was k)
RIDGE_ALPHA = "ridge_alpha"  # RidgeProbe* penalty (was alpha)
ISOTROPY_WEIGHT = "alpha"  # LOES geometry weights (-> isotropy_weight,
REDUNDANCY_WEIGHT = "gamma"  # -> redundancy_weight)
PROGRESS = "verbose"  # HiddenStatesTransformer
CLI_BUDGET = "--n-layers-to-select"  # skloes probe (was --k)
GeoRegHead = GeoRegClassifier  # the classifier on layer features (split by #13)


# --------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------
class Outcome:
    kind = "?"


class err(Outcome):  # noqa: N801 - reads as a table entry
    """An exception of ``exc`` whose message names ``param`` (a regex)."""

    kind = "error"

    def __init__(self, param, exc=(ValueError, TypeError)):
        self.param, self.exc = param, exc

    def check(self, run):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(self.exc) as info:
                run()
        message = str(info.value)
        assert re.search(self.param, message), (self.param, message)
        assert "Traceback" not in message


class warns(Outcome):  # noqa: N801
    """A warning matching ``match``; then ``then`` checks the result."""

    kind = "warning"

    def __init__(self, match, then=None):
        self.match, self.then = match, then

    def check(self, run):
        with pytest.warns(UserWarning, match=self.match):
            result = run()
        if self.then is not None:
            self.then(result)


class ok(Outcome):  # noqa: N801
    """A result; ``then`` checks it is correct."""

    kind = "correct"

    def __init__(self, then=None):
        self.then = then

    def check(self, run):
        result = run()
        if self.then is not None:
            self.then(result)


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


# Scale (issue 20, class 3): a layer is degenerate by its own numbers (its
# spread against its own values and their precision), never against the
# largest layer; an overflow is an error naming the layer.
SIGNAL = STACK.copy()
SIGNAL[3, :, 0] += 3 * Y
SIGNAL[2, :, 1] += 2 * Y


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


def selects(layers):
    def check(est):
        assert sorted(est.get_support(indices=True).tolist()) == layers

    return check


def all_of(*checks):
    def check(est):
        for c in checks:
            c(est)

    return check


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


# Issue 20, class 4: more classes than rows per fold (500 classes in 600 rows)
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


# layer_report's own entry points.
REPORT_CASES = [
    (
        "constant_layer",
        lambda: layer_report(
            with_value(1.0, where=(2,)), Y, n_layers_to_select=2, cv=3
        ),
        warns(r"layers \[2\]"),
    ),
    (
        "extra_metrics_wrong_length",
        lambda: layer_report(
            STACK, Y, n_layers_to_select=2, cv=3, extra_metrics={"m": np.ones(L + 1)}
        ),
        err("extra_metrics"),
    ),
    (
        "extra_metrics_clash",
        lambda: layer_report(
            STACK, Y, n_layers_to_select=2, cv=3, extra_metrics={"isotropy": np.ones(L)}
        ),
        err(r"extra_metrics|isotropy"),
    ),
    ("layer_dim_bad", lambda: layer_report(STACK[0], Y, layer_dim=2), err("layer_dim")),
    (
        "tiny_classes",
        lambda: layer_report(
            STACK[:, :5], [0, 0, 0, 1, 1], n_layers_to_select=1, nested=False
        ),
        ok(lambda r: r.n_splits_ == 2),
    ),
    (
        "tiny_nested",
        lambda: layer_report(STACK[:, :5], [0, 0, 0, 1, 1], n_layers_to_select=1),
        err(r"nested=False"),
    ),
    (
        "tiny_regression_nested",
        lambda: layer_report(STACK[:, :4], RNG.randn(4), n_layers_to_select=1, cv=2),
        err(r"nested"),
    ),
    (
        "singleton_class",
        lambda: layer_report(STACK[:, :5], [0, 0, 0, 0, 1]),
        err(r"class 1 has 1"),
    ),  # not np.int64(1)
    (
        "regression_target",
        lambda: layer_report(STACK, RNG.randn(N), n_layers_to_select=2, cv=3),
        ok(lambda r: r.task_ == "regression"),
    ),
]


@pytest.mark.parametrize(
    "run, outcome", [pytest.param(r, o, id=i) for i, r, o in REPORT_CASES]
)
def test_layer_report(run, outcome):
    outcome.check(run)


# --------------------------------------------------------------------------
# Metrics: every function of skloes.metrics
# --------------------------------------------------------------------------
M = RNG.randn(30, 6)
VIEWS_A, VIEWS_B = RNG.randn(3, 30, 6), RNG.randn(3, 30, 6)
TOKENS = [RNG.randn(5, 6) for _ in range(8)]
TOKEN_STACK = [[RNG.randn(5, 6) for _ in range(8)] for _ in range(2)]

ONE_MATRIX = {
    "dataset_entropy": metrics.dataset_entropy,
    "effective_rank": metrics.effective_rank,
    "isotropy": metrics.isotropy,
    "intrinsic_dim": metrics.intrinsic_dim,
}
MATRIX_CASES = [
    ("empty", np.empty((0, 6)), err(r"sample|`X`|empty")),
    ("one_row", M[:1], err(r"sample|`X`|rows|2")),
    ("one_d", M[0], err(r"`X`|dimension|2D")),
    ("nan", np.where(M > 2, np.nan, M), err(r"NaN")),
    ("inf", np.where(M > 2, np.inf, M), err(r"inf")),
    ("strings", np.full(M.shape, "a"), err(r"`X`.*numeric")),
    ("numeric_strings", M.astype(str), ok(finite)),
    ("huge_scale", M * 1e150, ok(finite)),
    ("tiny_scale", M * 1e-150, ok(finite)),
    ("one_column", M[:, :1], ok(finite)),
    ("wide", RNG.randn(5, 2000), ok(finite)),
]


# dataset_entropy's "maxEntropy" normalisation divides by log(min(N, D)).
MATRIX_EXCEPTIONS = {("dataset_entropy", "one_column"): err("normalization")}


@pytest.mark.parametrize("fn", list(ONE_MATRIX), ids=list(ONE_MATRIX))
@pytest.mark.parametrize(
    "case, X, outcome", [pytest.param(i, X, o, id=i) for i, X, o in MATRIX_CASES]
)
def test_matrix_metrics(fn, case, X, outcome):
    outcome = MATRIX_EXCEPTIONS.get((fn, case), outcome)
    outcome.check(lambda: ONE_MATRIX[fn](X))


METRIC_CASES = [
    ("entropy-alpha_neg", lambda: metrics.dataset_entropy(M, alpha=-1.0), err("alpha")),
    (
        "entropy-normalization",
        lambda: metrics.dataset_entropy(M, normalization="x"),
        err("normalization"),
    ),
    ("entropy-constant", lambda: metrics.dataset_entropy(np.ones((30, 6))), ok(finite)),
    ("erank-kind", lambda: metrics.effective_rank(M, kind="x"), err("kind")),
    (
        "erank-max_prompts_0",
        lambda: metrics.effective_rank(M, max_prompts=0),
        err("max_prompts"),
    ),
    ("isotropy-kind", lambda: metrics.isotropy(M, kind="x"), err("kind")),
    (
        "intrinsic_dim-constant",
        lambda: metrics.intrinsic_dim(np.ones((30, 6))),
        err(r"30 rows, 1 distinct"),
    ),
    (
        "intrinsic_dim-pairs_of_duplicates",
        lambda: metrics.intrinsic_dim(np.repeat(M[:5], 2, axis=0)),
        err(
            r"`X` has 10 rows, 5 distinct, and 0 "
            r"without a duplicate"
        ),
    ),
    (
        "intrinsic_dim-stack_duplicates",
        lambda: metrics.intrinsic_dim(np.stack([M[:10], np.repeat(M[:5], 2, axis=0)])),
        err(r"layer 1 of `X` has 10 rows, 5 distinct"),
    ),
    (
        "layer_similarity-kind",
        lambda: metrics.layer_similarity(STACK, kind="x"),
        err("kind"),
    ),
    (
        "layer_similarity-one_matrix",
        lambda: metrics.layer_similarity(M),
        ok(lambda r: np.allclose(r, 1)),
    ),
    (
        "layer_similarity-nan",
        lambda: metrics.layer_similarity(with_value(np.nan)),
        err(r"NaN"),
    ),
    (
        "layer_similarity-ok",
        lambda: metrics.layer_similarity(STACK),
        ok(lambda r: np.allclose(np.diag(r), 1)),
    ),
    (
        "simplex_volume-y_short",
        lambda: metrics.simplex_volume(M, Y3[:10]),
        err(r"`y`|y"),
    ),
    (
        "simplex_volume-two_classes",
        lambda: metrics.simplex_volume(M, np.arange(30) % 2),
        ok(lambda r: r == 0.0),
    ),  # documented: zero with fewer than 3 classes
    (
        "simplex_volume-nan",
        lambda: metrics.simplex_volume(np.where(M > 2, np.nan, M), np.arange(30) % 3),
        err(r"NaN"),
    ),
    (
        "infonce-shape_mismatch",
        lambda: metrics.infonce(VIEWS_A, VIEWS_B[:, :20]),
        err(r"`A`|`B`|shape"),
    ),
    (
        "infonce-temperature_0",
        lambda: metrics.infonce(VIEWS_A, VIEWS_B, temperature=0),
        err("temperature"),
    ),
    (
        "infonce-nan",
        lambda: metrics.infonce(np.where(VIEWS_A > 2, np.nan, VIEWS_A), VIEWS_B),
        err(r"NaN"),
    ),
    ("lidar-one_view", lambda: metrics.lidar([VIEWS_A]), err(r"views")),
    ("lidar-empty", lambda: metrics.lidar([]), err(r"views")),
    ("smooth_rank-one_view", lambda: metrics.smooth_rank([VIEWS_A]), err(r"views")),
    (
        "dime-n_permutations_0",
        lambda: metrics.dime(VIEWS_A, VIEWS_B, n_permutations=0),
        err("n_permutations"),
    ),
    (
        "dime-inf",
        lambda: metrics.dime(np.where(VIEWS_A > 2, np.inf, VIEWS_A), VIEWS_B),
        err(r"inf"),
    ),
    ("prompt_entropy-empty", lambda: metrics.prompt_entropy([]), err(r"tokens|empty")),
    (
        "prompt_entropy-nan",
        lambda: metrics.prompt_entropy([np.full((4, 6), np.nan)] * 3),
        err(r"NaN"),
    ),
    (
        "prompt_entropy-one_token",
        lambda: metrics.prompt_entropy([RNG.randn(1, 6)] * 4),
        err(r"token"),
    ),
    ("prompt_entropy-ok", lambda: metrics.prompt_entropy(TOKENS), ok(finite)),
    (
        "curvature-two_tokens",
        lambda: metrics.curvature([RNG.randn(2, 6)] * 4),
        err(r"token"),
    ),
    ("curvature-ok", lambda: metrics.curvature(TOKENS), ok(finite)),
    (
        "prompt_vectors-ragged_width",
        lambda: metrics.prompt_vectors([RNG.randn(3, 6), RNG.randn(3, 5)]),
        err(r"tokens|width|dim"),
    ),
    (
        "augmented_views-n_views_0",
        lambda: metrics.augmented_views(["a b"], n_views=0),
        err("n_views"),
    ),
    ("augmented_views-one_text", lambda: metrics.augmented_views("a b"), err("texts")),
    (
        "augmented_views-empty_text",
        lambda: metrics.augmented_views(["", "a"]),
        ok(lambda r: len(r) == 2),
    ),
    (
        "TokenMetricPooling-pooling",
        lambda: metrics.TokenMetricPooling(pooling="x")(
            torch.randn(2, 3, 4), torch.ones(2, 3)
        ),
        err("pooling"),
    ),
]


@pytest.mark.parametrize(
    "run, outcome", [pytest.param(r, o, id=i) for i, r, o in METRIC_CASES]
)
def test_metric_functions(run, outcome):
    outcome.check(run)


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


# --------------------------------------------------------------------------
# HiddenStatesTransformer: inputs, models, parameters, cache
# --------------------------------------------------------------------------
TEXTS = ["a good movie", "a dull plot", "fun", "the story was great"]


def _hst(path, **params):
    params.setdefault("device", "cpu")
    params.setdefault(PROGRESS, False)
    return HiddenStatesTransformer(path, **params)


def _frame(columns):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(columns)


def n_rows(n):
    def check(out):
        assert out.shape[1] == n and np.isfinite(out).all()

    return check


HST_INPUT_CASES = [
    ("none", lambda: None, err(r"`X`")),
    ("one_string", lambda: "a good movie", err(r"`X`")),
    ("bytes", lambda: b"a good movie", err(r"`X`")),
    ("empty_list", lambda: [], err(r"`X`.*empty")),
    ("ints", lambda: [1, 2, 3], err(r"`X`.*strings")),
    ("bytes_items", lambda: [b"a", b"b"], err(r"`X`.*strings")),
    ("none_item", lambda: ["a", None], err(r"`X`.*item 1")),
    ("nested_lists", lambda: [["a", "b"], ["c"]], err(r"`X`")),
    (
        "frame_two_columns",
        lambda: _frame({"text": TEXTS, "id": range(4)}),
        err(r"`X`.*2 columns"),
    ),
    (
        "array_two_columns",
        lambda: np.array([TEXTS, TEXTS], dtype=object).T,
        err(r"`X`.*2 columns"),
    ),
    ("numeric_array", lambda: np.zeros((4, 3)), err(r"`X`.*strings")),
    ("surrogate", lambda: ["ok", "x \udc80 y"], err(r"`X` item 1.*surrogate")),
    ("frame_one_column", lambda: _frame({"text": TEXTS}), ok(n_rows(4))),
    ("series", lambda: _frame({"text": TEXTS})["text"], ok(n_rows(4))),
    ("generator", lambda: (t for t in TEXTS), ok(n_rows(4))),
    ("tuple", lambda: tuple(TEXTS), ok(n_rows(4))),
    ("numpy_strings", lambda: np.array(TEXTS), ok(n_rows(4))),
    ("empty_string", lambda: ["", "a"], ok(n_rows(2))),
    ("whitespace", lambda: ["   ", "\n\t"], ok(n_rows(2))),
    ("unknown_words", lambda: ["zzzz qqqq", "日本語 😀"], ok(n_rows(2))),
    ("very_long", lambda: ["good " * 10000], ok(n_rows(1))),
    ("nul_character", lambda: ["a\x00b"], ok(n_rows(1))),
    ("duplicates", lambda: ["fun"] * 50, ok(n_rows(50))),
]


@pytest.mark.parametrize(
    "make_X, outcome", [pytest.param(x, o, id=i) for i, x, o in HST_INPUT_CASES]
)
def test_hst_inputs(tiny_model_path, make_X, outcome):
    outcome.check(lambda: _hst(tiny_model_path).fit_transform(make_X()))


@pytest.fixture(scope="module")
def broken_models(tiny_model_path, tmp_path_factory):
    """Model folders broken in the ways a download or a user breaks them."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("broken")

    def copy(name):
        shutil.copytree(tiny_model_path, root / name)
        return root / name

    (root / "empty").mkdir()
    copy("bad_json").joinpath("config.json").write_text('{"model_type": "be')
    copy("list_json").joinpath("config.json").write_text("[]")
    copy("no_type").joinpath("config.json").write_text("{}")
    copy("unknown_type").joinpath("config.json").write_text('{"model_type": "nope"}')
    weights = copy("half_weights") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    copy("empty_weights").joinpath("model.safetensors").write_bytes(b"")
    copy("no_weights").joinpath("model.safetensors").unlink()
    bin_only = copy("bin_only")
    bin_only.joinpath("model.safetensors").rename(bin_only / "pytorch_model.bin")
    remote = copy("remote")
    config = json.loads((remote / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_x.XModel"}
    (remote / "config.json").write_text(json.dumps(config))
    (remote / "modeling_x.py").write_text("raise RuntimeError('ran')\n")
    no_tok = copy("no_tokenizer")
    for name in os.listdir(no_tok):
        if "token" in name or name == "vocab.txt":
            os.remove(no_tok / name)
    (root / "a_file").write_text("x")
    decoy = copy("bin_and_decoy")
    decoy.joinpath("model.safetensors").rename(decoy / "pytorch_model.bin")
    decoy.joinpath("decoy.safetensors").write_bytes(b"\x02" + b"\x00" * 7 + b"{}")
    sharded = copy("shard_missing")
    sharded.joinpath("model.safetensors").rename(sharded / "model-00001.safetensors")
    sharded.joinpath("model.safetensors.index.json").write_text(
        json.dumps(
            {
                "weight_map": {
                    "a": "model-00001.safetensors",
                    "b": "model-00002.safetensors",
                }
            }
        )
    )
    copy("bad_index").joinpath("model.safetensors.index.json").write_text("{")
    inconsistent = copy("remote_inconsistent")
    (inconsistent / "configuration_x.py").write_text(
        "from transformers import BertConfig\n\n\nclass XConfig(BertConfig):\n"
        "    model_type = 'xbert'\n"
    )
    (inconsistent / "modeling_x.py").write_text(  # its config_class is another
        "from transformers import BertConfig, BertModel\n\n\n"
        "class XModel(BertModel):\n    config_class = BertConfig\n"
    )
    config = json.loads((inconsistent / "config.json").read_text())
    config["model_type"] = "xbert"
    config["auto_map"] = {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModel": "modeling_x.XModel",
    }
    (inconsistent / "config.json").write_text(json.dumps(config))
    return root


HST_MODEL_CASES = [
    ("missing_folder", "nowhere", err(r"`model`.*does not exist")),
    ("a_file", "a_file", err(r"`model`.*is a file, not a model folder")),
    ("empty_folder", "empty", err(r"`model`.*config.json")),
    ("truncated_config", "bad_json", err(r"`model`.*config.json")),
    ("config_not_object", "list_json", err(r"`model`.*config.json")),
    ("config_no_type", "no_type", err(r"`model`")),
    ("config_unknown_type", "unknown_type", err(r"`model`")),
    ("truncated_weights", "half_weights", err(r"`model`.*model.safetensors")),
    ("empty_weights", "empty_weights", err(r"`model`.*model.safetensors")),
    ("no_weights", "no_weights", err(r"`model`.*safetensors")),
    ("pickle_weights_only", "bin_only", err(r"`model`.*safetensors")),
    ("remote_code_untrusted", "remote", err(r"trust_remote_code")),
    ("no_tokenizer", "no_tokenizer", err(r"`model`.*tokenizer vocabulary")),
    (
        "bin_and_decoy_safetensors",
        "bin_and_decoy",
        err(r"`model`.*no model.safetensors.*decoy.safetensors, pytorch_model.bin"),
    ),
    (
        "shard_missing",
        "shard_missing",
        err(r"`model`.*lacks weight shards \['model-00002.safetensors'\]"),
    ),
    ("bad_shard_index", "bad_index", err(r"`model`.*invalid model.safetensors.index")),
]


@pytest.mark.parametrize(
    "folder, outcome", [pytest.param(f, o, id=i) for i, f, o in HST_MODEL_CASES]
)
def test_hst_models(broken_models, folder, outcome):
    outcome.check(lambda: _hst(str(broken_models / folder)).fit_transform(TEXTS))


# Issue 20, class 4: a model that cannot load fails at fit (headers only are
# read), with an error that blames what is wrong.
FIT_TIME_MODEL_CASES = [
    "half_weights",
    "empty_weights",
    "no_weights",
    "bin_only",
    "bin_and_decoy",
    "shard_missing",
    "bad_index",
]


@pytest.mark.parametrize("folder", FIT_TIME_MODEL_CASES)
def test_hst_model_that_cannot_load_fails_at_fit(broken_models, folder):
    err(r"`model`").check(lambda: _hst(str(broken_models / folder)).fit(TEXTS))


MODEL_PATH_CASES = [
    (
        "weights_file",
        "model.safetensors",
        err(r"`model`.*is a file.*model.safetensors is a file of the model folder"),
    ),
    ("config_file", "config.json", err(r"`model`.*is a file.*pass that folder")),
]


@pytest.mark.parametrize(
    "name, outcome", [pytest.param(n, o, id=i) for i, n, o in MODEL_PATH_CASES]
)
def test_hst_model_path_of_a_file_in_the_folder(tiny_model_path, name, outcome):
    outcome.check(lambda: _hst(os.path.join(tiny_model_path, name)).fit(TEXTS))


def test_trusted_remote_code_that_fails_is_wrapped(broken_models):
    hst = _hst(str(broken_models / "remote_inconsistent"), trust_remote_code=True)
    err(
        r"`model`.*cannot be loaded by transformers \(its own code.*config_class"
    ).check(lambda: hst.fit_transform(TEXTS))


REMOTE_FRONT_ENDS = [  # each says what its user can do
    (
        "GeoRegFineTuner",
        lambda path: __import__("skloes")
        .GeoRegFineTuner(path, max_epochs=1, device="cpu")
        .fit(TEXTS, [0, 1, 0, 1]),
        r"GeoRegFineTuner does not run a model's own code(?!.*trust_remote_code=True)",
    ),
    (
        "LayerProbeClassifier",
        lambda path: __import__("skloes.probe")
        .probe.LayerProbeClassifier(path, device="cpu")
        .fit(TEXTS, [0, 1, 0, 1]),
        r"extractor_params=\{'trust_remote_code': True\}",
    ),
    (
        "HiddenStatesTransformer",
        lambda path: _hst(path).fit(TEXTS),
        r"pass `trust_remote_code=True` only if you trust it",
    ),
]


@pytest.mark.parametrize(
    "run, needle", [pytest.param(r, n, id=i) for i, r, n in REMOTE_FRONT_ENDS]
)
def test_remote_code_refusal_names_what_the_caller_can_do(broken_models, run, needle):
    err(needle).check(lambda: run(str(broken_models / "remote")))


def test_hst_model_of_wrong_type():
    err(r"'model' parameter").check(lambda: _hst(3).fit(TEXTS))


HST_PARAM_CASES = [
    ("layers_too_deep", {"layers": [5]}, err(r"`layers`")),
    ("layers_too_negative", {"layers": -9}, err(r"`layers`")),
    ("layers_empty", {"layers": []}, err(r"`layers`")),
    ("layers_float", {"layers": [0.5]}, err(r"`layers`|layers")),
    ("layers_duplicates", {"layers": [1, 1, -2]}, ok(lambda r: r.shape[0] == 1)),
    ("layers_numpy", {"layers": np.array([0, 2])}, ok(lambda r: r.shape[0] == 2)),
    ("batch_size_0", {"batch_size": 0}, err("batch_size")),
    ("max_length_0", {"max_length": 0}, err("max_length")),
    ("max_length_1", {"max_length": 1}, err(r"`max_length` must be at least 3")),
    ("max_length_huge", {"max_length": 10**9}, ok(finite)),
    ("pooling", {"pooling": "median"}, err("pooling")),
    ("callable_pooling_bad_shape", {"pooling": lambda h, m: h}, err("pooling")),
    ("output", {"output": "table"}, err("output")),
    ("dtype", {"dtype": "float64"}, err("dtype")),
    ("device_bogus", {"device": "gpu9"}, err("device")),
    ("device_number", {"device": 3}, err("device")),
    ("device_cuda_99", {"device": "cuda:99"}, err("device")),
    ("verbose", {PROGRESS: "yes"}, err(PROGRESS)),
    (
        "cache_is_a_file",
        {"cache": __file__},
        warns(
            r"cache.*"
            r"(exists|directory|Not a)"
        ),
    ),
    ("cache_under_a_file", {"cache": os.path.join(__file__, "sub")}, warns(r"cache")),
    ("cache_wrong_type", {"cache": 3}, err("cache")),
]


@pytest.mark.parametrize(
    "params, outcome", [pytest.param(p, o, id=i) for i, p, o in HST_PARAM_CASES]
)
def test_hst_parameters(tiny_model_path, params, outcome):
    outcome.check(lambda: _hst(tiny_model_path, **params).fit_transform(TEXTS))


# --------------------------------------------------------------------------
# What the model can see (issue 20, class 1): a max_length that leaves no
# token of the text is refused at fit, naming the smallest useful value;
# every text is truncated at the model's limit.
# --------------------------------------------------------------------------
WORDS = ["good movie", "dull plot", "fun film", "the story", "awful actor"]


@pytest.fixture(scope="module")
def text_models(tiny_model_path, tmp_path_factory):
    """Tokenizers that add 2 (BERT), 0 (Llama) and 1 (Llama with <s>) special
    tokens, and a BERT whose tokenizer states no limit (only its positions do)."""
    import json
    import shutil

    from skloes.models._testing import make_tiny_llama

    root = tmp_path_factory.mktemp("text-models")
    unbounded = root / "bert_no_tokenizer_limit"
    shutil.copytree(tiny_model_path, unbounded)
    config = unbounded / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data.pop("model_max_length", None)
    config.write_text(json.dumps(data))
    return {
        "bert": tiny_model_path,
        "bert_unbounded": str(unbounded),
        "llama": make_tiny_llama(root / "llama"),
        "llama_bos": make_tiny_llama(root / "llama_bos", add_bos=True),
    }


def distinct_rows(n):
    def check(out):
        assert len(np.unique(out[-1].round(6), axis=0)) == n, out[-1]

    return check


MAX_LENGTH_CASES = [
    # (id, model, params, texts, outcome)
    (
        "bert_1",
        "bert",
        {"max_length": 1},
        WORDS,
        err(r"`max_length` must be at least 3.*\[CLS\], \[SEP\].*got 1"),
    ),
    (
        "bert_2",
        "bert",
        {"max_length": 2},
        WORDS,
        err(r"`max_length` must be at least 3.*got 2"),
    ),
    (
        "bert_1_long_text",
        "bert",
        {"max_length": 1},
        ["good " * 600],
        err(r"`max_length` must be at least 3"),
    ),
    ("bert_3_sees_one_word", "bert", {"max_length": 3}, WORDS, ok(distinct_rows(5))),
    ("llama_1", "llama", {"max_length": 1}, WORDS, ok(distinct_rows(5))),
    (
        "llama_bos_1",
        "llama_bos",
        {"max_length": 1},
        WORDS,
        err(r"`max_length` must be at least 2.*<s>"),
    ),
    ("llama_bos_2", "llama_bos", {"max_length": 2}, WORDS, ok(distinct_rows(5))),
    (
        "no_tokenizer_limit_long_text",
        "bert_unbounded",
        {"max_length": 10**6},
        ["good " * 600],
        ok(n_rows(1)),
    ),
    ("llama_long_text", "llama", {"max_length": 10**6}, ["fun " * 600], ok(n_rows(1))),
]


@pytest.mark.parametrize(
    "model, params, texts, outcome",
    [pytest.param(m, p, t, o, id=i) for i, m, p, t, o in MAX_LENGTH_CASES],
)
def test_max_length(text_models, model, params, texts, outcome):
    outcome.check(lambda: _hst(text_models[model], **params).fit_transform(texts))


@pytest.mark.parametrize("model", ["bert", "bert_unbounded", "llama"])
def test_max_length_beyond_the_model_limit_is_the_limit(text_models, model):
    """Positions 64: max_length 10**6 truncates where max_length 64 does."""
    texts = ["good " * 200, "fun film"]
    huge = _hst(text_models[model], max_length=10**6)
    np.testing.assert_array_equal(
        huge.fit_transform(texts),
        _hst(text_models[model], max_length=64).fit_transform(texts),
    )
    assert huge.max_length_ == 64


def test_max_length_refused_by_every_text_estimator(tiny_model_path):
    from skloes import GeoRegFineTuner
    from skloes.probe import LayerProbeClassifier

    y = [0, 1, 0, 1, 0]
    err(r"`max_length` must be at least 3").check(
        lambda: GeoRegFineTuner(
            tiny_model_path, max_length=2, max_epochs=1, device="cpu"
        ).fit(WORDS, y)
    )
    err(r"`max_length` must be at least 3").check(
        lambda: LayerProbeClassifier(tiny_model_path, max_length=1, device="cpu").fit(
            WORDS, y
        )
    )


def test_hst_transform_before_fit(tiny_model_path):
    err("not fitted").check(lambda: _hst(tiny_model_path).transform(TEXTS))


def test_hst_interrupted_cache_write_leaves_a_working_cache(tiny_model_path, tmp_path):
    """A run killed mid-write leaves a ``.part`` file: ignored, later pruned."""
    from skloes import prune_cache

    expected = _hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    entry = next(p for p in tmp_path.rglob("*.npy"))
    part = entry.parent / ".tmp-killed.part"
    part.write_bytes(entry.read_bytes()[:50])
    entry.unlink()
    np.testing.assert_array_equal(
        _hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS), expected
    )
    os.utime(part, (1e9, 1e9))
    prune_cache(tmp_path, older_than=10**12)
    assert not part.exists()


# --------------------------------------------------------------------------
# What was computed (issue 20, class 2): a cache entry carries its dtype,
# shape and a digest of its key and payload, checked on read; a bad entry is
# recomputed and rewritten. A fitted extractor refuses changed or gone
# weights when it loads them again.
# --------------------------------------------------------------------------
def _other_entry(entry, good, entries):
    return next(e for e in entries if e != entry).read_bytes()


def _npy(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


ENTRY_DAMAGE = {  # (entry path, its good bytes, every entry) -> new bytes
    "foreign_float64": lambda e, g, es: _npy(RNG.randn(3, 8) * 3),
    "garbage_behind_header": lambda e, g, es: g[:128]
    + RNG.randn(24).astype(np.float32).tobytes()
    + g[-20:],
    "plain_npy_float32": lambda e, g, es: _npy(RNG.randn(3, 8).astype(np.float32)),
    "float16_right_shape": lambda e, g, es: _npy(RNG.randn(3, 8).astype(np.float16)),
    "one_flipped_byte": lambda e, g, es: g[:140] + bytes([g[140] ^ 1]) + g[141:],
    "another_inputs_entry": _other_entry,
    "fortran_header": lambda e, g, es: g.replace(
        b"'fortran_order': False", b"'fortran_order': True "
    ),
    "bytes_after_trailer": lambda e, g, es: g + b"\x00" * 8,
    "transposed_header": lambda e, g, es: g.replace(b"(3, 8)", b"(8, 3)"),
}


@pytest.mark.parametrize("damage", list(ENTRY_DAMAGE))
def test_cache_entry_damage_is_recomputed_and_rewritten(
    tiny_model_path, tmp_path, damage
):
    cold = _hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    entries = sorted(p for p in tmp_path.rglob("*.npy"))
    good = {e: e.read_bytes() for e in entries}
    entry = entries[0]
    entry.write_bytes(ENTRY_DAMAGE[damage](entry, good[entry], entries))
    ok(lambda out: np.testing.assert_array_equal(out, cold)).check(
        lambda: _hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    )
    assert entry.read_bytes() == good[entry]  # rewritten


def test_cache_memory_mapped_output_foreign_file_is_recomputed(
    tiny_model_path, tmp_path, monkeypatch
):
    from skloes.extraction import _hidden_states

    monkeypatch.setattr(_hidden_states, "MEMMAP_MIN_BYTES", 1)
    cold = np.array(_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS))
    output = next(tmp_path.rglob("outputs/*.npy"))
    np.save(output, RNG.randn(*cold.shape).astype(np.float32))
    out = _hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    np.testing.assert_array_equal(out, cold)


def _swap_weights_keeping_size_and_time(folder, other):
    weights = os.path.join(folder, "model.safetensors")
    stat = os.stat(weights)
    data = open(os.path.join(other, "model.safetensors"), "rb").read()
    assert len(data) == stat.st_size
    with open(weights, "wb") as handle:
        handle.write(data)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))


WEIGHT_CHANGES = {
    "same_size_weights_mtime_restored": (
        _swap_weights_keeping_size_and_time,
        r"`model`.*changed since",
    ),
    "config_edited": (
        lambda folder, other: open(os.path.join(folder, "config.json"), "a").write(" "),
        r"`model`.*changed since",
    ),
    "folder_deleted": (
        lambda folder, other: __import__("shutil").rmtree(folder),
        r"`model`.*is gone",
    ),
    "weights_deleted": (
        lambda folder, other: os.remove(os.path.join(folder, "model.safetensors")),
        r"`model`.*changed since",
    ),
}


@pytest.mark.parametrize("change", list(WEIGHT_CHANGES))
def test_fitted_extractor_refuses_changed_weights(tiny_model_path, tmp_path, change):
    import pickle
    import shutil

    from skloes.models._testing import make_tiny_model

    folder = str(tmp_path / "m")
    shutil.copytree(tiny_model_path, folder)
    other = make_tiny_model(tmp_path / "other", seed=1)
    blob = pickle.dumps(_hst(folder).fit(TEXTS))
    damage, needle = WEIGHT_CHANGES[change]
    damage(folder, other)
    err(needle).check(lambda: pickle.loads(blob).transform(TEXTS))


# --------------------------------------------------------------------------
# Data set loaders
# --------------------------------------------------------------------------
LOADERS = {
    "rotten_tomatoes": datasets.load_rotten_tomatoes,
    "bbc_news": datasets.load_bbc_news,
    "chatterbot_langid": datasets.load_chatterbot_langid,
}
LOADER_CASES = [
    ("n_samples_0", {"n_samples": 0}, err("n_samples")),
    ("n_samples_neg", {"n_samples": -5}, err("n_samples")),
    ("n_samples_float", {"n_samples": 2.5}, err("n_samples")),
    ("n_samples_huge", {"n_samples": 10**9}, err("n_samples")),
    ("random_state", {"n_samples": 20, "random_state": "x"}, err("random_state")),
    (
        "tiny",
        {"n_samples": 20, "return_X_y": True},
        ok(lambda r: len(r[0]) == len(r[1]) == 20),
    ),
]


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize(
    "kwargs, outcome", [pytest.param(k, o, id=i) for i, k, o in LOADER_CASES]
)
def test_loaders(loader, kwargs, outcome):
    try:
        outcome.check(lambda: LOADERS[loader](**kwargs))
    except ImportError as exc:  # the data wheel is not installed here
        pytest.skip(str(exc))


def test_load_dataset_unknown_name():
    err(r"unknown data set 'imdb'").check(lambda: datasets.load_dataset("imdb"))


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------
def _csv(path, text):
    path.write_text(text)
    return str(path)


CLI_CASES = [
    ("batch_size_0", ["--batch-size", "0"], "--batch-size"),
    ("batch_size_word", ["--batch-size", "many"], "--batch-size"),
    ("max_length_0", ["--max-length", "0"], "--max-length"),
    ("max_length_neg", ["--max-length", "-4"], "--max-length"),
    ("max_length_no_room", ["--max-length", "2"], r"`--max-length` must be at least 3"),
    ("budget_0", [CLI_BUDGET, "0"], CLI_BUDGET),
    ("budget_word", [CLI_BUDGET, "some"], CLI_BUDGET),
    ("max_samples_9", ["--max-samples", "9"], "--max-samples"),
    ("seed_word", ["--seed", "x"], "--seed"),
    ("pooling", ["--pooling", "median"], "--pooling"),
    ("device_bogus", ["--device", "gpu9"], "device"),
    ("device_cuda_99", ["--device", "cuda:99"], "device"),
    ("model_missing", ["--model", "/nowhere/model"], "does not exist"),
    ("data_unknown", ["--data", "imdb"], "unknown data set"),
    ("data_missing_file", ["--data", "missing.csv"], "does not exist"),
    ("data_bad_extension", ["--data", "{tmp}/d.xlsx"], "unknown extension"),
    ("data_empty_file", ["--data", "{tmp}/empty.csv"], "cannot read"),
    ("data_header_only", ["--data", "{tmp}/header.csv"], "no row"),
    (
        "data_no_text_column",
        ["--data", "{tmp}/ok.csv", "--text-column", "body"],
        "--text-column",
    ),
    (
        "data_no_label_column",
        ["--data", "{tmp}/ok.csv", "--label-column", "y"],
        "--label-column",
    ),
    ("data_one_class", ["--data", "{tmp}/one_class.csv"], "single class"),
    ("data_labels_missing", ["--data", "{tmp}/no_labels.csv"], "no row"),
    ("data_bad_json", ["--data", "{tmp}/bad.jsonl"], "cannot read"),
    ("data_a_folder", ["--data", "{tmp}/afolder.csv"], "cannot read|is a folder"),
    ("model_a_file", ["--model", "{tmp}/ok.csv"], "is a file, not a model folder"),
    (
        "model_remote_code",
        ["--model", "{remote}"],
        "skloes probe does not run a model's own code",
    ),
    (
        "data_the_model_cannot_tell_apart",
        ["--data", "{tmp}/unknown_words.csv"],
        r"cannot probe .*no candidate layers",
    ),
    ("out_a_file", ["--out", "{tmp}/ok.csv"], "--out"),
    ("out_existing_report", ["--out", "{tmp}/report"], "--force"),
    ("unknown_option", ["--frobnicate"], "unrecognized arguments"),
]


@pytest.fixture
def cli_files(tmp_path):
    _csv(tmp_path / "d.xlsx", "x")
    _csv(tmp_path / "empty.csv", "")
    _csv(tmp_path / "header.csv", "text,label\n")
    _csv(tmp_path / "ok.csv", "text,label\n" + "a b,0\nc d,1\n" * 6)
    _csv(tmp_path / "unknown_words.csv", "text,label\n" + "zzz,0\nqqq,1\n" * 6)
    _csv(tmp_path / "one_class.csv", "text,label\n" + "a b,0\n" * 12)
    _csv(tmp_path / "no_labels.csv", "text,label\n" + "a b,\n" * 12)
    _csv(tmp_path / "bad.jsonl", '{"text": "a", "label": 0}\n{"text": ')
    (tmp_path / "afolder.csv").mkdir()
    (tmp_path / "report").mkdir()
    _csv(tmp_path / "report" / "selection.json", "{}")
    return tmp_path


@pytest.mark.parametrize(
    "argv, needle", [pytest.param(a, n, id=i) for i, a, n in CLI_CASES]
)
def test_cli_options(cli_files, tiny_model_path, broken_models, capsys, argv, needle):
    from skloes.cli import main

    argv = [
        a.replace("{tmp}", str(cli_files)).replace(
            "{remote}", str(broken_models / "remote")
        )
        for a in argv
    ]
    if "--model" not in argv:
        argv = ["--model", tiny_model_path, *argv]
    if "--out" not in argv:
        argv = [*argv, "--out", str(cli_files / "fresh")]
    status = main(["probe", *argv])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2, err_lines
    # one error line (progress bars of a run that got far may precede it)
    errors = [line for line in err_lines if "error:" in line]
    assert len(errors) == 1 and re.search(needle, errors[0]), err_lines
    assert not any("Traceback" in line for line in err_lines)
    assert not (cli_files / "fresh").exists()  # nothing written on failure


# --------------------------------------------------------------------------
# The user model cache (issue 20, class 5): every error names SKLOES_HOME and
# the fix; prepared folders are as readable as the umask allows; stale
# staging folders go at the next prepare, a live one stays; a prepared
# folder with broken weights is prepared again.
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zip_parts(tiny_model_path, tmp_path_factory):
    """A tiny model zipped under all-mpnet-base-v2/, split in 3 parts."""
    import zipfile

    root = tmp_path_factory.mktemp("zip-parts")
    archive = root / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name in sorted(os.listdir(tiny_model_path)):
            zf.write(os.path.join(tiny_model_path, name), f"all-mpnet-base-v2/{name}")
    data = archive.read_bytes()
    parts = []
    for i, (a, b) in enumerate([(0, 100), (100, 1000), (1000, len(data))]):
        parts.append(root / f"all-mpnet-base-v2.zip.00{i + 1}")
        parts[-1].write_bytes(data[a:b])
    return parts


def _prepare(parts):
    from skloes.models._registry import reassemble_zip_parts

    return reassemble_zip_parts(parts, "all-mpnet-base-v2")


def _home_file(home):
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("not a folder")


def _home_under_a_file(home):
    _home_file(home)
    os.environ["SKLOES_HOME"] = str(home / "sub")


def _bundles_a_file(home):
    home.mkdir(parents=True)
    (home / "bundles").write_text("x")


def _not_writable(home, monkeypatch):  # chmod cannot stop root: fake it
    import tempfile as tf

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(kwargs.get("dir")))

    monkeypatch.setattr(tf, "mkdtemp", denied)


def _unreadable_prepared(home, monkeypatch):
    from skloes.models import _registry

    def denied(target):
        raise PermissionError(13, "Permission denied", str(target / "config.json"))

    monkeypatch.setattr(_registry, "_prepared", denied)


HOME_CASES = {  # damage(home[, monkeypatch]) -> needle of the error
    "home_is_a_file": (_home_file, r"SKLOES_HOME.*is a file.*set SKLOES_HOME"),
    "home_under_a_file": (_home_under_a_file, r"SKLOES_HOME.*is a file"),
    "bundles_is_a_file": (_bundles_a_file, r"SKLOES_HOME.*bundles is a file"),
    "home_not_writable": (
        _not_writable,
        r"SKLOES_HOME.*permission denied.*folder you can write",
    ),
    "prepared_by_another_user": (
        _unreadable_prepared,
        r"SKLOES_HOME.*permission denied.*another user",
    ),
}


@pytest.mark.parametrize("case", list(HOME_CASES))
def test_user_model_cache_errors_name_skloes_home(
    zip_parts, tmp_path, monkeypatch, case
):
    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    damage, needle = HOME_CASES[case]
    if damage.__code__.co_argcount == 2:
        damage(home, monkeypatch)
    else:
        damage(home)
    err(needle).check(lambda: _prepare(zip_parts))


def test_user_model_cache_default_home_error_says_how_to_move_it(
    zip_parts, tmp_path, monkeypatch
):
    monkeypatch.delenv("SKLOES_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _home_file(tmp_path / "xdg" / "skloes")
    err(r"default user model cache; set SKLOES_HOME to move it").check(
        lambda: _prepare(zip_parts)
    )


def test_skloes_models_prepare_error_is_one_line(tmp_path, monkeypatch, capsys):
    from skloes.cli import main

    smollm2 = {m.name: m for m in __import__("skloes").offline_models()}["smollm2"]
    if not smollm2.installed:
        pytest.skip("the SmolLM2 bundle is not installed")
    _home_file(tmp_path / "home")
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    assert main(["models", "--prepare"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert re.search(r"skloes models: error: .*SKLOES_HOME", lines[0]), lines


def test_prepared_folder_is_readable_by_the_team(zip_parts, tmp_path, monkeypatch):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    old = os.umask(0o022)
    try:
        folder = _prepare(zip_parts)
    finally:
        os.umask(old)
    assert os.stat(folder).st_mode & 0o777 == 0o755


def _staging_dir(home, name, *, lock=True, age=0):
    folder = home / "bundles" / f".tmp-all-mpnet-base-v2-{name}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\x00" * 4096)
    if lock:
        (folder / ".skloes-staging.lock").write_bytes(b"")
    if age:
        stamp = os.stat(folder).st_mtime - age
        os.utime(folder, (stamp, stamp))
    return folder


STAGING_CASES = [  # (id, lock, age in seconds, held by a live process, removed)
    ("killed_with_lock", True, 0, False, True),
    ("killed_old_without_lock", False, 7200, False, True),
    ("recent_without_lock", False, 0, False, False),
    ("live_preparation", True, 0, True, False),
]


@pytest.mark.parametrize(
    "lock, age, held, removed",
    [pytest.param(*case[1:], id=case[0]) for case in STAGING_CASES],
)
def test_stale_staging_folders_go_at_the_next_prepare(
    zip_parts, tmp_path, monkeypatch, lock, age, held, removed
):
    fcntl = pytest.importorskip("fcntl")
    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    stale = _staging_dir(home, "x", lock=lock, age=age)
    with open(stale / ".skloes-staging.lock", "rb") if held else open(os.devnull) as h:
        if held:  # another open file description: conflicts like another process
            fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB)
        folder = _prepare(zip_parts)
        assert stale.exists() != removed
    assert os.path.isfile(os.path.join(folder, "config.json"))
    assert not (Path(folder) / ".skloes-staging.lock").exists()


def test_prepared_folder_with_truncated_weights_is_prepared_again(
    zip_parts, tiny_model_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    folder = _prepare(zip_parts)
    weights = Path(folder) / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])
    expected = _hst(tiny_model_path).fit_transform(TEXTS)
    ok(lambda out: np.testing.assert_array_equal(out, expected)).check(
        lambda: _hst(_prepare(zip_parts)).fit_transform(TEXTS)
    )
    assert weights.read_bytes() == good
    assert [p.name for p in (tmp_path / "home" / "bundles").iterdir()] == [
        Path(folder).name
    ]


def test_skloes_cache_covers_the_user_model_cache(
    zip_parts, tmp_path, monkeypatch, capsys
):
    from skloes.cli import main

    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    folder = _prepare(zip_parts)
    stale = _staging_dir(home, "dead")
    broken = home / "bundles" / "other-0123"
    shutil_copy = __import__("shutil").copytree
    shutil_copy(folder, broken)
    (broken / "model.safetensors").write_bytes(b"\x08" + b"\x00" * 7)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"user model cache\): 3 folder", out), out
    for state, path in [("prepared", folder), ("stale", stale), ("broken", broken)]:
        assert re.search(rf"{state} .*{re.escape(str(path))}", out), out
    assert main(["cache", "prune"]) == 0
    assert "removed 1 folder" in capsys.readouterr().out
    assert not stale.exists() and os.path.isdir(folder)


# --------------------------------------------------------------------------
# LOESSelector(memory=...) (issue 20, class 6): a cached result that cannot be
# read is removed with a warning and computed again; a folder that cannot be
# used is an error naming `memory`.
# --------------------------------------------------------------------------
MEMORY_STACK = np.random.RandomState(7).randn(6, 40, 5)
MEMORY_Y = np.arange(40) % 2


def _loes(memory, k=3):
    return LOESSelector(n_layers_to_select=k, memory=memory, random_state=0)


def _cached_outputs(folder, function):
    return sorted(p for p in Path(folder).rglob("output.pkl") if function in str(p))


RESULT_DAMAGE = {  # bytes of a damaged output.pkl
    "truncated": lambda good: good[: len(good) // 2],
    "garbage": lambda good: RNG.bytes(len(good)),
    "empty": lambda good: b"",
    "another_object": lambda good: __import__("pickle").dumps(None),
    "another_objects_pickle": lambda good: __import__("pickle").dumps({"run": 1}),
}


@pytest.mark.parametrize("function", ["_cached_run", "_cached_prepare"])
@pytest.mark.parametrize("damage", list(RESULT_DAMAGE))
def test_memory_unreadable_result_is_computed_again(tmp_path, damage, function):
    k = 3 if function == "_cached_run" else 5  # 5: the 3-path cannot serve it
    expected = _loes(None, k).fit(MEMORY_STACK, MEMORY_Y).get_support(indices=True)
    _loes(str(tmp_path)).fit(MEMORY_STACK, MEMORY_Y)
    outputs = _cached_outputs(tmp_path, function)
    assert outputs
    for output in outputs:
        output.write_bytes(RESULT_DAMAGE[damage](output.read_bytes()))
    warns(
        r"`memory`.*could not be read.*computed again",
        then=lambda est: (
            np.testing.assert_array_equal(est.get_support(indices=True), expected)
        ),
    ).check(lambda: _loes(str(tmp_path), k).fit(MEMORY_STACK, MEMORY_Y))
    with warnings.catch_warnings():  # rewritten: the next fit reads it
        warnings.simplefilter("error")
        again = _loes(str(tmp_path), k).fit(MEMORY_STACK, MEMORY_Y)
    np.testing.assert_array_equal(again.get_support(indices=True), expected)


def test_memory_damaged_longer_path_serves_a_smaller_budget(tmp_path):
    expected = _loes(None, k=2).fit(MEMORY_STACK, MEMORY_Y).get_support(indices=True)
    _loes(str(tmp_path), k=4).fit(MEMORY_STACK, MEMORY_Y)
    for output in _cached_outputs(tmp_path, "_cached_run"):
        output.write_bytes(b"\x80\x04garbage")
    warns(
        r"`memory`",
        then=lambda est: np.testing.assert_array_equal(
            est.get_support(indices=True), expected
        ),
    ).check(lambda: _loes(str(tmp_path), k=2).fit(MEMORY_STACK, MEMORY_Y))


def _memory_then_a_file(tmp):
    import shutil

    import joblib

    memory = joblib.Memory(str(tmp / "m"), verbose=0)
    shutil.rmtree(tmp / "m")
    (tmp / "m").write_text("x")
    return memory


MEMORY_FOLDER_CASES = {
    "a_file": (
        lambda tmp: (tmp / "f").write_text("x") and str(tmp / "f"),
        r"`memory` folder .*is a file.*memory=None",
    ),
    "under_a_file": (
        lambda tmp: (tmp / "f").write_text("x") and str(tmp / "f" / "m"),
        r"`memory` folder .*is a file",
    ),
    "joblib_memory_folder_replaced_by_a_file": (
        _memory_then_a_file,
        r"`memory` folder .*is a file",
    ),
}


@pytest.mark.parametrize("case", list(MEMORY_FOLDER_CASES))
def test_memory_folder_that_cannot_be_used(tmp_path, case):
    make, needle = MEMORY_FOLDER_CASES[case]
    err(needle).check(lambda: _loes(make(tmp_path)).fit(MEMORY_STACK, MEMORY_Y))


def test_memory_folder_that_fails_to_write_names_memory(tmp_path, monkeypatch):
    """A full disk or a read-only folder (root ignores chmod: faked)."""
    from joblib import _store_backends

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path))

    monkeypatch.setattr(_store_backends.FileSystemStoreBackend, "dump_item", full)
    err(r"`memory` folder .*No space left on device").check(
        lambda: _loes(str(tmp_path)).fit(MEMORY_STACK, MEMORY_Y)
    )


# --------------------------------------------------------------------------
# The CLI's data (issue 20, class 7): a text column holding anything but
# strings is refused (as the Python API refuses it), the texts are read as
# the file holds them, left-out rows are counted, `cache info` on a missing
# folder says so.
# --------------------------------------------------------------------------
def _jsonl(path, texts, labels=None):
    import json

    labels = labels if labels is not None else [i % 2 for i in range(len(texts))]
    path.write_text(
        "".join(
            json.dumps({"text": t, "label": y}) + "\n"
            for t, y in zip(texts, labels, strict=True)
        )
    )
    return path


NON_TEXT = {
    "lists": [["a", "b"]] * 12,
    "dicts": [{"a": 1}] * 12,
    "booleans": [True, False] * 6,
    "numbers": list(range(12)),
    "one_list_among_texts": ["a b"] * 7 + [["x"]] + ["c d"] * 4,
    "nested_null": [None] * 2 + [[None]] * 10,
}


@pytest.mark.parametrize("case", list(NON_TEXT))
def test_cli_text_column_of_non_text_is_refused(
    tmp_path, tiny_model_path, capsys, case
):
    from skloes.cli import main

    data = _jsonl(tmp_path / "d.jsonl", NON_TEXT[case])
    status = main(
        [
            "probe",
            "--model",
            tiny_model_path,
            "--data",
            str(data),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2, lines
    assert re.search(
        r"error: --text-column 'text' .* not text \(row \d+: "
        r"(list|dict|bool|int)",
        lines[-1],
    ), lines
    assert not (tmp_path / "out").exists()


def test_cli_parquet_text_column_of_lists_is_refused(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from skloes.cli._args import UserError
    from skloes.cli._data import load_data

    path = tmp_path / "d.parquet"
    pd.DataFrame({"text": [["a"], ["b"]] * 6, "label": [0, 1] * 6}).to_parquet(path)
    with pytest.raises(UserError, match=r"--text-column 'text'.*not text"):
        load_data(str(path), "text", "label", None, 0)


TEXT_AS_WRITTEN = [  # (id, file name, file text, the first text read)
    ("csv_leading_zeros", "d.csv", "text,label\n" + "007,0\n0042,1\n" * 6, "007"),
    (
        "csv_number_with_missing",
        "d.csv",
        "text,label\n1,0\n,1\n" + "2,0\n3,1\n" * 6,
        "1",
    ),
    ("jsonl_date_string", "d.jsonl", None, "2020-01-01"),
    ("jsonl_numeric_string", "d.jsonl", None, "1e3"),
]


@pytest.mark.parametrize(
    "name, text, first",
    [pytest.param(*case[1:], id=case[0]) for case in TEXT_AS_WRITTEN],
)
def test_cli_texts_are_read_as_written(tmp_path, name, text, first):
    from skloes.cli._data import load_data

    path = tmp_path / name
    if text is None:
        _jsonl(path, [first, "a b"] * 6)
    else:
        path.write_text(text)
    texts, _, _ = load_data(str(path), "text", "label", None, 0)
    assert texts[0] == first and isinstance(texts[0], str)


DROPPED_ROWS = [  # (id, file text, rows left out, rows in all)
    ("missing_texts", "text,label\n" + ",0\n,1\n" + "a b,0\nc d,1\n" * 6, 2, 14),
    ("missing_labels", "text,label\n" + "a b,\n" * 3 + "a b,0\nc d,1\n" * 6, 3, 15),
    ("both", "text,label\n,\n" + "a b,0\nc d,1\n" * 6, 1, 13),
]


@pytest.mark.parametrize(
    "text, dropped, total",
    [pytest.param(*case[1:], id=case[0]) for case in DROPPED_ROWS],
)
def test_cli_rows_left_out_are_counted(tmp_path, capsys, text, dropped, total):
    from skloes.cli._data import load_data

    (tmp_path / "d.csv").write_text(text)
    texts, _, _ = load_data(str(tmp_path / "d.csv"), "text", "label", None, 0)
    assert len(texts) == total - dropped
    assert re.search(
        rf"note: {dropped} of {total} rows .* left out", capsys.readouterr().err
    )


def test_cli_no_row_left_out_says_nothing(tmp_path, capsys):
    from skloes.cli._data import load_data

    (tmp_path / "d.csv").write_text("text,label\n" + "a b,0\nc d,1\n" * 6)
    load_data(str(tmp_path / "d.csv"), "text", "label", None, 0)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("action", [["info"], ["prune", "--max-bytes", "0"]])
def test_cli_cache_on_a_missing_folder_says_so(tmp_path, capsys, action):
    from skloes.cli import main

    missing = str(tmp_path / "nowhere")
    assert main(["cache", action[0], missing, *action[1:]]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0], lines
    assert not os.path.exists(missing)


@pytest.mark.parametrize("n_samples", [1, 2])
def test_loes_on_too_few_rows_blames_the_rows_not_max_samples(n_samples):
    from skloes.selection import LOESSelector

    X, y = STACK[:, :n_samples], np.arange(n_samples) % 2
    with pytest.raises(ValueError) as info:
        LOESSelector(n_layers_to_select=1, task="regression").fit(X, y.astype(float))
    assert "max_samples" not in str(info.value)
    assert re.search(r"sample", str(info.value))
