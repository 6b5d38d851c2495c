"""The shared rule for equality up to float rounding (tests/_support/rounding.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _support.rounding import (
    TINY_BERT_TERMS,
    assert_equal_up_to_rounding,
    equal_up_to_rounding,
    head_scale,
    rounding_tolerance,
)


def test_the_tolerance_is_twice_gamma_n_times_the_magnitude():
    u = 2.0**-24
    tol = rounding_tolerance(np.array([-3.0, 1.0]), terms=10)
    assert tol == pytest.approx(2 * 10 * u / (1 - 10 * u) * 3.0)
    assert rounding_tolerance([1.0], terms=10, dtype=np.float64) == pytest.approx(
        2 * 10 * 2.0**-53
    )
    assert rounding_tolerance([1.0], terms=1, scale=5.0) == pytest.approx(10 * u)
    with pytest.raises(ValueError, match="terms"):
        rounding_tolerance([1.0], terms=2**24)


def test_one_ulp_apart_is_accepted():
    rng = np.random.default_rng(0)
    expected = rng.normal(size=(5, 96)).astype(np.float32)
    actual = expected.copy()
    actual[0, :4] = np.nextafter(actual[0, :4], np.float32(np.inf))  # 1 ulp
    actual[3, 7] = np.nextafter(np.nextafter(actual[3, 7], 0), 0)  # 2 ulps
    assert_equal_up_to_rounding(actual, expected, terms=TINY_BERT_TERMS)
    assert equal_up_to_rounding(actual, expected, terms=TINY_BERT_TERMS)


def test_a_real_mistake_is_refused():
    rng = np.random.default_rng(0)
    expected = rng.normal(size=(5, 96)).astype(np.float32)
    leaked = expected.copy()
    leaked[2, 3] += 1e-3  # e.g. padding leaking into one pooled value
    with pytest.raises(AssertionError, match="float32 rounding of 48 terms"):
        assert_equal_up_to_rounding(leaked, expected, terms=TINY_BERT_TERMS)
    assert not equal_up_to_rounding(expected[::-1], expected, terms=TINY_BERT_TERMS)
    assert not equal_up_to_rounding(expected[:4], expected, terms=TINY_BERT_TERMS)
    # float64 is ~1e9 times stricter: one float32 step is far outside it
    ulp32 = np.nextafter(expected, np.float32(np.inf)).astype(np.float64)
    assert not equal_up_to_rounding(ulp32, expected, terms=100, dtype=np.float64)


def test_nan_must_match_nan():
    assert equal_up_to_rounding([np.nan, 1.0], [np.nan, 1.0], terms=1)
    assert not equal_up_to_rounding([0.0, 1.0], [np.nan, 1.0], terms=1)


def test_head_scale_bounds_a_linear_heads_outputs():
    rng = np.random.default_rng(1)
    coef, sigma = rng.normal(size=(3, 6)), rng.uniform(0.5, 2, size=6)
    x = rng.normal(size=(20, 6)).astype(np.float32)
    assert head_scale([[1.0, -2.0]], [[3.0, 0.5]]) == 9.0
    assert (
        head_scale([[1.0, -2.0]], [[3.0]], feature_scale=[1, 2], probabilities=True)
        == 3.0
    )
    # every feature moved by the states' bound: the logits stay within theirs
    d = rounding_tolerance(x, terms=TINY_BERT_TERMS)
    moved = x + d * np.sign(coef[0] / sigma)
    logits = (x / sigma) @ coef.T
    assert_equal_up_to_rounding(
        (moved / sigma) @ coef.T,
        logits,
        terms=TINY_BERT_TERMS,
        scale=head_scale(coef, x, feature_scale=sigma),
    )
    assert not equal_up_to_rounding(
        (x[::-1] / sigma) @ coef.T,
        logits,
        terms=TINY_BERT_TERMS,
        scale=head_scale(coef, x, feature_scale=sigma),
    )
