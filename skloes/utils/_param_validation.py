"""The only module that imports scikit-learn's private validation helpers.

They are given here under public names (``fit_context`` is scikit-learn's
``_fit_context``), so that no module of skloes reads a private name of
another package.
"""

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

#: scikit-learn's ``_fit_context``: validates the parameters once per fit.
fit_context = _fit_context

__all__ = [
    "HasMethods",
    "Hidden",
    "Interval",
    "Options",
    "RealNotInt",
    "StrOptions",
    "fit_context",
    "validate_params",
]
