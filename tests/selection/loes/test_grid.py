"""The candidate grid of LOESSelector and LOESSelectorCV (issue 21)."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
from __future__ import annotations

import numpy as np
import pytest

from skloes import LOESSelector, LOESSelectorCV
from skloes.selection._loes._grid import auto_grid

SMOL_GRID = [2, 6, 10, 14, 18, 22, 26, 30]


@pytest.fixture(scope="module")
def deep():
    """A 31-layer stack whose middle blocks carry the classes, as a decoder's."""
    rng = np.random.RandomState(0)
    y = rng.randint(0, 3, size=150)
    stack = rng.normal(size=(31, 150, 6))
    for layer in range(12, 24):
        stack[layer, :, :3] += (1.0 + 0.1 * layer) * np.eye(3)[y]
    return stack, y


@pytest.mark.parametrize(
    "n_layers, budget, expected",
    [
        (31, 4, SMOL_GRID),
        (31, 1, SMOL_GRID),
        (7, 4, list(range(7))),
        (13, 4, list(range(13))),
        (16, 4, list(range(16))),
        (17, 4, [1, 4, 7, 10, 13, 16]),
        (31, 6, [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30]),
        (100, 4, list(range(3, 100, 4))),
    ],
)
def test_auto_grid_counts_down_from_the_last_layer(n_layers, budget, expected):
    assert auto_grid(n_layers, budget).tolist() == expected


def test_default_picks_only_grid_layers(deep):
    stack, y = deep
    sel = LOESSelector(random_state=0).fit(stack, y)
    assert sel.grid_layers_.tolist() == SMOL_GRID
    assert sel.candidates_.tolist() == SMOL_GRID
    assert set(sel.selection_order_.tolist()) <= set(SMOL_GRID)
    assert sel.n_selected_ == 4


def test_grid_fit_equals_a_fit_on_the_grid_substack(deep):
    stack, y = deep
    sel = LOESSelector(random_state=0).fit(stack, y)
    sub = LOESSelector(candidate_grid="all", random_state=0).fit(stack[SMOL_GRID], y)
    np.testing.assert_array_equal(
        sel.selection_order_, np.array(SMOL_GRID)[sub.selection_order_]
    )


def test_reference_and_all_search_every_layer(deep):
    stack, y = deep
    ref = LOESSelector(variant="reference", random_state=0).fit(stack, y)
    assert ref.grid_layers_.tolist() == list(range(31))
    assert ref.candidates_.size == 31
    every = LOESSelector(candidate_grid="all", random_state=0).fit(stack, y)
    assert every.candidates_.size == 31


def test_explicit_grid_and_its_errors(deep):
    stack, y = deep
    sel = LOESSelector(
        candidate_grid=[20, 5, 15, 5], n_layers_to_select=2, random_state=0
    ).fit(stack, y)
    assert sel.grid_layers_.tolist() == [5, 15, 20]
    assert set(sel.selection_order_.tolist()) <= {5, 15, 20}
    with pytest.raises(ValueError, match="candidate_grid"):
        LOESSelector(candidate_grid=[0, 31]).fit(stack, y)
    with pytest.raises(ValueError, match="candidate_grid"):
        LOESSelector(candidate_grid=[0.5, 2]).fit(stack, y)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(candidate_grid=[3], n_layers_to_select=2).fit(stack, y)


def test_shallow_stack_is_not_thinned():
    rng = np.random.RandomState(1)
    y = rng.randint(0, 2, size=80)
    stack = rng.normal(size=(7, 80, 5))
    stack[2, :, 0] += 2 * y
    auto = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    every = LOESSelector(
        n_layers_to_select=2, candidate_grid="all", random_state=0
    ).fit(stack, y)
    assert auto.grid_layers_.tolist() == list(range(7))
    np.testing.assert_array_equal(auto.selection_order_, every.selection_order_)


def test_mid_sized_stack_finds_a_signal_between_former_grid_layers():
    """13 layers: only layer 11 carries the labels, and 11 was not on the
    former grid (every second layer from 12 down)."""
    rng = np.random.RandomState(0)
    y = rng.randint(0, 3, size=150)
    stack = rng.normal(size=(13, 150, 6))
    stack[11, :, :3] += 2.0 * np.eye(3)[y]
    sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    assert 11 in sel.grid_layers_.tolist()
    assert sel.selection_order_[0] == 11
    former = LOESSelector(
        n_layers_to_select=2, candidate_grid=list(range(0, 13, 2)), random_state=0
    ).fit(stack, y)
    assert 11 not in former.selection_order_.tolist()


@pytest.mark.parametrize("own", ["auto", 6])
def test_cv_searches_the_selector_s_own_grid_and_holds_its_answer(deep, own):
    """The path cross-validated is the selector's: its grid at its own budget,
    so the path's prefix at that budget is the selector's answer."""
    stack, y = deep
    selector = LOESSelector(n_layers_to_select=own, random_state=0)
    cv = LOESSelectorCV(selector=selector, max_layers_to_select=10, cv=3)
    cv.fit(stack, y)
    k = 4 if own == "auto" else own
    assert cv.grid_layers_.tolist() == auto_grid(31, k).tolist()
    # the largest budget is clipped to the grid's size
    assert cv.cv_results_["n_layers"][-1] == min(10, len(cv.grid_layers_))
    for i in range(3):
        order = cv.cv_results_[f"split{i}_selection_order"]
        assert set(order[order >= 0].tolist()) <= set(cv.grid_layers_.tolist())
    fixed = LOESSelector(n_layers_to_select=own, random_state=0).fit(stack, y)
    path = LOESSelector(
        n_layers_to_select=len(cv.grid_layers_),
        candidate_grid=cv.grid_layers_.tolist(),
        random_state=0,
    ).fit(stack, y)
    assert set(path.selection_order_[:k].tolist()) == set(
        fixed.selected_layers_.tolist()
    )


def test_cv_reports_fold_selections_and_their_stability(deep):
    from skloes.metrics import selection_stability

    stack, y = deep
    cv = LOESSelectorCV(
        selector=LOESSelector(random_state=0), max_layers_to_select=4, cv=3
    ).fit(stack, y)
    k = cv.n_layers_to_select_
    assert len(cv.fold_selections_) == 3
    for i, picks in enumerate(cv.fold_selections_):
        np.testing.assert_array_equal(
            picks, cv.cv_results_[f"split{i}_selection_order"][:k]
        )
    assert cv.selection_stability_ == pytest.approx(
        selection_stability(cv.fold_selections_, 31)
    )


def test_one_se_rule_prefers_the_smaller_budget_within_noise():
    from skloes.selection._loes._cv import choose_budget

    scores = np.array([[0.80, 0.83, 0.84], [0.82, 0.81, 0.86], [0.78, 0.85, 0.85]])
    # means 0.800, 0.830, 0.850; SE at K=3 is 0.00577: only K=3 is within it
    assert choose_budget(scores, "best") == 3
    assert choose_budget(scores, "one_se") == 3
    noisy = np.array([[0.80, 0.90], [0.84, 0.78], [0.82, 0.87]])
    # means 0.820, 0.850; SE at K=2 is 0.0361: K=1 is within it
    assert choose_budget(noisy, "best") == 2
    assert choose_budget(noisy, "one_se") == 1


def test_paired_rule_keeps_a_gain_that_every_fold_shares():
    """Folds of different difficulty: unpaired, one SE of the best budget's
    scores covers K=1; paired, K=2 beats K=1 on every fold."""
    from skloes.selection._loes._cv import choose_budget

    scores = np.array([[0.705, 0.73, 0.73], [0.805, 0.82, 0.83], [0.755, 0.78, 0.77]])
    assert choose_budget(scores, "one_se") == 1
    assert choose_budget(scores, "paired_se") == 2
    ragged = np.array([[0.70, 0.90], [0.71, np.nan], [0.69, 0.90]])
    assert choose_budget(ragged, "paired_se") == 1  # K=2: not reached by a fold


def test_anchored_rule_keeps_the_own_budget_unless_the_folds_rule_it_out():
    from skloes.selection._loes._cv import choose_budget

    flat = np.array(
        [
            [0.72, 0.70, 0.71, 0.73, 0.70],
            [0.70, 0.73, 0.72, 0.70, 0.73],
            [0.73, 0.71, 0.73, 0.72, 0.71],
        ]
    )  # every budget within noise of the best
    assert choose_budget(flat, "paired_se") == 1
    assert choose_budget(flat, "anchored", 4) == 4
    assert choose_budget(flat, "anchored", 9) == 5  # the nearest budget tried
    clear = np.array(
        [[0.60, 0.70, 0.80, 0.70], [0.61, 0.71, 0.81, 0.72], [0.62, 0.72, 0.82, 0.71]]
    )  # K=3 beats every other budget on every fold
    assert choose_budget(clear, "anchored", 1) == 3
    assert choose_budget(clear, "anchored", 4) == 3
    tie = np.array([[0.70, 0.70, 0.70], [0.71, 0.71, 0.71]])
    assert choose_budget(tie, "anchored", 2) == 2
    ragged = np.array([[0.70, 0.71, 0.90], [0.71, 0.70, np.nan], [0.69, 0.70, 0.90]])
    assert choose_budget(ragged, "anchored", 3) == 2  # K=3: not reached by a fold


def test_budget_rules_agree_on_a_clear_gain(deep):
    stack, y = deep
    kw = dict(selector=LOESSelector(random_state=0), max_layers_to_select=3, cv=3)
    best = LOESSelectorCV(budget_rule="best", **kw).fit(stack, y)
    one_se = LOESSelectorCV(budget_rule="one_se", **kw).fit(stack, y)
    paired = LOESSelectorCV(budget_rule="paired_se", **kw).fit(stack, y)
    assert one_se.n_layers_to_select_ <= best.n_layers_to_select_
    assert paired.n_layers_to_select_ <= best.n_layers_to_select_
    anchored = LOESSelectorCV(**kw).fit(stack, y)  # the default rule
    for other in (one_se, paired, anchored):
        np.testing.assert_array_equal(
            best.cv_results_["mean_test_score"], other.cv_results_["mean_test_score"]
        )
