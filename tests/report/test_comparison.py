"""The nested comparison and the recommendation (skloes.report._comparison) and
the methods a report compares (skloes.report._methods): objects the report,
the command line and the model card read."""

from __future__ import annotations

import numpy as np
import pytest

from skloes import selection
from skloes.report import LayerReport, MethodComparison, MethodScore, Recommendation
from skloes.report._methods import BASELINES, method_selector


def _comparison(nested=True):
    return MethodComparison(
        [
            MethodScore("loes", [3, 5], np.array([0.80, 0.84, 0.82]), [[3, 5]] * 3),
            MethodScore("last_layer", [6], np.array([0.81, 0.835, 0.81])),
            MethodScore("all_layers", [0, 1, 2, 3, 4, 5, 6], np.array([0.6] * 3)),
        ],
        nested=nested,
    )


# --------------------------------------------------------------- MethodScore
def test_a_method_score_is_the_mean_and_spread_of_its_folds():
    entry = MethodScore("loes", [3, 5], np.array([0.8, 0.9]), [[3, 5], [5, 3]])
    assert entry.score == pytest.approx(0.85)
    assert entry.score_std == pytest.approx(0.05)
    assert entry.as_dict() == {
        "method": "loes",
        "layers": [3, 5],
        "fold_layers": [[3, 5], [5, 3]],
        "score": pytest.approx(0.85),
        "score_std": pytest.approx(0.05),
        "fold_scores": [0.8, 0.9],
    }
    assert "fold_layers" not in MethodScore("x", [1], np.array([1.0])).as_dict()


# ---------------------------------------------------------- MethodComparison
def test_a_comparison_is_read_by_method_and_as_a_fold_table():
    comparison = _comparison()
    assert comparison["last_layer"].layers == [6]
    assert comparison.fold_scores.shape == (3, 3)
    np.testing.assert_array_equal(comparison.fold_scores[:, 0], [0.80, 0.84, 0.82])
    with pytest.raises(KeyError, match="nope"):
        comparison["nope"]


def test_the_recommendation_is_the_cheapest_within_noise_of_the_best():
    rec = _comparison().recommend()
    assert isinstance(rec, Recommendation)
    assert rec.best_method == "loes" and rec.best_score == pytest.approx(0.82)
    assert rec.method == "last_layer"  # within noise and one layer
    assert (rec.n_layers_kept, rec.deepest_layer) == (1, 6)
    assert rec.within_noise == ["loes", "last_layer"]
    diff = np.array([0.81, 0.835, 0.81]) - np.array([0.80, 0.84, 0.82])
    assert rec.difference == pytest.approx(diff.mean())
    assert rec.difference_se == pytest.approx(diff.std(ddof=1) / np.sqrt(3))


def test_a_clearly_better_method_is_recommended_whatever_its_cost():
    comparison = MethodComparison(
        [
            MethodScore("loes", [1, 2, 3], np.array([0.9, 0.91, 0.92])),
            MethodScore("last_layer", [3], np.array([0.6, 0.61, 0.62])),
        ],
        nested=False,
    )
    rec = comparison.recommend()
    assert rec.method == "loes" and rec.within_noise == ["loes"]
    assert rec.difference == 0.0


def test_a_recommendation_reads_as_a_mapping_and_as_json():
    rec = _comparison().recommend()
    assert rec["method"] == rec.method and len(rec) == 10
    assert list(rec) == list(rec.as_dict())
    assert dict(rec) == rec.as_dict()
    with pytest.raises(KeyError, match="price"):
        rec["price"]
    assert rec.text(3).startswith("recommended: last_layer (1 layer kept")


# -------------------------------------------------------------- the methods
@pytest.mark.parametrize(
    "method, cls",
    [
        ("loes", selection.LOESSelector),
        ("last_layer", selection.LastLayerSelector),
        ("best_single_layer", selection.BestSingleLayerSelector),
        ("last_k", selection.LastKSelector),
        ("all_layers", selection.AllLayersSelector),
        ("entropy_top_k", selection.MetricTopKSelector),
    ],
)
def test_each_method_is_a_selector(method, cls):
    est = method_selector(method, 2, 0)
    assert type(est) is cls
    assert method == "loes" or method in BASELINES


def test_an_auto_budget_makes_loes_cross_validated_and_a_task_is_passed_on():
    est = method_selector("loes", "auto", 0, task="regression")
    assert isinstance(est, selection.LOESSelectorCV)
    own = selection.LOESSelector(n_layers_to_select=3, task="auto")
    clone = method_selector("loes", 2, 0, selector=own, task="classification")
    assert clone is not own and clone.get_params()["n_layers_to_select"] == 3
    assert clone.get_params()["task"] == "classification"
    assert method_selector("best_single_layer", 2, 0, inner_cv=3).cv == 3


def test_a_report_gives_the_selector_of_each_of_its_methods():
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], 20)
    H = rng.normal(size=(4, 40, 3))
    H[2, :, 0] += 2 * y
    report = LayerReport(n_layers_to_select=9, metrics=(), random_state=0).fit(H, y)
    loes = report.method_selector("loes")
    assert loes.get_params()["n_layers_to_select"] == 4  # the budget, capped
    assert report.method_selector("last_k").n_layers_to_select == 4
    with pytest.raises(ValueError, match=r"`method` must be one of the report's"):
        report.method_selector("entropy_top_k")  # not one of its baselines
