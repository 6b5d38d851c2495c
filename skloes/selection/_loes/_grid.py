"""The candidate grid of LOES: which layers the greedy path may pick from.

Neighbouring blocks of a deep decoder are nearly interchangeable, so a greedy
search over every layer picks, from one resample to the next, different
members of the same plateau (see :ref:`loes_grid`). ``candidate_grid="auto"``
offers one representative per block of ``step`` consecutive layers, counted
down from the last one.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from math import ceil
from numbers import Integral

import numpy as np

from skloes.selection._base import AUTO_N_LAYERS

# The grid sizes itself on the larger of the "auto" budget and the budget: a
# smaller budget gets the same grid (so paths of budgets 1..4 stay nested).
# A stack of at most THIN_ABOVE layers is never thinned: there the grid's step
# would be 2, halving the candidates of a stack whose neighbouring layers are
# not near-copies (a 13-layer encoder), and a layer the grid leaves out can be
# the one that carries the task (see :ref:`loes_grid`).
THIN_ABOVE = 16


def auto_grid(n_layers, budget):
    """The representatives of the automatic grid, ascending.

    ``G = min(L, max(2K, ceil(L / 4)))`` blocks, ``step = ceil(L / G)``, and
    the layers ``L - 1, L - 1 - step, ...`` down to 0; every layer when
    ``L <= 16``.

    .. versionchanged:: 0.3
       A stack of 9 to 16 layers is no longer thinned (a 13-layer encoder was
       searched on every second layer).

    Parameters
    ----------
    n_layers : int
        Number of layers ``L`` of the stack.
    budget : int
        The budget ``K`` (the largest one tried, for a search over budgets).

    Returns
    -------
    layers : ndarray of int
        The grid, ascending; every layer when ``G = L``.

    Examples
    --------
    >>> auto_grid(31, 4).tolist()
    [2, 6, 10, 14, 18, 22, 26, 30]
    >>> auto_grid(13, 4).tolist()
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    """
    if n_layers <= THIN_ABOVE:
        return np.arange(n_layers, dtype=np.intp)
    n_groups = min(n_layers, max(2 * budget, ceil(n_layers / 4)))
    step = ceil(n_layers / n_groups)
    return np.arange(n_layers - 1, -1, -step)[::-1].astype(np.intp)


def resolve_grid(candidate_grid, variant, n_layers, budget, owner):
    """The grid layers of a fit, or None for every layer.

    Parameters
    ----------
    candidate_grid : {"auto", "all"} or array-like of int
        The estimator's parameter. ``"auto"`` is :func:`auto_grid` for the
        robust variant and every layer for the reference variant (the
        authors' search).
    variant : str
        The LOES variant.
    n_layers : int
        Number of layers in the stack.
    budget : int or "auto"
        The budget the grid must leave room for.
    owner : str
        Estimator name for the error messages.

    Returns
    -------
    grid : tuple of int or None
        Ascending distinct layers; None offers every layer.
    """
    if isinstance(candidate_grid, str):
        if candidate_grid == "all" or variant == "reference":
            return None
        k = (
            AUTO_N_LAYERS
            if isinstance(budget, str)
            else max(AUTO_N_LAYERS, int(budget))
        )
        grid = auto_grid(n_layers, k)
        return None if grid.size == n_layers else tuple(grid.tolist())
    layers = np.asarray(candidate_grid)
    if (
        layers.ndim != 1
        or layers.size == 0
        or not all(isinstance(v, Integral | np.integer) for v in layers.tolist())
    ):
        raise ValueError(
            f"{owner}: `candidate_grid` must be 'auto', 'all' or a "
            f"non-empty list of layer indices; got {candidate_grid!r}."
        )
    layers = np.unique(layers.astype(np.intp))
    if layers[0] < 0 or layers[-1] >= n_layers:
        raise ValueError(
            f"{owner}: `candidate_grid` must hold layers in "
            f"[0, {n_layers - 1}]; got {layers.tolist()}."
        )
    return tuple(layers.tolist())
