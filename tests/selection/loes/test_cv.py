"""LOESSelectorCV: one path per fold scores every budget."""

from __future__ import annotations

import numpy as np
import pytest
from _support.loes import (
    VARIANT_NAMES,
    count_paths,
    planted,
    to_flat,
)
from joblib import parallel_config
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline

from skloes import LOESSelector, LOESSelectorCV


# --------------------------------------------------------------------------
# LOESSelectorCV
# --------------------------------------------------------------------------
def _best_of_five_budgets(estimator, selector_params, folds, X, y):
    """LOESSelectorCV over budgets 1-5, keeping the best-scoring one."""
    return LOESSelectorCV(
        estimator,
        selector=LOESSelector(**selector_params),
        max_layers_to_select=5,
        cv=folds,
        budget_rule="best",
    ).fit(X, y)


def _grid_over_five_budgets(estimator, selector_params, folds, X, y):
    """The same search done by GridSearchCV over a selector-estimator pipeline."""
    return GridSearchCV(
        Pipeline([("loes", LOESSelector(**selector_params)), ("est", estimator)]),
        {"loes__n_layers_to_select": [1, 2, 3, 4, 5]},
        cv=folds,
    ).fit(X, y)


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_cv_matches_grid_search_with_far_fewer_paths(monkeypatch, variant):
    stack, y = planted(n=180, n_layers=6, dim=8, seed=34)
    flat = to_flat(stack)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    kw = dict(
        variant=variant,
        max_samples=None,
        fusion_scaling="layer",
        layer_dim=8,
        random_state=0,
    )
    est = LogisticRegression(max_iter=500)
    counts = count_paths(monkeypatch)
    cv = _best_of_five_budgets(est, kw, folds, flat, y)
    cv_calls = len(counts["runs"])
    counts["runs"].clear()
    grid = _grid_over_five_budgets(est, kw, folds, flat, y)
    assert cv_calls == 3 + 1
    assert len(counts["runs"]) == 5 * 3 + 1
    np.testing.assert_allclose(
        cv.cv_results_["mean_test_score"],
        grid.cv_results_["mean_test_score"],
        atol=1e-12,
    )
    assert cv.n_layers_to_select_ == grid.best_params_["loes__n_layers_to_select"]
    assert (
        cv.selection_order_.tolist()
        == grid.best_estimator_["loes"].selection_order_.tolist()
    )


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("fusion_scaling", [None, "layer"])
@pytest.mark.parametrize("probe_layer_dim", [None, 40])
def test_cv_scores_the_ridge_probe_from_grams_as_grid_search_fits_it(
    monkeypatch, task, fusion_scaling, probe_layer_dim
):
    """The probe is never fitted per prefix, and the scores are the search's.

    40-wide layers on 100 fit rows: prefixes of 1-2 layers take the feature
    route, longer ones the Gram route.
    """
    from skloes.selection import RidgeProbeClassifier, RidgeProbeRegressor
    from skloes.selection._ridge_probe import _RidgeProbe

    stack, y = planted(n=150, n_layers=6, dim=40, seed=38)
    stack[3] *= 20.0  # layers on different scales
    if task == "regression":
        y = (
            stack[2, :, 0]
            - stack[4, :, 1]
            + 0.3 * stack[1, :, 2]
            + np.random.RandomState(0).normal(size=150)
        )
        probe = RidgeProbeRegressor(layer_dim=probe_layer_dim)
        folds = [
            (np.setdiff1d(np.arange(150), t), t)
            for t in np.array_split(np.arange(150), 3)
        ]
    else:
        probe = RidgeProbeClassifier(layer_dim=probe_layer_dim)
        folds = StratifiedKFold(3, shuffle=True, random_state=0)
    flat = to_flat(stack)
    kw = dict(
        max_samples=None, fusion_scaling=fusion_scaling, layer_dim=40, random_state=0
    )
    fits = []
    real_fit = _RidgeProbe._fit_scaled
    monkeypatch.setattr(
        _RidgeProbe,
        "_fit_scaled",
        lambda self, *a: fits.append(1) or real_fit(self, *a),
    )
    cv = _best_of_five_budgets(probe, kw, folds, flat, y)
    assert not fits
    grid = _grid_over_five_budgets(probe, kw, folds, flat, y)
    np.testing.assert_allclose(
        cv.cv_results_["mean_test_score"],
        grid.cv_results_["mean_test_score"],
        atol=1e-9,
    )
    assert cv.n_layers_to_select_ == grid.best_params_["loes__n_layers_to_select"]


def test_cv_final_selection_is_a_prefix_of_the_full_path():
    stack, y = planted(n=180, seed=35)
    cv = LOESSelectorCV(
        selector=LOESSelector(max_samples=None, random_state=0),
        max_layers_to_select=5,
        cv=3,
    ).fit(stack, y)
    full = LOESSelector(n_layers_to_select=5, max_samples=None, random_state=0).fit(
        stack, y
    )
    k = cv.n_layers_to_select_
    assert cv.selection_order_.tolist() == full.selection_order_[:k].tolist()
    assert cv.transform(stack).shape == (180, k * 12)
    res = cv.cv_results_
    assert res["n_layers"].tolist() == [1, 2, 3, 4, 5]
    assert {"split0_test_score", "split2_selection_order", "std_test_score"} <= set(res)
    assert 2 <= k  # the label needs both informative layers


def test_cv_parallel_folds_equal_sequential():
    stack, y = planted(n=150, seed=36)
    kw = dict(selector=LOESSelector(random_state=0), max_layers_to_select=3, cv=3)
    a = LOESSelectorCV(n_jobs=1, **kw).fit(stack, y)
    with parallel_config(backend="threading"):  # process start-up is slow on CI
        b = LOESSelectorCV(n_jobs=2, **kw).fit(stack, y)
    np.testing.assert_array_equal(
        a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"]
    )


def test_cv_requires_targets_and_supports_regression():
    stack, _ = planted(seed=37)
    with pytest.raises(ValueError, match="`y` is required"):
        LOESSelectorCV().fit(stack, None)
    t = stack[4, :, 0] + 0.1 * np.random.RandomState(0).normal(size=240)
    cv = LOESSelectorCV(
        selector=LOESSelector(random_state=0), max_layers_to_select=3, cv=3
    ).fit(stack, t)
    assert cv.task_ == "regression" and 4 in cv.selection_order_
    assert np.all(cv.cv_results_["mean_test_score"] > 0.5)  # R² of the ridge probe


def test_cv_budget_is_clipped_to_the_candidates():
    stack, y = planted(n=150, seed=38)
    stack[5] = 2.0  # degenerate: excluded, so 5 candidates remain
    with pytest.warns(UserWarning, match="degenerate"):
        cv = LOESSelectorCV(
            selector=LOESSelector(random_state=0), max_layers_to_select=10, cv=3
        ).fit(stack, y)
    assert cv.cv_results_["n_layers"].tolist() == [1, 2, 3, 4, 5, 6]
    assert np.isnan(cv.cv_results_["mean_test_score"][5])
    assert cv.n_layers_to_select_ <= 5 and 5 not in cv.selection_order_


# --------------------------------------------------------------------------
# LOESSelectorCV takes the selector it cross-validates
# --------------------------------------------------------------------------
def test_cv_signature_does_not_restate_the_selectors_parameters():
    import inspect

    own = set(inspect.signature(LOESSelectorCV).parameters)
    assert own == {
        "estimator",
        "selector",
        "max_layers_to_select",
        "cv",
        "scoring",
        "n_jobs",
        "budget_rule",
    }
    assert not own & set(LOESSelector().get_params()) - {"selector"}


def test_cv_fits_the_selector_it_is_given():
    stack, y = planted(n=150, seed=51)
    kw = dict(variant="reference", max_samples=100, random_state=3)
    cv = LOESSelectorCV(
        selector=LOESSelector(n_layers_to_select=1, memory=None, **kw),
        max_layers_to_select=3,
        cv=3,
    ).fit(stack, y)
    assert cv.variant_ == "reference" and cv.calibration_indices_.size == 100
    full = LOESSelector(n_layers_to_select=3, **kw).fit(stack, y)
    k = cv.n_layers_to_select_  # the selector's own budget is not used
    assert cv.selection_order_.tolist() == full.selection_order_[:k].tolist()
    assert cv.selector.get_params()["n_layers_to_select"] == 1  # not modified


def test_cv_flat_selector_parameters_still_work_with_a_future_warning():
    stack, y = planted(n=150, seed=52)
    new = LOESSelectorCV(
        selector=LOESSelector(variant="reference", random_state=0),
        max_layers_to_select=3,
        cv=3,
    ).fit(stack, y)
    old = LOESSelectorCV(
        max_layers_to_select=3, cv=3, variant="reference", random_state=0
    )
    assert old.get_params()["variant"] == "reference"
    assert clone(old).get_params()["random_state"] == 0
    with pytest.warns(FutureWarning, match=r"\['random_state', 'variant'\].*selector"):
        old.fit(stack, y)
    assert old.selection_order_.tolist() == new.selection_order_.tolist()
    np.testing.assert_array_equal(
        old.cv_results_["mean_test_score"], new.cv_results_["mean_test_score"]
    )
    assert LOESSelectorCV().set_params(fused_rank=8).get_params()["fused_rank"] == 8


def test_cv_selector_parameters_are_checked_by_the_selector():
    stack, y = planted(n=90, seed=53)
    with pytest.raises(ValueError, match="fused_rank"):
        LOESSelectorCV(selector=LOESSelector(fused_rank=0), cv=3).fit(stack, y)
    with pytest.raises(ValueError, match="`selector` only"):
        LOESSelectorCV(selector=LOESSelector(), random_state=0).fit(stack, y)
    with pytest.raises(ValueError, match="'selector' parameter"):
        LOESSelectorCV(selector=LogisticRegression()).fit(stack, y)
    with pytest.raises(TypeError, match="unexpected keyword argument 'budget'"):
        LOESSelectorCV(budget=3)


def test_cv_searches_over_the_selectors_parameters():
    stack, y = planted(n=120, seed=54)
    search = GridSearchCV(
        Pipeline(
            [
                (
                    "loes",
                    LOESSelectorCV(
                        selector=LOESSelector(layer_dim=12, random_state=0),
                        max_layers_to_select=2,
                        cv=2,
                    ),
                ),
                ("clf", LogisticRegression(max_iter=300)),
            ]
        ),
        {"loes__selector__fused_rank": [4, 8]},
        cv=2,
    ).fit(to_flat(stack), y)
    assert search.best_params_["loes__selector__fused_rank"] in (4, 8)
    assert search.best_estimator_["loes"].selector.fused_rank in (4, 8)
