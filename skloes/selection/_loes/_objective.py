"""What a LOES objective gives the greedy path: a step's context and candidates.

An objective (:mod:`~skloes.selection._loes._residual`,
:mod:`~skloes.selection._loes._fused`) has three methods: ``context(k, order,
R)`` returns the :class:`StepContext` of step ``k``, ``candidate(l, k, ctx)``
scores one candidate as a :class:`Candidate`, and ``contribution(best, k,
winner, Y_hat)`` is what the winning step adds to the target fit ``Ŷ``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class StepContext:
    """Per-step quantities shared by every candidate of a step.

    ``R`` is the current residual and ``tc2`` its centred squared norm,
    ``order`` the layers selected so far, ``span`` their span (None at step
    0), ``QtR`` the residual in the span's basis, ``cent_span`` the class
    centroids of that basis (when the triangle is scored) and ``scale`` the
    loss normalisation (``loss_normalization="relative"``).
    """

    R: np.ndarray
    tc2: float
    order: list = field(default_factory=list)
    span: object = None
    QtR: np.ndarray | None = None
    cent_span: np.ndarray | None = None
    scale: float = 1.0


@dataclass
class Candidate:
    """One candidate's step loss, and its fit should it win.

    ``residual`` is the candidate orthogonalised against the span (its energy
    and class centroids; None at step 0); ``fitted()`` computes the fit of the
    step's targets (only called for the winner).
    """

    loss: float
    alpha: float
    residual: object
    fitted: Callable[[], np.ndarray]


class FitSummary:
    """The parts of a :class:`~skloes.core._ridge.RidgeSolution` a path reads."""

    def __init__(self, alpha, loss, fitted):
        self.alpha, self.loss, self.fitted = alpha, loss, fitted
