"""The per-layer report: fitted attributes, tables, plot and report folder."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from sklearn.base import clone

from skloes.report import LayerReport, layer_report


def _planted_layers(rng, strengths):
    """90 rows of 3 classes over one layer per strength: each layer adds its
    strength times the class centre to Gaussian noise."""
    y = np.repeat([0, 1, 2], 30)
    centres = rng.normal(size=(3, 6))
    H = rng.normal(size=(len(strengths), 90, 6))
    for layer, strength in enumerate(strengths):
        H[layer] += strength * centres[y]
    return H, y


@pytest.fixture(scope="module")
def planted():
    """4 layers; the class signal grows with depth, layer 0 is pure noise."""
    return _planted_layers(np.random.RandomState(0), [0.0, 0.5, 1.5, 3.0])


@pytest.fixture(scope="module")
def report(planted):
    H, y = planted
    return layer_report(
        H,
        y,
        n_layers_to_select=2,
        metrics=(
            "dataset_entropy",
            "erank_sigma",
            "erank_sigma2",
            "isotropy",
            "intrinsic_dim",
            "simplex_volume",
        ),
        extra_metrics={"curvature": [0.1, 0.2, 0.3, 0.4]},
    )


def test_report_scores_follow_the_planted_signal(report, planted):
    H, _ = planted
    assert report.task_ == "classification" and report.scoring_ == "accuracy"
    np.testing.assert_array_equal(report.layers_, np.arange(4))
    assert report.probe_scores_.shape == (4,)
    assert report.probe_scores_[0] < 0.6 < report.probe_scores_[3]
    assert np.all(np.diff(report.probe_scores_[1:]) >= 0)
    assert np.all(report.probe_scores_std_ >= 0)
    assert report.metrics_["simplex_volume"][3] > report.metrics_["simplex_volume"][0]
    np.testing.assert_allclose(report.metrics_["curvature"], [0.1, 0.2, 0.3, 0.4])
    assert report.selected_layers_.size == 2
    assert set(report.selection_order_) == set(report.selected_layers_)


def test_summary_compares_loes_with_baselines(report):
    s = report.summary()
    assert [m["method"] for m in s["methods"]] == [
        "loes",
        "last_layer",
        "best_single_layer",
        "last_k",
        "all_layers",
    ]
    by = {m["method"]: m for m in s["methods"]}
    assert by["last_layer"]["layers"] == [3]
    assert by["last_layer"]["score"] == pytest.approx(report.probe_scores_[3])
    assert by["best_single_layer"]["layers"] == [s["best_layer"]]  # by inner CV
    assert s["best_layer_score"] == by["best_single_layer"]["score"]
    assert s["profile_best_layer"] == int(np.argmax(report.probe_scores_))
    assert by["last_k"]["layers"] == [2, 3]
    assert by["all_layers"]["layers"] == [0, 1, 2, 3]
    assert s["fused_score"] == by["loes"]["score"]
    assert s["last_layer_score"] == pytest.approx(report.probe_scores_[-1])
    assert 0 <= s["fused_score"] <= 1
    assert "loes" in report.format_summary()


def test_to_frame_and_text_table(report):
    frame = report.to_frame()
    assert frame.index.name == "layer" and list(frame.index) == [0, 1, 2, 3]
    for column in (
        "probe_score",
        "probe_score_std",
        "selected",
        "dataset_entropy",
        "curvature",
    ):
        assert column in frame.columns
    assert frame["selected"].sum() == 2
    lines = report.format_table().splitlines()
    assert len(lines) == 5 and lines[0].startswith("layer")


def test_save_writes_well_formed_files(report, tmp_path):
    mpimg = pytest.importorskip("matplotlib.image")
    folder = report.save(tmp_path / "out")
    with open(folder / "layers.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert list(rows[0]) == [
        "layer",
        "probe_score",
        "probe_score_std",
        "selected",
        "selection_frequency",
        *report.metrics_,
    ]
    assert [int(r["layer"]) for r in rows] == [0, 1, 2, 3]
    np.testing.assert_allclose(
        [float(r["probe_score"]) for r in rows], report.probe_scores_
    )
    assert sum(int(r["selected"]) for r in rows) == 2
    payload = json.loads((folder / "selection.json").read_text())
    for key in (
        "task",
        "scoring",
        "n_layers",
        "selected_layers",
        "selection_order",
        "fused_score",
        "last_layer_score",
        "best_layer",
        "best_layer_score",
        "profile_best_layer",
        "fold_selections",
        "selection_stability",
        "selection_frequency",
        "methods",
    ):
        assert key in payload
    assert payload["selected_layers"] == [int(v) for v in report.selected_layers_]
    image = mpimg.imread(folder / "profile.png")
    assert image.shape[:2] == (600, 1000)  # 10 x 6 inches at 100 dpi


def test_plot_has_integer_layer_ticks_and_marks_selection(report):
    pytest.importorskip("matplotlib")
    fig = report.plot(metrics=["dataset_entropy", "isotropy"])
    score_ax, metric_ax = fig.axes[:2]
    np.testing.assert_array_equal(metric_ax.get_xticks(), [0, 1, 2, 3])
    labels = [t.get_text() for t in score_ax.get_legend().get_texts()]
    assert any(label.startswith("LOES layers") for label in labels)
    assert any(label.startswith("last layer") for label in labels)
    assert any(label.startswith("picked in folds") for label in labels)
    assert len(metric_ax.get_lines()) == 2
    with pytest.raises(ValueError, match="unknown metric"):
        report.plot(metrics=["nope"])


def test_report_is_deterministic_and_clonable(planted):
    H, y = planted
    a = LayerReport(
        n_layers_to_select=2,
        metrics=("isotropy",),
        random_state=3,
        cv=3,
        baselines=("last_k",),
    )
    b = clone(a)
    assert a.fit(H, y).summary() == b.fit(H, y).summary()


def test_nested_and_flat_inputs(planted):
    H, y = planted
    flat = np.ascontiguousarray(H.transpose(1, 0, 2)).reshape(90, -1)
    nested = LayerReport(
        n_layers_to_select=2,
        metrics=("isotropy",),
        nested=True,
        cv=3,
        baselines=("last_layer",),
        layer_dim=6,
    ).fit(flat, y)
    assert nested.probe_scores_.shape == (4,)
    assert [m["method"] for m in nested.summary_] == ["loes", "last_layer"]


def test_regression_uses_r2():
    rng = np.random.RandomState(0)
    H = rng.normal(size=(3, 80, 5))
    y = H[2] @ rng.normal(size=5) + 0.1 * rng.normal(size=80)
    rep = LayerReport(
        n_layers_to_select=1,
        metrics=("dataset_entropy",),
        cv=3,
        baselines=("last_layer", "all_layers"),
    ).fit(H, y)
    assert rep.task_ == "regression" and rep.scoring_ == "r2"
    assert rep.probe_scores_[2] > 0.9 > rep.probe_scores_[0]


@pytest.mark.parametrize(
    "kwargs, fit_kwargs, y, match",
    [
        ({"metrics": ("entropy",)}, {}, None, "metrics"),
        ({"baselines": ("oracle",)}, {}, None, "baselines"),
        (
            {"cv": 2, "baselines": ()},
            {"extra_metrics": {"x": [1.0, 2.0]}},
            None,
            "one value per layer",
        ),
        ({}, {}, np.r_[np.zeros(89), 1], "at least 2 samples"),
        ({}, {}, np.linspace(0, 1, 90).astype(str), "2 samples"),
        ({"cv": 1}, {}, None, "cv"),
    ],
)
def test_bad_input_raises(planted, kwargs, fit_kwargs, y, match):
    H, y0 = planted
    with pytest.raises(ValueError, match=match):
        LayerReport(**kwargs).fit(H, y0 if y is None else y, **fit_kwargs)


# The estimator checks of the default LayerReport() run in tests/test_common.py.


def test_a_metric_undefined_on_a_layer_is_nan_and_named(planted):
    H, y = planted
    H = H.copy()
    H[1] = 1.0  # a constant layer: TwoNN has no distinct neighbours there
    with pytest.warns(UserWarning, match=r"intrinsic_dim is undefined on layers \[1\]"):
        report = LayerReport(
            metrics=("intrinsic_dim",),
            cv=2,
            n_layers_to_select=1,
            baselines=("last_layer",),
        ).fit(H, y)
    values = report.metrics_["intrinsic_dim"]
    assert np.isnan(values[1]) and np.all(np.isfinite(np.delete(values, 1)))


def test_nested_default_reports_fold_picks_and_their_stability(report):
    from skloes.metrics import selection_stability

    assert report.nested and len(report.fold_selections_) == report.n_splits_
    assert all(f.size == 2 for f in report.fold_selections_)
    by = {e["method"]: e for e in report.summary_}
    assert [list(f) for f in report.fold_selections_] == by["loes"]["fold_layers"]
    assert report.selection_stability_ == pytest.approx(
        selection_stability(report.fold_selections_, 4)
    )
    counts = np.bincount(np.concatenate(report.fold_selections_), minlength=4)
    np.testing.assert_allclose(report.selection_frequency_, counts / report.n_splits_)
    text = report.format_summary()
    assert "LOES layers per fold" in text and "selection stability" in text
    s = report.summary()
    assert s["selection_stability"] == report.selection_stability_
    assert s["selection_frequency"] == report.selection_frequency_.tolist()


def test_not_nested_has_no_fold_picks_and_quotes_the_profile(planted):
    H, y = planted
    rep = LayerReport(
        n_layers_to_select=2, metrics=("isotropy",), nested=False, cv=3
    ).fit(H, y)
    assert rep.fold_selections_ is None and rep.selection_frequency_ is None
    assert np.isnan(rep.selection_stability_)
    s = rep.summary()
    assert s["selection_stability"] is None and not s["nested"]
    assert (
        s["best_layer"] == s["profile_best_layer"] == int(np.argmax(rep.probe_scores_))
    )
    assert "selection_frequency" not in rep.to_frame().columns
    json.dumps(s)  # no NaN to trip strict readers


def test_recommends_one_layer_when_it_is_within_noise_of_the_best():
    """Only the last layer carries the labels: every answer that keeps it
    scores alike, so the cheapest (one layer) is recommended."""
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], 40)
    H = rng.normal(size=(5, 80, 6))
    H[4, :, 0] += 3.0 * (2 * y - 1)
    report = LayerReport(metrics=(), random_state=0).fit(H, y)
    rec = report.recommendation_
    assert rec["n_layers_kept"] == 1 and rec["layers"] == [4]
    assert rec["method"] in rec["within_noise"]
    assert report.summary()["recommendation"] == rec
    for entry in report.summary_:
        assert len(entry["fold_scores"]) == report.n_splits_
        assert np.mean(entry["fold_scores"]) == pytest.approx(entry["score"])
    assert "recommended: " in report.format_summary()


def test_recommends_the_fused_answer_when_one_layer_is_clearly_worse():
    """Two layers each carry half of the signal: one layer alone is worse on
    every fold, so the recommendation keeps more than one layer."""
    rng = np.random.RandomState(1)
    y = rng.randint(0, 2, size=200)
    H = rng.normal(size=(4, 200, 4))
    z = rng.normal(size=200)
    H[1, :, 0] += 1.5 * (2 * y - 1) + z
    H[3, :, 0] += 1.5 * (2 * y - 1) - z  # the noise cancels in the sum
    report = LayerReport(metrics=(), random_state=0).fit(H, y)
    rec = report.recommendation_
    by = {e["method"]: e for e in report.summary_}
    assert rec["n_layers_kept"] > 1
    assert by["last_layer"]["method"] not in rec["within_noise"]
    assert rec["score"] > by["best_single_layer"]["score"]


def test_budget_curve_of_a_cv_selector_in_the_report_and_as_a_function(
    planted, tmp_path
):
    pytest.importorskip("matplotlib")
    from skloes.plotting import plot_budget_curve

    H, y = planted
    auto = LayerReport(
        n_layers_to_select="auto", metrics=("isotropy",), baselines=("last_layer",)
    ).fit(H, y)
    selector = auto.selector_
    fig = plot_budget_curve(selector)
    ax = fig.axes[0]
    results = selector.cv_results_
    mean_line = next(
        line for line in ax.get_lines() if line.get_label().startswith("mean of")
    )
    np.testing.assert_allclose(mean_line.get_ydata(), results["mean_test_score"])
    np.testing.assert_array_equal(mean_line.get_xdata(), results["n_layers"])
    chosen = [line for line in ax.get_lines() if line.get_label().startswith("chosen")]
    assert chosen and chosen[0].get_xdata()[0] == selector.n_layers_to_select_
    folds = [line for line in ax.get_lines() if line.get_color() == "0.6"]
    assert len(folds) == sum(
        key.startswith("split") and "score" in key for key in results
    )
    folder = auto.save(tmp_path / "auto")
    assert (folder / "budget.png").stat().st_size > 5_000
    fixed = LayerReport(n_layers_to_select=2, metrics=("isotropy",)).fit(H, y)
    fixed.save(
        folder, overwrite=True
    )  # a fixed budget has no curve: the earlier one goes
    assert not (folder / "budget.png").exists()
    with pytest.raises(ValueError, match="fitted LOESSelectorCV"):
        fixed.plot_budget()


# --------------------------------------------------------------- fusion
def _outer_folds(report, y):
    """The outer folds a fitted report (without groups) split ``y`` into."""
    from skloes.report._layer_scoring import FoldSplitter, outer_folds

    splitter = FoldSplitter(report.task_, False, report.random_state)
    return outer_folds(y, splitter, report.n_splits_, None, "LayerReport")


def _method_scores(report):
    return {e["method"]: np.asarray(e["fold_scores"]) for e in report.summary_}


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_averaged_methods_reuse_the_per_layer_probes_with_the_same_scores(
    planted, task
):
    """The cheap signal: averaged methods scored from the per-layer table's
    held-out outputs equal refitting each fold's per-layer probes."""
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes.probe import LayerEnsembleClassifier, LayerEnsembleRegressor
    from skloes.probe._house import default_head

    H, y = planted
    if task == "regression":
        y = H[3, :, 0] + 0.5 * H[2, :, 1]
    params = dict(n_layers_to_select=2, metrics=(), fusion="average", task=task)
    report = LayerReport(**params).fit(H, y)
    folds = _outer_folds(report, y)
    kind = (
        LayerEnsembleClassifier
        if task == "classification"
        else (LayerEnsembleRegressor)
    )
    head = make_pipeline(StandardScaler(), default_head(task))
    for entry in report.comparison_.methods:
        expected = []
        for layers, (train, test) in zip(entry.fold_layers, folds, strict=True):
            flat = H[layers].transpose(1, 0, 2).reshape(H.shape[1], -1)
            model = kind(clone(head), layer_dim=H.shape[2]).fit(flat[train], y[train])
            expected.append(model.score(flat[test], y[test]))
        np.testing.assert_allclose(entry.fold_scores, expected, atol=1e-12)


def _other_folds(folds, i):
    """Fold ``i``'s inner folds as the report makes them: each other outer
    fold, as index pairs over fold ``i``'s training rows."""
    train = folds[i][0]
    return [
        (
            np.searchsorted(train, np.setdiff1d(train, test)),
            np.searchsorted(train, test),
        )
        for j, (_, test) in enumerate(folds)
        if j != i
    ]


def test_every_method_is_scored_under_the_chosen_fusion():
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes.probe import LayerEnsembleClassifier

    rng = np.random.RandomState(1)  # a weak signal: the fusions disagree
    H, y = _planted_layers(rng, [0.0, 0.2, 0.4, 0.6])
    by = {}
    for fusion in ("concatenate", "average", "stack"):
        report = LayerReport(n_layers_to_select=2, metrics=(), fusion=fusion)
        by[fusion] = _method_scores(report.fit(H, y))
        folds = _outer_folds(report, y)
        flat = H.transpose(1, 0, 2).reshape(90, -1)
        head = make_pipeline(
            StandardScaler(), LogisticRegression(C=0.01, max_iter=1000)
        )
        expected = []
        for i, (train, test) in enumerate(folds):
            model = head
            if fusion != "concatenate":  # inner folds: the other outer folds
                inner = _other_folds(folds, i)
                model = LayerEnsembleClassifier(
                    head, combine=fusion, layer_dim=6, cv=inner
                )
            fitted = clone(model).fit(flat[train], y[train])
            expected.append(fitted.score(flat[test], y[test]))
        np.testing.assert_allclose(by[fusion]["all_layers"], expected, atol=1e-12)
    # one layer is one probe under every fusion
    for method in ("last_layer", "best_single_layer"):
        np.testing.assert_array_equal(by["average"][method], by["concatenate"][method])
        np.testing.assert_array_equal(by["stack"][method], by["concatenate"][method])
    # the fused methods differ between fusions
    assert not np.array_equal(
        by["average"]["all_layers"], by["concatenate"]["all_layers"]
    )


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_auto_chooses_in_each_fold_by_the_probes_rule_on_its_training_rows(task):
    """``fusion="auto"``: in each fold, the fusion the probe's closed-form
    leave-one-out rule picks on the fold's training rows, scored as that
    fusion (a stack's meta model on the other folds as inner folds); the
    reused fits give the numbers of refitting from scratch."""
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes.core._fusion import choose_fusion
    from skloes.probe import LayerEnsembleClassifier, LayerEnsembleRegressor
    from skloes.probe._auto_fusion import loo_fusion_scores, ridge_penalty

    rng = np.random.RandomState(1)
    H, y = _planted_layers(rng, [0.0, 0.2, 0.4, 0.6])
    H[1, :, 0] *= 50.0  # one layer on another scale
    if task == "regression":
        y = H[3, :, 0] + 0.02 * H[1, :, 0] + rng.normal(size=90)
    report = LayerReport(n_layers_to_select=2, metrics=(), fusion="auto", task=task)
    report.fit(H, y)
    folds = _outer_folds(report, y)
    flat = H.transpose(1, 0, 2).reshape(90, -1)
    if task == "classification":
        head = make_pipeline(
            StandardScaler(), LogisticRegression(C=0.01, max_iter=1000)
        )
        kind, classes = LayerEnsembleClassifier, np.unique(y)
    else:
        head = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
        kind, classes = LayerEnsembleRegressor, None
    entry = report.comparison_["all_layers"]
    expected, chosen = [], []
    for i, (train, test) in enumerate(folds):
        inner = _other_folds(folds, i)
        scores = loo_fusion_scores(
            flat[train],
            y[train],
            layer_dim=6,
            classes=classes,
            alpha=ridge_penalty(head),
        )
        fusion = choose_fusion(scores)
        model = head
        if fusion != "concatenate":
            model = kind(head, combine=fusion, layer_dim=6, cv=inner)
        fitted = clone(model).fit(flat[train], y[train])
        expected.append(fitted.score(flat[test], y[test]))
        chosen.append(fusion)
    np.testing.assert_allclose(entry.fold_scores, expected, atol=1e-10)
    assert entry.fold_fusions == chosen
    # recorded, and said in the summary
    assert report.fusion_["all_layers"] == entry.fusion_counts()
    assert sum(report.fusion_["all_layers"].values()) == len(folds)
    assert report.fusion_["last_layer"] == {}
    summary = report.summary()
    assert summary["fusion"] == "auto"
    assert summary["fusion_counts"] == report.fusion_
    text = report.format_summary()
    assert "fusion='auto'" in text and "all_layers " in text.split("folds chose")[1]


def test_average_needs_a_probe_with_probabilities(planted):
    from sklearn.svm import LinearSVC

    H, y = planted
    with pytest.raises(ValueError, match="fusion"):
        LayerReport(probe=LinearSVC(), metrics=()).fit(H, y)
    LayerReport(probe=LinearSVC(), metrics=(), fusion="concatenate").fit(H, y)
