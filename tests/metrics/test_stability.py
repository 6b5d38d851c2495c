"""The stability index of a layer selection across resamples."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from skloes.metrics import selection_stability
from skloes.metrics._stability import _expected_matched, _matched, _tolerant

SETS = [
    [15, 17, 20, 22],
    [16, 18, 21, 23],
    [14, 17, 19, 22],
    [15, 16, 20, 23],
    [15, 18, 21, 22],
]


@pytest.mark.parametrize("tolerance", [0, 1, 2])
def test_identical_selections_score_one(tolerance):
    value, variance = selection_stability(
        [[3, 9, 17, 21]] * 5, 31, tolerance=tolerance, return_variance=True
    )
    assert value == pytest.approx(1.0)
    assert np.isnan(variance) if tolerance else variance == pytest.approx(0.0)


def test_random_selections_score_zero_in_expectation():
    rng = np.random.RandomState(0)
    picks = [rng.choice(31, 4, replace=False) for _ in range(300)]
    value, variance = selection_stability(picks, 31, return_variance=True)
    assert abs(value) < 4 * np.sqrt(variance) + 1e-3
    assert abs(selection_stability(picks[:60], 31, tolerance=1)) < 0.05


def test_one_layer_shifts_are_unstable_exactly_but_stable_within_one():
    assert selection_stability(SETS, 31) < 0.3
    assert selection_stability(SETS, 31, tolerance=1) > 0.8


def test_nogueira_equals_kuncheva_for_equal_sizes():
    rng = np.random.RandomState(1)
    picks = [sorted(rng.choice(12, 5, replace=False).tolist()) for _ in range(6)]
    k, d = 5, 12
    overlaps = [len(set(a) & set(b)) for a, b in combinations(picks, 2)]
    kuncheva = np.mean([(r - k * k / d) / (k - k * k / d) for r in overlaps])
    assert selection_stability(picks, d) == pytest.approx(kuncheva)
    Z = np.zeros((6, d), dtype=bool)
    for i, p in enumerate(picks):
        Z[i, p] = True
    assert _tolerant(Z, 0) == pytest.approx(kuncheva)  # t = 0: same index


@pytest.mark.parametrize(
    "d, ka, kb, t", [(9, 3, 2, 1), (8, 3, 3, 2), (7, 4, 4, 1), (10, 1, 4, 3)]
)
def test_chance_level_is_exact(d, ka, kb, t):
    brute = np.mean(
        [
            _matched(list(a), list(b), t)
            for a in combinations(range(d), ka)
            for b in combinations(range(d), kb)
        ]
    )
    assert _expected_matched(d, ka, kb, t) == pytest.approx(brute, rel=1e-12)
    assert _expected_matched(d, ka, kb, 0) == pytest.approx(ka * kb / d)


def test_matching_is_one_to_one():
    assert _matched([17], [16, 18], 1) == 1
    assert _matched([1, 3], [2, 4], 1) == 2


def test_masks_and_indices_agree_and_order_does_not_matter():
    Z = np.zeros((5, 31), dtype=bool)
    for i, p in enumerate(SETS):
        Z[i, p] = True
    shuffled = [p[::-1] for p in SETS]
    for t in (0, 1):
        assert selection_stability(Z, 31, tolerance=t) == pytest.approx(
            selection_stability(shuffled, 31, tolerance=t)
        )


def test_selections_of_different_sizes():
    value = selection_stability([[1, 2], [1, 2, 3], [1]], 10)
    assert 0 < value < 1


def test_undefined_when_every_selection_is_empty():
    assert np.isnan(selection_stability([[], []], 5))
    assert np.isnan(selection_stability([[], []], 5, tolerance=1))


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([[1]], 5), {}, "at least 2"),
        (([[1], [7]], 5), {}, r"\[0, 4\]"),
        (([[1], [2]], 1), {}, "n_layers"),
        (([[1], [2]], 5), {"tolerance": -1}, "tolerance"),
        ((np.ones((2, 3), dtype=bool), 5), {}, "columns"),
    ],
)
def test_bad_input_names_the_parameter(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        selection_stability(*args, **kwargs)
