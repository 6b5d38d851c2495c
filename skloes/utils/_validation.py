"""One validation rule per kind of value that functions (not estimators) take.

Estimators validate through ``_parameter_constraints``; plain functions such
as the data set loaders call these, so that a sample count, a threshold or a
flag is refused in the same words wherever it is taken.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = ["check_bool", "check_count", "check_sample_count", "check_threshold"]


def check_bool(value, owner, param):
    """``value`` if it is True or False (numpy's too), else a TypeError."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{owner}: `{param}` must be True or False; got {value!r}.")


def check_count(value, owner, param, *, minimum=1, allow_none=False):
    """An integer count ``>= minimum`` (numpy's too; a bool or a float is
    refused), or None where ``allow_none``: the one count check of skloes.

    The error names ``owner``, the parameter and what was expected ("a
    positive int", or "an int >= minimum").
    """
    if value is None and allow_none:
        return None
    if isinstance(value, Integral) and not isinstance(value, bool) and value >= minimum:
        return int(value)
    expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
    expected += " or None" if allow_none else ""
    raise ValueError(f"{owner}: `{param}` must be {expected}; got {value!r}.")


def check_sample_count(value, owner, param="n_samples"):
    """A number of samples: an int >= 1, or a fraction in (0, 1].

    An int is a count (``1`` is one sample, never "all of them"), a float a
    fraction (``1.0`` is every sample); a bool, NaN, a negative number or a
    float above 1 is refused.
    """
    if isinstance(value, Integral) and not isinstance(value, bool):
        if value >= 1:
            return int(value)
    elif isinstance(value, Real) and not isinstance(value, bool):
        if math.isfinite(value) and 0 < value <= 1:
            return float(value)
    raise ValueError(
        f"{owner}: `{param}` must be a positive int (a count), a float in (0, 1] "
        f"(a fraction) or None; got {value!r}."
    )


def check_threshold(value, owner, param="threshold", *, low=None, high=None):
    """A finite real number in ``[low, high)`` (either bound may be None)."""
    valid = (
        isinstance(value, Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (low is None or value >= low)
        and (high is None or value < high)
    )
    if valid:
        return float(value)
    bounds = (
        f" in [{low}, {high})"
        if low is not None and high is not None
        else f" >= {low}"
        if low is not None
        else f" below {high}"
        if high is not None
        else ""
    )
    raise ValueError(
        f"{owner}: `{param}` must be a finite number{bounds}; got {value!r}."
    )
