"""Every fusion of the selected layers (concatenation, per-layer probes averaged
or stacked): the ensemble heads, and a probe of each fusion pickling, saving
without weights, refusing changed weights, predicting pruned and exporting."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
from _support.probes import assert_no_weights, blocks_run, copy_model  # noqa: E402
from _support.texts import NEW, TEXTS, Y
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skloes.probe import LayerEnsembleClassifier, LayerEnsembleRegressor

FUSIONS = ("concatenate", "average", "stack", "auto")


# ------------------------------------------------------------ the heads
def _data(seed=0, n=90):
    rng = np.random.RandomState(seed)
    y = np.repeat(["a", "b", "c"], n // 3)
    stack = rng.normal(size=(3, n, 4))
    stack[0, :, 0] += 4.0 * (y == "b")
    stack[2, :, 1] += 4.0 * (y == "c")
    return stack, y


def test_average_is_the_mean_of_the_layers_own_probes():
    stack, y = _data()
    ens = LayerEnsembleClassifier(combine="average").fit(stack, y)
    own = [
        make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=1000))
        .fit(layer, y)
        .predict_proba(layer)
        for layer in stack
    ]
    np.testing.assert_allclose(ens.predict_proba(stack), np.mean(own, axis=0))
    assert ens.final_estimator_ is None
    np.testing.assert_array_equal(ens.classes_, ["a", "b", "c"])


def test_stack_fits_its_meta_model_on_out_of_fold_probabilities():
    stack, y = _data()
    ens = LayerEnsembleClassifier(combine="stack", cv=3, random_state=0)
    ens.fit(stack, y)
    # the meta model reads 3 probabilities per layer
    assert ens.final_estimator_.coef_.shape == (3, 9)
    # each layer's probe is refitted on all rows for prediction
    own = (
        make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=1000))
        .fit(stack[1], y)
        .predict_proba(stack[1])
    )
    np.testing.assert_allclose(ens.estimators_[1].predict_proba(stack[1]), own)
    # two layers that carry the classes beat one that carries none
    assert ens.score(stack, y) > 0.8


def test_a_flat_table_of_declared_width_is_its_stack():
    stack, y = _data()
    flat = stack.transpose(1, 0, 2).reshape(stack.shape[1], -1)
    for combine in ("average", "stack"):
        a = LayerEnsembleClassifier(combine=combine, random_state=0).fit(stack, y)
        b = LayerEnsembleClassifier(combine=combine, layer_dim=4, random_state=0)
        b.fit(flat, y)
        np.testing.assert_allclose(a.predict_proba(stack), b.predict_proba(flat))
        assert b.n_layers_in_ == 3 and b.n_features_in_ == 12


def test_stack_is_reproducible_by_its_random_state_and_pickles():
    stack, y = _data()
    a = LayerEnsembleClassifier(combine="stack", random_state=3).fit(stack, y)
    b = LayerEnsembleClassifier(combine="stack", random_state=3).fit(stack, y)
    np.testing.assert_array_equal(a.predict_proba(stack), b.predict_proba(stack))
    back = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(back.predict_proba(stack), a.predict_proba(stack))


def test_the_regressor_averages_or_stacks_predictions():
    rng = np.random.RandomState(0)
    stack = rng.normal(size=(2, 60, 3))
    y = stack[0, :, 0] + stack[1, :, 1]
    avg = LayerEnsembleRegressor(LinearRegression()).fit(stack, y)
    own = [LinearRegression().fit(s, y).predict(s) for s in stack]
    np.testing.assert_allclose(avg.predict(stack), np.mean(own, axis=0))
    stacked = LayerEnsembleRegressor(LinearRegression(), combine="stack")
    stacked.fit(stack, y, sample_weight=np.ones(60))
    # the meta model adds the two halves back: far better than their mean
    assert stacked.score(stack, y) > avg.score(stack, y) + 0.2


def test_a_class_missing_from_an_inner_fold_keeps_its_column():
    rng = np.random.RandomState(0)
    y = np.array([0] * 20 + [1] * 20 + [2] * 2)
    stack = rng.normal(size=(2, 42, 3))
    ens = LayerEnsembleClassifier(combine="stack", cv=5, random_state=0).fit(stack, y)
    assert ens.predict_proba(stack).shape == (42, 3)


def test_a_stack_has_the_meta_models_decision_scores_an_average_none():
    stack, y = _data()
    stacked = LayerEnsembleClassifier(combine="stack", random_state=0).fit(stack, y)
    meta = stacked.final_estimator_
    np.testing.assert_allclose(
        stacked.decision_function(stack),
        meta.decision_function(meta_features(stacked, stack)),
    )
    averaged = LayerEnsembleClassifier().fit(stack, y)
    assert not hasattr(averaged, "decision_function")


def meta_features(ensemble, stack):
    from skloes.core._fusion import meta_features

    return meta_features(ensemble._outputs(stack), ensemble.classes_)


def test_explicit_inner_folds_are_the_stacks_folds():
    stack, y = _data()
    from sklearn.model_selection import StratifiedKFold

    folds = list(StratifiedKFold(3, shuffle=True, random_state=5).split(y, y))
    a = LayerEnsembleClassifier(combine="stack", cv=folds).fit(stack, y)
    b = LayerEnsembleClassifier(combine="stack", cv=folds).fit(stack, y)
    np.testing.assert_array_equal(a.predict_proba(stack), b.predict_proba(stack))


def test_the_choice_breaks_ties_simply():
    from skloes.core._fusion import choose_fusion

    assert choose_fusion({"concatenate": 0.7, "average": 0.7, "stack": 0.6}) == (
        "concatenate"
    )
    assert choose_fusion({"concatenate": 0.6, "average": 0.7, "stack": 0.7}) == (
        "average"
    )
    assert choose_fusion({"concatenate": np.nan, "average": 0.5, "stack": 0.4}) == (
        "average"
    )
    assert choose_fusion({"average": np.nan, "stack": np.nan}) == "average"


def _brute_loo(X, T, alpha):
    """Each row predicted by a scikit-learn ridge fitted on the others."""
    from sklearn.linear_model import Ridge

    rows = np.arange(len(X))
    return np.array(
        [
            Ridge(alpha=alpha).fit(X[rows != i], T[rows != i]).predict(X[i : i + 1])[0]
            for i in rows
        ]
    )


@pytest.mark.parametrize("n", [30, 90])  # more columns than rows, and fewer
def test_loo_fusion_scores_are_the_leave_one_out_scores_of_ridge(n):
    """Concatenation and average: the accuracy of brute-force leave-one-out
    ridge predictions on the standardized columns (one-hot targets), whether
    the concatenation goes through the Grams (rows <= columns) or not."""
    from skloes.probe._auto_fusion import loo_fusion_scores

    stack, y = _data(seed=2, n=n)
    stack = np.concatenate([stack] * 4, axis=2)  # width 16: 48 columns
    stack += np.random.RandomState(1).normal(scale=0.5, size=stack.shape)
    flat = stack.transpose(1, 0, 2).reshape(n, -1)
    classes = np.unique(y)
    scores = loo_fusion_scores(flat, y, layer_dim=16, classes=classes, alpha=7.0)
    assert list(scores) == ["concatenate", "average", "stack"]
    Z = StandardScaler().fit_transform(flat)
    T = (y[:, None] == classes).astype(float)
    concat = _brute_loo(Z, T, 7.0)
    assert scores["concatenate"] == pytest.approx(
        np.mean(classes[concat.argmax(1)] == y)
    )
    per_layer = [_brute_loo(Z[:, k * 16 : (k + 1) * 16], T, 7.0) for k in range(3)]
    mean = np.mean(per_layer, axis=0)
    assert scores["average"] == pytest.approx(np.mean(classes[mean.argmax(1)] == y))
    # the meta model on those per-layer predictions (penalty 1 / C = 1)
    meta = np.concatenate(per_layer, axis=1)
    stacked = _brute_loo(meta, T, 1.0)
    assert scores["stack"] == pytest.approx(np.mean(classes[stacked.argmax(1)] == y))


def test_loo_fusion_scores_of_a_regression_are_r2():
    from skloes.probe._auto_fusion import loo_fusion_scores

    rng = np.random.RandomState(0)
    flat = rng.normal(size=(60, 6))
    y = flat[:, 0] + flat[:, 4] + 0.1 * rng.normal(size=60)
    scores = loo_fusion_scores(flat, y, layer_dim=3, alpha=2.0)
    Z = StandardScaler().fit_transform(flat)
    concat = _brute_loo(Z, y, 2.0)
    r2 = 1 - np.sum((y - concat) ** 2) / np.sum((y - y.mean()) ** 2)
    assert scores["concatenate"] == pytest.approx(r2)
    # each half carries one of the two terms: the stack adds them back up
    assert scores["stack"] > scores["average"] + 0.2


def test_the_ridge_penalty_stands_in_for_the_head():
    from sklearn.linear_model import Ridge, RidgeCV

    from skloes.probe._auto_fusion import ridge_penalty

    assert ridge_penalty(LogisticRegression(C=0.01)) == pytest.approx(100.0)
    assert ridge_penalty(
        make_pipeline(StandardScaler(), LogisticRegression(C=4.0))
    ) == pytest.approx(0.25)
    assert ridge_penalty(Ridge(alpha=3.0)) == 3.0
    assert ridge_penalty(RidgeCV()) == "gcv"
    assert ridge_penalty(LinearRegression()) == "gcv"


def test_inner_folds_without_a_seed_come_from_the_targets():
    """``random_state=None``: the same targets, the same folds (in any
    process); other targets, other folds."""
    from skloes.probe._ensemble import inner_folds

    y = np.repeat([0, 1, 2], 20)
    a = inner_folds(y, "classification", 5, None)
    b = inner_folds(y.astype(str), "classification", 5, None)
    for (ta, sa), (tb, sb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(sa, sb)
    other = inner_folds(np.roll(y, 1), "classification", 5, None)
    assert any(
        not np.array_equal(sa, so) for (_, sa), (_, so) in zip(a, other, strict=True)
    )


def test_bad_parameters_are_refused_by_name():
    stack, y = _data()
    with pytest.raises(ValueError, match="combine"):
        LayerEnsembleClassifier(combine="vote").fit(stack, y)
    from sklearn.svm import LinearSVC

    with pytest.raises(ValueError, match="predict_proba"):
        LayerEnsembleClassifier(LinearSVC()).fit(stack, y)
    # stacking takes decision scores instead
    LayerEnsembleClassifier(LinearSVC(), combine="stack").fit(stack, y)


# ------------------------------------------------- probes of every fusion
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    LayerProbeRegressor,
    load_probe,
    save_probe,
)
from skloes.selection import MetricTopKSelector  # noqa: E402


def _layers(picks, n_layers=7):
    scores = np.zeros(n_layers)
    scores[list(picks)] = 1.0 + np.arange(len(picks))
    return MetricTopKSelector(
        metric="layer_scores",
        n_layers_to_select=len(picks),
        layer_scores=scores,
        include_embedding=False,
    )


@pytest.mark.parametrize("fusion", FUSIONS)
def test_every_fusion_pickles_saves_without_weights_and_prunes(
    deep_tiny, tmp_path, fusion
):
    model = copy_model(deep_tiny, tmp_path / "model")
    probe = LayerProbeClassifier(
        model, selector=_layers([1, 3]), fusion=fusion, random_state=0, n_jobs=2
    ).fit(TEXTS, Y)
    expected = probe.predict_proba(NEW)
    # pruned predict: blocks 1..3 of 6 run
    assert blocks_run(lambda: probe.predict(NEW)) == 3
    back = pickle.loads(pickle.dumps(probe))
    np.testing.assert_array_equal(back.predict_proba(NEW), expected)
    folder = save_probe(probe, tmp_path / "saved")
    assert sorted(os.listdir(folder)) == [
        "README.md",
        "estimator.skops",
        "manifest.json",
    ]
    assert_no_weights(folder / "estimator.skops", model)
    loaded = load_probe(folder)
    np.testing.assert_array_equal(loaded.predict_proba(NEW), expected)
    assert type(loaded.estimator_) is type(probe.estimator_)
    assert blocks_run(lambda: loaded.predict(NEW)) == 3
    # refused once the weights change
    weights = os.path.join(model, "model.safetensors")
    data = bytearray(open(weights, "rb").read())
    data[-8:] = bytes(8)
    stat = os.stat(weights)
    open(weights, "wb").write(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ValueError, match="changed since this extractor was fitted"):
        load_probe(folder)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_every_fusion_exports_in_int8_with_its_check(deep_tiny, tmp_path, fusion):
    probe = LayerProbeClassifier(
        deep_tiny, selector=_layers([1, 2]), fusion=fusion, device="cpu"
    ).fit(TEXTS, Y)
    folder = save_probe(probe, tmp_path / "p", export="onnx-int8", check_texts=TEXTS)
    manifest = json.loads((folder / "manifest.json").read_text())
    check = manifest["export"]["check"]
    assert check["n_texts"] == len(TEXTS)
    assert {"max_abs_feature_diff", "same_prediction", "max_proba_diff"} <= set(check)
    # every fusion of linear probes: plain arrays, served by numpy
    assert (folder / "head.npz").is_file() and not (folder / "head.skops").exists()
    kind = "logistic" if probe.fusion_ == "concatenate" else probe.fusion_
    assert manifest["export"]["head"]["kind"] == kind
    served = load_probe(folder)
    assert served.precision_ == "int8"
    np.testing.assert_array_equal(served.selected_layers_, [1, 2])
    proba = served.predict_proba(NEW)
    assert proba.shape == (len(NEW), 2) and np.allclose(proba.sum(axis=1), 1)
    # the float32 graph gives the torch pipeline's probabilities
    folder32 = save_probe(probe, tmp_path / "f", export="onnx", check_texts=TEXTS)
    np.testing.assert_allclose(
        load_probe(folder32).predict_proba(NEW), probe.predict_proba(NEW), atol=1e-5
    )


@pytest.mark.parametrize("fusion", ["average", "stack", "auto"])
def test_a_regressor_of_every_fusion_saves_and_exports(deep_tiny, tmp_path, fusion):
    y = Y.astype(float) * 2.5
    probe = LayerProbeRegressor(
        deep_tiny, selector=_layers([1, 2]), fusion=fusion, device="cpu"
    ).fit(TEXTS, y)
    if probe.fusion_ != "concatenate":
        assert len(probe.estimator_.estimators_) == 2
    loaded = load_probe(save_probe(probe, tmp_path / "r"))
    np.testing.assert_array_equal(loaded.predict(NEW), probe.predict(NEW))
    folder = save_probe(probe, tmp_path / "e", export="onnx", check_texts=TEXTS)
    np.testing.assert_allclose(
        load_probe(folder).predict(NEW), probe.predict(NEW), atol=1e-5
    )


def test_auto_records_its_choice_and_fits_that_fusion(deep_tiny):
    probe = LayerProbeClassifier(
        deep_tiny, selector=_layers([1, 3]), fusion="auto", random_state=0
    ).fit(TEXTS, Y)
    scores = probe.fusion_scores_
    assert list(scores) == ["concatenate", "average", "stack"]
    assert probe.fusion_ in scores
    assert scores[probe.fusion_] == max(scores.values())
    # the closed-form scores of the fused training layers, as accuracies
    from skloes.probe._auto_fusion import loo_fusion_scores

    stack = probe.pipeline_[0].transform(TEXTS)  # the selected layers only
    fused = np.concatenate(list(stack), axis=1)
    expected = loo_fusion_scores(
        fused, Y, layer_dim=stack.shape[2], classes=probe.classes_, alpha=100.0
    )
    assert scores == pytest.approx(expected)
    again = LayerProbeClassifier(
        deep_tiny, selector=_layers([1, 3]), fusion=probe.fusion_, random_state=0
    ).fit(TEXTS, Y)
    np.testing.assert_allclose(probe.predict_proba(NEW), again.predict_proba(NEW))
    # decision scores exist where the fitted fusion has them
    assert hasattr(probe, "decision_function") == (probe.fusion_ != "average")
    # one selected layer: its own head, no choice to make
    one = LayerProbeClassifier(deep_tiny, selector=_layers([2]), fusion="auto")
    one.fit(TEXTS, Y)
    assert one.fusion_ == "concatenate" and one.fusion_scores_ is None
    # a fixed fusion is recorded as itself
    fixed = LayerProbeClassifier(deep_tiny, selector=_layers([1, 3]), fusion="stack")
    assert fixed.fit(TEXTS, Y).fusion_ == "stack" and fixed.fusion_scores_ is None


def test_a_bad_fusion_is_refused_by_name(deep_tiny):
    with pytest.raises(ValueError, match="fusion"):
        LayerProbeClassifier(deep_tiny, fusion="mean").fit(TEXTS, Y)


@pytest.mark.integration
@pytest.mark.parametrize("fusion", ["average", "stack"])
def test_per_layer_fusion_on_real_minilm_and_text(
    minilm_path, rotten_tomatoes_small, tmp_path, fusion
):
    X, y = rotten_tomatoes_small
    X, y = list(X[:200]), np.asarray(y[:200])
    probe = LayerProbeClassifier(
        minilm_path, fusion=fusion, max_length=64, random_state=0
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        probe.fit(X[:150], y[:150])
    assert len(probe.estimator_.estimators_) == probe.selected_layers_.size
    assert probe.score(X[150:], y[150:]) > 0.55
    loaded = load_probe(save_probe(probe, tmp_path / "p"))
    np.testing.assert_array_equal(
        loaded.predict_proba(X[150:]), probe.predict_proba(X[150:])
    )
