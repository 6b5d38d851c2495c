"""Tests for the baseline selectors and the ridge probes."""

from __future__ import annotations

import pickle
from itertools import combinations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import (
    GridSearchCV,
    StratifiedKFold,
    cross_val_score,
)
from sklearn.pipeline import Pipeline

from skloes.core import _geometry
from skloes.core._ridge import gcv_alpha_grid
from skloes.selection import (
    AllLayersSelector,
    BestSingleLayerSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
    LastKSelector,
    LastLayerSelector,
    MetricTopKSelector,
    RandomKSelector,
    RidgeProbeClassifier,
    RidgeProbeRegressor,
)

SELECTORS = [
    LastLayerSelector,
    LastKSelector,
    AllLayersSelector,
    RandomKSelector,
    BestSingleLayerSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
    MetricTopKSelector,
]
K_SELECTORS = [
    LastKSelector,
    RandomKSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
    MetricTopKSelector,
]
PROBE_SELECTORS = [
    BestSingleLayerSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny torch fits are far faster single-threaded on a shared CPU."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _planted(n=120, n_layers=6, dim=5, informative=(3,), n_classes=3, seed=0):
    """Noise layers, with the class signal planted in ``informative`` layers."""
    rng = np.random.RandomState(seed)
    y = np.arange(n) % n_classes
    H = rng.normal(size=(n_layers, n, dim))
    for i, l in enumerate(informative):
        H[l, :, i % dim] += 2.5 * (y == i % n_classes) - 1.0
        H[l, :, (i + 1) % dim] += 2.5 * (y == (i + 1) % n_classes)
    return H, y


def _flat(H):
    return H.transpose(1, 0, 2).reshape(H.shape[1], -1)


def _make(cls, **params):
    if cls in K_SELECTORS:
        params.setdefault("n_layers_to_select", 2)
    return cls(**params)


# --------------------------------------------------------------------------
# Shared interface
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", SELECTORS)
def test_stack_and_flat_table_give_the_same_selection(cls):
    H, y = _planted()
    a = _make(cls, random_state=0).fit(H, y)
    b = _make(cls, random_state=0, layer_dim=H.shape[2]).fit(_flat(H), y)
    np.testing.assert_array_equal(a.selected_layers_, b.selected_layers_)
    np.testing.assert_array_equal(a.transform(H), b.transform(_flat(H)))
    fused = np.concatenate([H[l] for l in a.selected_layers_], axis=1)
    np.testing.assert_array_equal(a.transform(H), fused)
    assert a.get_support().dtype == bool and a.get_support().shape == (6,)
    np.testing.assert_array_equal(a.get_support(indices=True), a.selected_layers_)
    np.testing.assert_array_equal(np.sort(a.selection_order_), a.selected_layers_)
    names = a.get_feature_names_out()
    assert names[0] == f"layer{a.selected_layers_[0]}_0"
    assert names[-1] == f"layer{a.selected_layers_[-1]}_4"
    assert len(names) == a.transform(H).shape[1]


@pytest.mark.parametrize("cls", SELECTORS)
def test_include_embedding_false_never_selects_layer_zero(cls):
    H, y = _planted(informative=(0,))
    sel = _make(cls, include_embedding=False, random_state=0)
    if cls is MetricTopKSelector:
        sel.set_params(n_layers_to_select=5)
    sel.fit(H, y)
    assert 0 not in sel.selected_layers_


@pytest.mark.parametrize("cls", SELECTORS)
def test_same_calibration_rows_as_loes(cls):
    from skloes import LOESSelector

    H, y = _planted(n=150)
    loes = LOESSelector(n_layers_to_select=2, max_samples=60, random_state=3).fit(H, y)
    sel = _make(cls, max_samples=60, random_state=3).fit(H, y)
    np.testing.assert_array_equal(sel.calibration_indices_, loes.calibration_indices_)


def test_calibration_subsample_sizes_and_stratification():
    H, y = _planted(n=150)
    sel = AllLayersSelector(max_samples=30, random_state=0).fit(H, y)
    assert sel.calibration_indices_.size == 30
    np.testing.assert_array_equal(np.bincount(y[sel.calibration_indices_]), [10] * 3)
    assert AllLayersSelector(max_samples=0.2).fit(H).calibration_indices_.size == 30
    big = AllLayersSelector(max_samples=10_000).fit(H, y)  # more than n: all rows
    np.testing.assert_array_equal(big.calibration_indices_, np.arange(150))


def test_fixed_rule_selectors():
    H = np.random.RandomState(0).normal(size=(7, 10, 2))
    assert LastLayerSelector().fit(H).selected_layers_.tolist() == [6]
    last3 = LastKSelector(n_layers_to_select=3).fit(H)
    assert last3.selected_layers_.tolist() == [4, 5, 6]
    assert AllLayersSelector().fit(H).selected_layers_.tolist() == list(range(7))
    assert AllLayersSelector(include_embedding=False).fit(H).n_selected_ == 6
    assert LastKSelector(n_layers_to_select=7).fit(H).n_selected_ == 7


def test_random_k_is_deterministic_distinct_and_seed_dependent():
    H = np.random.RandomState(0).normal(size=(12, 10, 2))

    def pick(seed):
        sel = RandomKSelector(n_layers_to_select=4, random_state=seed).fit(H)
        return tuple(sel.selection_order_)

    picks = [pick(s) for s in range(6)]
    again = pick(2)
    assert again == picks[2]
    assert all(len(set(p)) == 4 for p in picks)
    assert len(set(picks)) > 1


# --------------------------------------------------------------------------
# Probe-scored selectors
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", PROBE_SELECTORS)
def test_planted_informative_layer_is_selected(cls):
    H, y = _planted(informative=(4,))
    sel = _make(cls, random_state=0).fit(H, y)
    assert sel.selection_order_[0] == 4 or 4 in sel.selected_layers_
    if cls is not ExhaustiveSubsetSelector:
        assert sel.selection_order_[0] == 4


def test_greedy_adds_the_complementary_layer_second():
    # layer 1 separates class 0, layer 4 separates classes 1 and 2: together
    # they classify, either alone does not.
    rng = np.random.RandomState(1)
    n = 240
    y = np.arange(n) % 3
    H = rng.normal(size=(6, n, 4))
    H[1, :, 0] += 4.0 * (y == 0)
    H[4, :, 0] += 4.0 * (y == 1)
    sel = GreedyForwardSelector(n_layers_to_select=2, random_state=0).fit(H, y)
    assert set(sel.selection_order_) == {1, 4}
    assert sel.path_scores_[1] > sel.path_scores_[0] + 0.2
    assert np.isnan(sel.step_scores_[1, sel.selection_order_[0]])
    row = sel.step_scores_[0]
    assert sel.path_scores_[0] == np.nanmax(row)


def _brute_force_probe_accuracy(H, y, subset, fit, held):
    """The spec's probe written out with sklearn Ridge and an explicit hat."""
    blocks_f, blocks_h = [], []
    for l in subset:
        mean = H[l][fit].mean(0)
        scale = np.sqrt(((H[l][fit] - mean) ** 2).sum() / fit.size)
        blocks_f.append((H[l][fit] - mean) / scale)
        blocks_h.append((H[l][held] - mean) / scale)
    A, B = np.hstack(blocks_f), np.hstack(blocks_h)
    T = np.eye(y.max() + 1)[y[fit]]
    n = fit.size
    s = np.linalg.svd(A - A.mean(0), compute_uv=False)
    s = s[s > s[0] * max(A.shape) * np.finfo(float).eps]
    best, best_gcv = None, np.inf
    Ac = A - A.mean(0)
    for lam in gcv_alpha_grid(s):
        model = Ridge(alpha=lam).fit(A, T)
        rss = ((T - model.predict(A)) ** 2).sum()
        hat = Ac @ np.linalg.solve(Ac.T @ Ac + lam * np.eye(A.shape[1]), Ac.T)
        df = 1 + np.trace(hat)
        gcv = (rss / n) / (1 - df / n) ** 2
        if gcv <= best_gcv:
            best, best_gcv = model, gcv
    return np.mean(best.predict(B).argmax(1) == y[held])


@pytest.mark.parametrize("dim", [3, 20])  # concatenation narrower / wider than n_fit
def test_exhaustive_equals_brute_force_over_sklearn_ridge(dim):
    H, y = _planted(n=45, n_layers=5, dim=dim, informative=(1, 3))
    sel = ExhaustiveSubsetSelector(
        n_layers_to_select=2, max_samples=None, random_state=0
    ).fit(H, y)
    held = sel.held_out_indices_
    fit = np.setdiff1d(np.arange(45), held)
    assert held.size == 9
    expected = [
        _brute_force_probe_accuracy(H, y, s, fit, held)
        for s in combinations(range(5), 2)
    ]
    np.testing.assert_allclose(sel.subset_scores_, expected, atol=1e-12)
    best = sel.subsets_[np.argmax(expected)]
    np.testing.assert_array_equal(sel.selected_layers_, best)


def test_exhaustive_scores_equal_the_public_probe_on_the_concatenation():
    H, y = _planted(n=100, dim=4, informative=(2, 5))
    sel = ExhaustiveSubsetSelector(
        n_layers_to_select=3, max_samples=80, random_state=1
    ).fit(H, y)
    held = sel.held_out_indices_
    fit = np.setdiff1d(sel.calibration_indices_, held)
    for subset, score in list(zip(sel.subsets_, sel.subset_scores_, strict=True))[::5]:
        X = _flat(H[subset])
        probe = RidgeProbeClassifier(layer_dim=4).fit(X[fit], y[fit])
        assert probe.score(X[held], y[held]) == pytest.approx(score, abs=1e-12)


def test_best_single_cv_scores_equal_cross_validated_public_probe():
    H, y = _planted(n=90)
    sel = BestSingleLayerSelector(cv=5, max_samples=None).fit(H, y)
    for l in range(H.shape[0]):
        expected = cross_val_score(
            RidgeProbeClassifier(), H[l], y, cv=StratifiedKFold(5)
        ).mean()
        assert sel.cv_scores_[l] == pytest.approx(expected, abs=1e-12)
    assert sel.selected_layers_[0] == np.argmax(sel.cv_scores_)


def test_probe_selectors_handle_regression():
    rng = np.random.RandomState(0)
    H = rng.normal(size=(5, 80, 6))
    y = 3 * H[2, :, 1] + 0.1 * rng.normal(size=80)
    assert BestSingleLayerSelector().fit(H, y).selected_layers_.tolist() == [2]
    greedy = GreedyForwardSelector(n_layers_to_select=2, random_state=0).fit(H, y)
    assert greedy.selection_order_[0] == 2 and greedy.path_scores_[0] > 0.9
    assert not hasattr(greedy, "classes_")


def test_exhaustive_refuses_too_many_subsets():
    H, y = _planted(n_layers=10)
    with pytest.raises(ValueError, match=r"C\(10, 3\) = 120 .*`max_subsets`=100"):
        ExhaustiveSubsetSelector(n_layers_to_select=3, max_subsets=100).fit(H, y)
    ExhaustiveSubsetSelector(n_layers_to_select=3, max_subsets=120).fit(H, y)


def test_gram_route_equals_feature_route():
    from skloes.selection._ridge_probe import SubsetScorer

    H, y = _planted(n=40, dim=30)
    target = ("classification", np.arange(3), y)
    fit, held = np.arange(30), np.arange(30, 40)
    scorer = SubsetScorer(H, target, fit, held)
    wide = scorer.predict([1, 3])  # 60 columns >= 30 fit rows: Gram route
    a = scorer._factors([1, 3])
    A = np.hstack([scorer._block(l)[0] * f for l, f in zip((1, 3), a, strict=True)])
    B = np.hstack([scorer._block(l)[1] * f for l, f in zip((1, 3), a, strict=True)])
    from skloes.core._ridge import ridge_fit

    narrow = ridge_fit(A, scorer.T).predict(B)
    np.testing.assert_allclose(wide, narrow, atol=1e-9)


@pytest.mark.parametrize("layers", [[2], [1, 3]])  # feature and Gram routes
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_global_scaling_scorer_predicts_as_the_probe_on_the_fused_table(layers, task):
    """``scaling="global"`` is the probe fitted on the plain concatenation."""
    from skloes.selection import RidgeProbeClassifier, RidgeProbeRegressor
    from skloes.selection._ridge_probe import SubsetScorer

    H, y = _planted(n=40, dim=30)
    H[3] *= 10.0  # layers on different scales: global and per-layer differ
    values = y if task == "classification" else y + 0.1 * H[2, :, 0]
    target = (task, np.arange(3) if task == "classification" else None, values)
    fit, held = np.arange(30), np.arange(30, 40)
    scorer = SubsetScorer(H, target, fit, held, scaling="global")
    table = np.hstack([H[l] for l in layers])
    if task == "classification":
        probe = RidgeProbeClassifier().fit(table[fit], y[fit])
        expected = probe._raw_scores(table[held])
    else:
        probe = RidgeProbeRegressor().fit(table[fit], values[fit])
        std = values[fit].std()
        expected = (probe.predict(table[held])[:, None] - values[fit].mean()) / std
    np.testing.assert_allclose(scorer.predict(layers), expected, atol=1e-8)
    layer_scaled = SubsetScorer(H, target, fit, held).predict(layers)
    if len(layers) > 1:
        assert not np.allclose(layer_scaled, expected, atol=1e-3)


def test_constant_layer_is_excluded_with_a_warning():
    H, y = _planted(informative=(2,))
    H[5] = 7.0
    for cls in [*PROBE_SELECTORS, MetricTopKSelector]:
        with pytest.warns(UserWarning, match=r"layers \[5\]"):
            sel = _make(cls, random_state=0).fit(H, y)
        assert 5 not in sel.selected_layers_
        assert sel.degenerate_layers_.tolist() == [5]


def test_fewer_samples_than_dimensions_work():
    H, y = _planted(n=30, dim=200, informative=(1,))
    for cls in [*PROBE_SELECTORS, MetricTopKSelector]:
        sel = _make(cls, random_state=0).fit(H, y)
        assert np.all(np.isfinite(sel.transform(H)))
    greedy = GreedyForwardSelector(n_layers_to_select=1, random_state=0).fit(H, y)
    assert greedy.selected_layers_[0] == 1


# --------------------------------------------------------------------------
# Metric top-k
# --------------------------------------------------------------------------
def test_metric_top_k_picks_the_most_isotropic_layers():
    rng = np.random.RandomState(0)
    H = rng.normal(size=(5, 200, 8))
    H *= np.array([1.0, 8.0, 1.0, 3.0, 1.5])[:, None, None] ** np.linspace(0, 1, 8)
    sel = MetricTopKSelector(metric="isotropy", n_layers_to_select=2).fit(H)
    iso = [_geometry.isotropy_erank(_geometry.thin_svd(X)[1], 200, 8) for X in H]
    np.testing.assert_allclose(sel.metric_scores_, iso)
    assert sel.selection_order_.tolist() == list(np.argsort(iso)[::-1][:2])


@pytest.mark.parametrize(
    "metric", ["dataset_entropy", "effective_rank", "intrinsic_dim"]
)
def test_metric_top_k_uses_the_metrics_package(metric):
    from skloes import metrics

    rng = np.random.RandomState(0)
    H = rng.normal(size=(4, 120, 6)) @ np.diag([1, 1, 1, 0.3, 0.1, 0.01])
    H[2, :, 3:] *= 50
    sel = MetricTopKSelector(metric=metric, n_layers_to_select=3, max_samples=None).fit(
        H
    )
    expected = getattr(metrics, metric)(H, max_prompts=None)
    np.testing.assert_allclose(sel.metric_scores_, expected)
    np.testing.assert_array_equal(sel.selection_order_, np.argsort(-expected)[:3])


def test_metric_params_are_forwarded():
    from skloes import metrics

    H = np.abs(np.random.RandomState(0).normal(size=(3, 40, 5))) - 0.5
    sel = MetricTopKSelector(
        metric="dataset_entropy",
        n_layers_to_select=1,
        metric_params={"clamp_gram": True},
    ).fit(H)
    expected = metrics.dataset_entropy(H, clamp_gram=True, max_prompts=None)
    np.testing.assert_allclose(sel.metric_scores_, expected)


def test_metric_top_k_layer_scores_and_callable():
    H = np.random.RandomState(0).normal(size=(5, 20, 3))
    scores = [0.1, 0.9, 0.5, 0.9, 0.0]
    sel = MetricTopKSelector(
        metric="layer_scores", layer_scores=scores, n_layers_to_select=3
    ).fit(H)
    assert sel.selection_order_.tolist() == [1, 3, 2]  # tie 1/3: smaller first
    low = MetricTopKSelector(
        metric="layer_scores",
        layer_scores=scores,
        n_layers_to_select=2,
        greater_is_better=False,
    ).fit(H)
    assert low.selection_order_.tolist() == [4, 0]
    H[3] *= 10
    big = MetricTopKSelector(
        metric=lambda X: float(np.abs(X).mean()), n_layers_to_select=1
    ).fit(H)
    assert big.selected_layers_.tolist() == [3]
    with pytest.raises(ValueError, match="layer_scores"):
        MetricTopKSelector(
            metric="layer_scores", layer_scores=[1, 2], n_layers_to_select=1
        ).fit(H)
    with pytest.raises(ValueError, match="metric"):
        MetricTopKSelector(metric=lambda X: np.nan, n_layers_to_select=1).fit(H)


def test_metric_top_k_ignores_y():
    H, y = _planted()
    a = MetricTopKSelector(n_layers_to_select=3, max_samples=None).fit(H, y)
    b = MetricTopKSelector(n_layers_to_select=3, max_samples=None).fit(H)
    np.testing.assert_array_equal(a.selection_order_, b.selection_order_)


# --------------------------------------------------------------------------
# Ridge probes
# --------------------------------------------------------------------------
def _direct_probe(X, T, width):
    """Block scaling, GCV over the grid and the direct solve, spelt out."""
    n, p = X.shape
    mean = X.mean(0)
    Xc = X - mean
    scale = np.repeat(
        [np.sqrt((Xc[:, b : b + width] ** 2).sum() / n) for b in range(0, p, width)],
        width,
    )
    A = Xc / scale
    s = np.linalg.svd(A, compute_uv=False)
    s = s[s > s[0] * max(n, p) * np.finfo(float).eps]
    Tc = T - T.mean(0)
    best, best_gcv = None, np.inf
    for lam in gcv_alpha_grid(s):
        inv = np.linalg.inv(A.T @ A + lam * np.eye(p))
        hat = A @ inv @ A.T
        rss = ((Tc - hat @ Tc) ** 2).sum()
        gcv = (rss / n) / (1 - (1 + np.trace(hat)) / n) ** 2
        if gcv <= best_gcv:
            best, best_gcv = lam, gcv
    W = np.linalg.solve(A.T @ A + best * np.eye(p), A.T @ Tc)
    return best, lambda Xn: T.mean(0) + ((Xn - mean) / scale) @ W


@pytest.mark.parametrize("n", [60, 12])  # n > p and n < p
def test_ridge_probe_classifier_equals_direct_solve(n):
    rng = np.random.RandomState(0)
    y = np.arange(n) % 3
    X = rng.normal(size=(n, 16)) * np.repeat([1.0, 50.0, 0.1, 3.0], 4)
    X[:, :3] += np.eye(3)[y] * 2
    clf = RidgeProbeClassifier(layer_dim=4).fit(X, y)
    lam, predict = _direct_probe(X, np.eye(3)[y], 4)
    assert clf.ridge_alpha_ == pytest.approx(lam, rel=1e-12)
    Xt = rng.normal(size=(7, 16))
    np.testing.assert_allclose(clf.decision_function(Xt), predict(Xt), atol=1e-8)
    np.testing.assert_array_equal(clf.predict(Xt), predict(Xt).argmax(1))


def test_ridge_probe_global_scale_without_layer_dim():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(40, 6)) * [1, 1, 1, 100, 100, 100]
    y = X[:, 0] + 0.01 * X[:, 3] + 5
    reg = RidgeProbeRegressor().fit(X, y)
    Ys = (y - y.mean()) / y.std()
    lam, predict = _direct_probe(X, Ys[:, None], 6)
    assert reg.ridge_alpha_ == pytest.approx(lam, rel=1e-12)
    np.testing.assert_allclose(
        reg.predict(X), predict(X)[:, 0] * y.std() + y.mean(), atol=1e-8
    )
    assert np.unique(reg.layer_scale_).size == 1


def test_ridge_probe_regressor_multioutput_and_string_labels():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(50, 5))
    Y = np.c_[X[:, 0] * 2, X[:, 1] - 4]
    reg = RidgeProbeRegressor(layer_dim=5).fit(X, Y)
    assert reg.predict(X).shape == (50, 2) and reg.score(X, Y) > 0.99
    labels = np.array(["neg", "pos"])[(X[:, 0] > 0).astype(int)]
    clf = RidgeProbeClassifier().fit(X, labels)
    assert set(clf.predict(X)) <= {"neg", "pos"} and clf.score(X, labels) > 0.8


# --------------------------------------------------------------------------
# sklearn citizenship
# --------------------------------------------------------------------------
def test_pipeline_and_grid_search_over_the_budget():
    H, y = _planted(n=150, informative=(1, 4))
    X = _flat(H)
    pipe = Pipeline(
        [
            ("sel", GreedyForwardSelector(layer_dim=5, random_state=0)),
            ("clf", LogisticRegression(max_iter=500)),
        ]
    )
    grid = GridSearchCV(pipe, {"sel__n_layers_to_select": [1, 2, 3]}, cv=3).fit(X, y)
    assert grid.best_params_["sel__n_layers_to_select"] in (1, 2, 3)
    assert (
        grid.best_estimator_.named_steps["sel"].n_selected_
        == grid.best_params_["sel__n_layers_to_select"]
    )
    probe = GridSearchCV(
        Pipeline(
            [
                ("sel", LastKSelector(layer_dim=5)),
                ("probe", RidgeProbeClassifier(layer_dim=5)),
            ]
        ),
        {"sel__n_layers_to_select": [1, 6]},
        cv=3,
    ).fit(X, y)
    assert probe.best_score_ > 0.5


@pytest.mark.parametrize("cls", SELECTORS)
def test_clone_and_pickle_round_trip(cls):
    H, y = _planted()
    sel = _make(cls, random_state=0).fit(H, y)
    again = pickle.loads(pickle.dumps(sel))
    np.testing.assert_array_equal(again.transform(H), sel.transform(H))
    fresh = clone(sel).fit(H, y)
    np.testing.assert_array_equal(fresh.selection_order_, sel.selection_order_)


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", SELECTORS)
def test_non_finite_input_is_rejected(cls):
    H, y = _planted()
    for bad in (np.nan, np.inf):
        H2 = H.copy()
        H2[1, 3, 0] = bad
        with pytest.raises(ValueError, match="X"):
            _make(cls).fit(H2, y)


@pytest.mark.parametrize("cls", K_SELECTORS)
def test_budget_out_of_range(cls):
    H, y = _planted(n_layers=4)
    with pytest.raises(ValueError, match="`n_layers_to_select` must be at most"):
        cls(n_layers_to_select=5).fit(H, y)
    with pytest.raises(ValueError, match="'n_layers_to_select' parameter"):
        cls(n_layers_to_select=0).fit(H, y)


@pytest.mark.parametrize("cls", K_SELECTORS)
def test_auto_budget_is_four_clipped_to_the_candidates(cls):
    H, y = _planted(n_layers=6)
    assert cls(random_state=0).fit(H, y).n_selected_ == 4
    H3 = H[:3]
    assert cls(random_state=0).fit(H3, y).n_selected_ == 3
    sel = cls(include_embedding=False, random_state=0).fit(H3, y)
    assert sel.n_selected_ == 2 and 0 not in sel.selected_layers_


@pytest.mark.parametrize("cls", PROBE_SELECTORS)
def test_labels_are_required_and_checked(cls):
    H, y = _planted()
    with pytest.raises(ValueError, match="requires y"):
        _make(cls).fit(H)
    with pytest.raises(ValueError, match="at least two classes"):
        _make(cls).fit(H, np.zeros(H.shape[1], dtype=int))
    with pytest.raises(ValueError, match="has 120 samples, but `y` has 60"):
        _make(cls).fit(H, y[:60])
    y_reg = np.linspace(0, 1, H.shape[1])
    y_reg[4] = np.nan
    with pytest.raises(ValueError, match="`y` must be finite"):
        _make(cls).fit(H, y_reg)


def test_bad_dimensions_and_layer_dim():
    H, y = _planted()
    with pytest.raises(ValueError, match="1 dimension"):
        LastLayerSelector().fit(np.zeros(10))
    with pytest.raises(ValueError, match="4 dimension"):
        LastLayerSelector().fit(np.zeros((2, 3, 4, 5)))
    with pytest.raises(ValueError, match="layer_dim"):
        LastLayerSelector(layer_dim=7).fit(_flat(H), y)
    with pytest.raises(ValueError, match="at least 3 calibration samples"):
        BestSingleLayerSelector().fit(H[:, :2], y[:2])
    with pytest.raises(ValueError, match="`cv`=5 folds need at least 5 samples; got 4"):
        BestSingleLayerSelector().fit(H[:, :4], [0, 1, 0, 1])


def test_pandas_output_uses_layer_feature_names():
    pytest.importorskip("pandas")
    H, y = _planted()
    sel = LastKSelector(n_layers_to_select=2, layer_dim=5)
    sel.set_output(transform="pandas")
    out = sel.fit(_flat(H), y).transform(_flat(H))
    assert list(out.columns[:2]) == ["layer4_0", "layer4_1"]
    assert out.columns[-1] == "layer5_4"


def test_exactly_two_classes_work():
    H, y = _planted(n_classes=2, informative=(2,))
    for cls in PROBE_SELECTORS:
        sel = _make(cls, random_state=0).fit(H, y)
        assert 2 in sel.selected_layers_ and sel.classes_.tolist() == [0, 1]
