"""Tests of the paired one-standard-error rule (skloes.core._noise)."""

from __future__ import annotations

import numpy as np
import pytest

from skloes.core._noise import cheapest_within_noise, within_noise


def test_a_shift_smaller_than_the_paired_spread_is_within_noise():
    fold = np.array([0.70, 0.75, 0.80, 0.72, 0.78])  # shared fold difficulty
    jitter = np.array([0.004, -0.004, 0.004, -0.004, 0.0])
    scores = np.stack([fold, fold + jitter - 0.001, fold - 0.02], axis=1)
    mask, best = within_noise(scores)
    assert best == 0 and mask.tolist() == [True, True, False]
    # unpaired, the 2-point gap is well within the folds' 4-point spread
    assert scores[:, 2].mean() > scores[:, 0].mean() - scores[:, 0].std()


def test_cheapest_breaks_ties_by_cost_keys_then_score():
    scores = np.array([[0.80, 0.81, 0.81], [0.80, 0.80, 0.81], [0.81, 0.81, 0.80]])
    assert cheapest_within_noise(scores, [4, 1, 1])[0] == 1  # 1 then higher mean
    costs = [(1, 30), (1, 12), (4, 30)]  # layers kept, then deepest block
    assert cheapest_within_noise(scores, costs)[0] == 1


def test_a_candidate_missing_a_fold_is_never_chosen():
    scores = np.array([[0.7, np.nan], [0.7, 0.9], [0.7, 0.9]])
    mask, best = within_noise(scores)
    assert best == 0 and mask.tolist() == [True, False]
    with pytest.raises(ValueError, match="every fold"):
        within_noise(np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="n_folds, n_candidates"):
        within_noise(np.zeros(3))


def test_one_fold_keeps_only_the_best_mean():
    mask, best = within_noise([[0.5, 0.6, 0.6]])
    assert best == 1 and mask.tolist() == [False, True, True]
