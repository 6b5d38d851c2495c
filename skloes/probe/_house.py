"""The house probe: the default head of every probe, ensemble and report.

A standardized linear model on pooled layers: logistic regression with
``C = 0.01`` for classes, ridge with its penalty by leave-one-out for values
(user guide: :ref:`probe`); and the default meta model of a stack of
per-layer probes (:func:`final_model`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

__all__ = [
    "PROBE_C",
    "RIDGE_ALPHAS",
    "STACK_C",
    "default_head",
    "final_model",
    "house_probe",
]

PROBE_C = 0.01
RIDGE_ALPHAS = np.logspace(-3, 3, 13)
# The meta model of ``combine="stack"``: few inputs (one block of
# probabilities per layer), so scikit-learn's default strength.
STACK_C = 1.0


def default_head(task):
    """The default final estimator: logistic regression or ridge (unscaled)."""
    if task == "classification":
        return LogisticRegression(C=PROBE_C, max_iter=1000)
    return RidgeCV(alphas=RIDGE_ALPHAS)


def house_probe(task):
    """The house probe on one layer: standardized, then :func:`default_head`."""
    return make_pipeline(StandardScaler(), default_head(task))


def final_model(task):
    """The default meta model of ``combine="stack"`` (unfitted)."""
    if task == "classification":
        return LogisticRegression(C=STACK_C, max_iter=1000)
    return RidgeCV(alphas=RIDGE_ALPHAS)
