"""The only module that imports scikit-learn's private validation helpers."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    Interval,
    Options,
    RealNotInt,
    StrOptions,
    validate_params,
)

__all__ = [
    "HasMethods",
    "Hidden",
    "Interval",
    "Options",
    "RealNotInt",
    "StrOptions",
    "_fit_context",
    "validate_params",
]
