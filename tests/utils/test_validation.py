"""One rule per kind of value a function takes (skloes.utils._validation):
flags, counts, sample counts and thresholds are refused in the same words
wherever they are taken."""

from __future__ import annotations

import numpy as np
import pytest

from skloes.utils._validation import (
    check_bool,
    check_count,
    check_sample_count,
    check_threshold,
)


@pytest.mark.parametrize("value", [True, False, np.True_, np.False_])
def test_a_flag_is_true_or_false_numpy_included(value):
    assert check_bool(value, "f", "flag") is bool(value)


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_anything_else_is_not_a_flag(value):
    with pytest.raises(TypeError, match=r"^f: `flag` must be True or False; got"):
        check_bool(value, "f", "flag")


@pytest.mark.parametrize("value", [1, 7, np.int64(3)])
def test_a_count_is_an_integer(value):
    assert check_count(value, "f", "n") == int(value)


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "2", None])
def test_anything_else_is_not_a_count(value):
    with pytest.raises(ValueError, match=r"^f: `n` must be a positive int; got"):
        check_count(value, "f", "n")


@pytest.mark.parametrize(
    "minimum, allow_none, value, expected",
    [
        (2, False, 1, r"`n` must be an int >= 2; got 1\."),
        (0, False, -1, r"`n` must be an int >= 0; got -1\."),
        (1, True, 0, r"`n` must be a positive int or None; got 0\."),
        (2, True, np.float64(3.0), r"`n` must be an int >= 2 or None; got "),
    ],
)
def test_a_count_check_says_its_minimum_and_whether_none_is_allowed(
    minimum, allow_none, value, expected
):
    with pytest.raises(ValueError, match=rf"^f: {expected}"):
        check_count(value, "f", "n", minimum=minimum, allow_none=allow_none)
    assert check_count(None, "f", "n", allow_none=True) is None
    assert check_count(np.int8(minimum), "f", "n", minimum=minimum) == minimum


@pytest.mark.parametrize(
    "value, expected",
    [(1, 1), (np.int32(5), 5), (0.5, 0.5), (1.0, 1.0), (np.float64(0.1), 0.1)],
)
def test_a_sample_count_is_a_count_or_a_fraction(value, expected):
    out = check_sample_count(value, "f")
    assert out == expected and type(out) is type(expected)


@pytest.mark.parametrize("value", [0, -3, 1.5, 0.0, float("nan"), True, "10"])
def test_anything_else_is_not_a_sample_count(value):
    with pytest.raises(ValueError, match=r"^f: `n_samples` must be a positive int"):
        check_sample_count(value, "f")


def test_a_threshold_is_finite_and_within_its_bounds():
    assert check_threshold(np.float32(0.5), "f", low=0, high=4) == 0.5
    for value, bounds in [(4, r"in \[0, 4\)"), (-1, r"in \[0, 4\)")]:
        with pytest.raises(ValueError, match=rf"`threshold` must be .*{bounds}"):
            check_threshold(value, "f", low=0, high=4)
    with pytest.raises(ValueError, match=r"finite number >= 1; got inf"):
        check_threshold(float("inf"), "f", low=1)
    with pytest.raises(ValueError, match=r"finite number below 2; got True"):
        check_threshold(True, "f", high=2)
