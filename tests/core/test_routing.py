"""Grouped cross-validation: ``groups`` reach every inner splitter, routed or not.

A splitter that records its splits checks the claim itself: no group has
texts on both sides of any inner split (the CV selectors, the nested report,
the probes), with scikit-learn's metadata routing on and off.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    GroupKFold,
    StratifiedGroupKFold,
    StratifiedKFold,
    cross_validate,
)
from sklearn.pipeline import make_pipeline

from skloes.core._contract import mark_layers
from skloes.report import LayerReport
from skloes.selection import (
    BestSingleLayerSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
    LOESSelectorCV,
)

N_GROUPS, PER_GROUP = 24, 5


class RecordingSplitter(StratifiedGroupKFold):
    """Stratified grouped folds that log every split they give (class-level
    log: estimators clone their ``cv``)."""

    log: list = []

    def split(self, X, y=None, groups=None):
        for train, test in super().split(X, y, groups):
            RecordingSplitter.log.append((train, test, np.asarray(groups)))
            yield train, test


@pytest.fixture(autouse=True)
def _fresh_log():
    RecordingSplitter.log.clear()
    yield
    sklearn.set_config(enable_metadata_routing=False)


@pytest.fixture(scope="module")
def grouped():
    """Groups whose members share a signal: a leaky split would read it."""
    rng = np.random.RandomState(0)
    groups = np.repeat(np.arange(N_GROUPS), PER_GROUP)
    y = groups % 2
    H = rng.normal(size=(4, groups.size, 6))
    H[2] += 0.8 * y[:, None] + 0.5 * rng.normal(size=(N_GROUPS, 6))[groups]
    return H, y, groups


def _flat(H):
    n = H.shape[1]
    return mark_layers(np.ascontiguousarray(H.transpose(1, 0, 2)).reshape(n, -1), 6)


def _assert_no_group_on_both_sides(expected_splits=None):
    log = RecordingSplitter.log
    assert log, "the splitter was never asked to split"
    if expected_splits is not None:
        assert len(log) == expected_splits
    for train, test, groups in log:
        assert not set(groups[train]) & set(groups[test])


def _assert_whole_groups(groups_seen, groups):
    """A training fold of a grouped outer split holds every row of its groups."""
    full = dict(zip(*np.unique(groups, return_counts=True), strict=True))
    seen = dict(zip(*np.unique(groups_seen, return_counts=True), strict=True))
    assert all(full[g] == count for g, count in seen.items())
    assert len(seen) < len(full)  # a training fold: some groups held out


# ---------------------------------------------------------- the selectors
def test_loes_cv_splits_by_the_groups_it_is_given(grouped):
    H, y, groups = grouped
    LOESSelectorCV(cv=RecordingSplitter(3)).fit(H, y, groups=groups)
    _assert_no_group_on_both_sides(expected_splits=3)


def test_an_int_cv_becomes_grouped_folds_when_groups_come(grouped):
    H, y, groups = grouped
    by_int = LOESSelectorCV(cv=3).fit(H, y, groups=groups)
    explicit = LOESSelectorCV(cv=StratifiedGroupKFold(3)).fit(H, y, groups=groups)
    for key, value in explicit.cv_results_.items():
        np.testing.assert_array_equal(by_int.cv_results_[key], value)
    plain = LOESSelectorCV(cv=3).fit(H, y)  # no groups: as before, stratified
    stratified = LOESSelectorCV(cv=StratifiedKFold(3)).fit(H, y)
    for key, value in stratified.cv_results_.items():
        np.testing.assert_array_equal(plain.cv_results_[key], value)


@pytest.mark.parametrize(
    "selector",
    [
        BestSingleLayerSelector(cv=RecordingSplitter(3)),
        GreedyForwardSelector(n_layers_to_select=2, random_state=0),
        ExhaustiveSubsetSelector(n_layers_to_select=2, random_state=0),
    ],
    ids=["best_single", "greedy", "exhaustive"],
)
def test_probe_scored_selectors_split_by_groups(grouped, selector):
    H, y, groups = grouped
    fitted = sklearn.base.clone(selector).fit(H, y, groups=groups)
    if isinstance(selector, BestSingleLayerSelector):
        _assert_no_group_on_both_sides(expected_splits=3)
    else:  # one held-out split of the calibration rows, by group
        held = fitted.held_out_indices_
        fit = np.setdiff1d(fitted.calibration_indices_, held)
        assert held.size and not set(groups[held]) & set(groups[fit])


@pytest.mark.parametrize("routing", [False, True])
def test_a_grouped_splitter_without_groups_is_an_error_naming_groups(grouped, routing):
    H, y, _ = grouped
    sklearn.set_config(enable_metadata_routing=routing)
    for selector in (
        LOESSelectorCV(cv=GroupKFold(3)),
        BestSingleLayerSelector(cv=GroupKFold(3)),
    ):
        with pytest.raises(ValueError, match="no `groups` reached it") as info:
            selector.fit(H, y)
        assert "\n" not in str(info.value)


def test_routed_groups_reach_loes_cv_inside_a_pipeline_in_cross_validate(grouped):
    H, y, groups = grouped
    sklearn.set_config(enable_metadata_routing=True)
    pipe = make_pipeline(LOESSelectorCV(cv=RecordingSplitter(3)), LogisticRegression())
    out = cross_validate(
        pipe, _flat(H), y, params={"groups": groups}, cv=StratifiedGroupKFold(4)
    )
    assert out["test_score"].shape == (4,)
    _assert_no_group_on_both_sides(expected_splits=4 * 3)
    for *_, inner_groups in RecordingSplitter.log:
        _assert_whole_groups(inner_groups, groups)  # the outer split was grouped


def test_routing_without_groups_for_a_grouped_inner_splitter_fails_clearly(grouped):
    H, y, _ = grouped
    sklearn.set_config(enable_metadata_routing=True)
    pipe = make_pipeline(LOESSelectorCV(cv=GroupKFold(3)), LogisticRegression())
    with pytest.raises(ValueError, match="`groups`"):
        cross_validate(pipe, _flat(H), y, cv=3, error_score="raise")


def test_sample_weight_is_refused_by_the_loes_path(grouped):
    H, y, groups = grouped
    weights = np.ones(len(y))
    with pytest.raises(ValueError, match="`sample_weight` cannot be honoured"):
        LOESSelectorCV().fit(H, y, sample_weight=weights)
    with pytest.raises(TypeError, match="`weights` reaches the inner estimators"):
        LOESSelectorCV(cv=3).fit(H, y, groups=groups, weights=weights)  # no routing


# ---------------------------------------------------------------- the report
@pytest.mark.parametrize("routing", [False, True])
def test_nested_report_keeps_groups_on_one_side_outside_and_inside(grouped, routing):
    H, y, groups = grouped
    sklearn.set_config(enable_metadata_routing=routing)
    selector = LOESSelectorCV(cv=RecordingSplitter(2), max_layers_to_select=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        report = LayerReport(
            selector=selector, metrics=("isotropy",), baselines=("last_layer",), cv=3
        ).fit(H, y, groups=groups)
    assert report.n_groups_ == N_GROUPS and report.summary()["n_groups"] == N_GROUPS
    # one inner CV per outer fold (nested) and one on all rows
    _assert_no_group_on_both_sides(expected_splits=(3 + 1) * 2)
    per_fit = [RecordingSplitter.log[i][2] for i in range(0, 8, 2)]
    outer = [g for g in per_fit if len(g) < len(groups)]
    assert len(outer) == 3
    for inner_groups in outer:
        _assert_whole_groups(inner_groups, groups)


def test_report_with_groups_grouped_its_default_selectors(grouped):
    H, y, groups = grouped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        report = LayerReport(
            n_layers_to_select="auto",
            metrics=("isotropy",),
            baselines=("best_single_layer",),
            cv=3,
        ).fit(H, y, groups=groups)
    assert isinstance(report.selector_.cv, StratifiedGroupKFold)
    assert report.summary()["methods"][1]["method"] == "best_single_layer"
    with pytest.raises(ValueError, match="`groups` must hold one group per sample"):
        LayerReport().fit(H, y, groups=groups[:-1])
    with pytest.raises(ValueError, match="at least 2 groups"):
        LayerReport().fit(H, y, groups=np.zeros(len(y)))
