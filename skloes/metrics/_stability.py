"""How much a layer selector's answer moves across resamples of the data.

:func:`selection_stability` takes the layers a selector picked on each of
several resamples (cross-validation folds, bootstraps) and returns the
chance-corrected stability index of Nogueira, Sechidis and Brown (2018), or a
variant in which a pick within ``±tolerance`` layers of another counts as the
same pick (adjacent blocks of a deep model are near-copies). It is not a
per-layer metric, so it is not in the registry.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
from itertools import combinations

import numpy as np

from skloes.utils._validation import check_count

__all__ = ["selection_stability"]

_NAME = "selection_stability"


def _check(selections, n_layers, tolerance):
    """The selections as a boolean ``(M, n_layers)`` matrix."""
    check_count(n_layers, _NAME, "n_layers", minimum=2)
    check_count(tolerance, _NAME, "tolerance", minimum=0)
    Z = _selection_matrix(selections, n_layers)
    if Z.shape[0] < 2:
        raise ValueError(
            f"{_NAME}: `selections` must hold at least 2 selections; got {Z.shape[0]}."
        )
    return Z


def _selection_matrix(selections, n_layers):
    """A boolean ``(M, n_layers)`` matrix from a 2-D mask or any iterable of
    selections (a generator included), each a list of layer indices or a
    boolean mask over the layers."""
    if isinstance(selections, np.ndarray) and selections.dtype == bool:
        if selections.ndim != 2 or selections.shape[1] != n_layers:
            raise ValueError(
                f"{_NAME}: a boolean `selections` must have n_layers ({n_layers}) "
                f"columns, one row per resample; got shape {selections.shape}."
            )
        return selections.copy()
    if isinstance(selections, (str, bytes, dict)) or not hasattr(
        selections, "__iter__"
    ):
        raise ValueError(
            f"{_NAME}: `selections` must be a list of selections (layer indices "
            f"or boolean masks); got {type(selections).__name__}."
        )
    rows = list(selections)
    Z = np.zeros((len(rows), n_layers), dtype=bool)
    for i, picks in enumerate(rows):
        Z[i] = _one_selection(picks, i, n_layers)
    return Z


def _one_selection(picks, i, n_layers):
    """One selection as a boolean row: from indices or a mask."""
    if isinstance(picks, (str, bytes, dict)) or np.ndim(picks) == 0:
        raise ValueError(
            f"{_NAME}: each of `selections` must be a list of layer indices or a "
            f"boolean mask; selection {i} is {picks!r:.60}."
        )
    if not isinstance(picks, np.ndarray):
        kinds = {isinstance(v, (bool, np.bool_)) for v in picks}
        if len(kinds) == 2:  # [True, 1] would be read as the layers 1 and 1
            raise ValueError(
                f"{_NAME}: selection {i} of `selections` mixes booleans (a mask) "
                f"and layer indices; got {list(picks)!r:.60}."
            )
    picks = np.asarray(picks).ravel()
    row = np.zeros(n_layers, dtype=bool)
    if picks.dtype == bool:
        if picks.size != n_layers:
            raise ValueError(
                f"{_NAME}: a boolean mask in `selections` must have n_layers "
                f"({n_layers}) entries; selection {i} has {picks.size}."
            )
        return picks
    if not picks.size:
        return row
    if (
        not np.issubdtype(picks.dtype, np.integer)
        or picks.min() < 0
        or picks.max() >= n_layers
    ):
        raise ValueError(
            f"{_NAME}: `selections` must hold layer indices in "
            f"[0, {n_layers - 1}]; got {picks.tolist()!r:.80}."
        )
    row[picks] = True
    return row


def _nogueira(Z):
    """Φ̂ of Nogueira et al. (2018, Definition 4) and its variance (Theorem 7)."""
    M, d = Z.shape
    p = Z.mean(axis=0)
    kbar = p.sum()
    denom = (kbar / d) * (1 - kbar / d)
    if denom <= 0:  # every selection empty or full: undefined
        return np.nan, np.nan
    stability = 1 - M / (M - 1) * np.mean(p * (1 - p)) / denom
    k = Z.sum(axis=1)
    phi = (
        (Z @ p) / d
        - k * kbar / d**2
        + stability / 2 * (2 * k * kbar / d**2 - k / d - kbar / d + 1)
    ) / denom
    variance = 4 / M**2 * np.sum((phi - phi.mean()) ** 2)
    return float(stability), float(variance)


def _matched(a, b, tolerance):
    """Size of a maximum matching of two sorted index lists, where ``a[i]`` and
    ``b[j]`` may match when ``|a[i] - b[j]| <= tolerance`` (each index once).

    Matching the smallest unmatched pair within reach is optimal for such
    interval graphs.
    """
    i = j = m = 0
    while i < len(a) and j < len(b):
        if abs(a[i] - b[j]) <= tolerance:
            m, i, j = m + 1, i + 1, j + 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return m


@functools.lru_cache(maxsize=512)
def _expected_matched(n_layers, ka, kb, tolerance):
    """Exact mean of :func:`_matched` over two independent uniform subsets of
    ``range(n_layers)`` of sizes ``ka`` and ``kb``.

    A dynamic programme over the positions, which runs the greedy matching as
    it scans: the state is how many indices each subset has taken so far and
    the unmatched indices still within reach (all from one subset, at most
    ``tolerance + 1`` of them, kept as offsets from the current position).
    Each state holds the number of subset pairs reaching it and their total
    matching size.
    """
    mask = (1 << (tolerance + 1)) - 1
    # state: (na, nb, side, pending offsets as a bit mask) -> [count, total]
    states = {(0, 0, 0, 0): [1, 0]}
    for _ in range(n_layers):
        nxt = {}
        for (na, nb, side, pend), (count, total) in states.items():
            pend = (pend << 1) & mask  # everyone one step older; too old: gone
            for da in (0, 1):
                for db in (0, 1):
                    if na + da > ka or nb + db > kb:
                        continue
                    s, q, gain = side, pend, 0
                    if q == 0:
                        s = 0
                    for new_side, new in ((0, da), (1, db)):
                        if not new:
                            continue
                        if q and s != new_side:  # match the oldest pending one
                            q &= ~(1 << (q.bit_length() - 1))
                            gain += 1
                        else:
                            s, q = new_side, q | 1
                    if q == 0:
                        s = 0
                    key = (na + da, nb + db, s, q)
                    slot = nxt.setdefault(key, [0, 0])
                    slot[0] += count
                    slot[1] += total + gain * count
        states = nxt
    count = total = 0
    for (na, nb, _, _), (c, t) in states.items():
        if na == ka and nb == kb:
            count, total = count + c, total + t
    return total / count


def _tolerant(Z, tolerance):
    """Mean over pairs of selections of the chance-corrected matched overlap."""
    n_layers = Z.shape[1]
    sets = [np.flatnonzero(row).tolist() for row in Z]
    values = []
    for a, b in combinations(sets, 2):
        ka, kb = sorted((len(a), len(b)))
        if ka == 0 or kb == n_layers:  # an empty or a full set: undefined
            continue
        chance = _expected_matched(n_layers, ka, kb, tolerance)
        if ka - chance <= 1e-12:  # any two sets of these sizes match fully
            continue
        values.append((_matched(a, b, tolerance) - chance) / (ka - chance))
    return float(np.mean(values)) if values else np.nan


def selection_stability(selections, n_layers, *, tolerance=0, return_variance=False):
    """Chance-corrected stability of the layers a selector picks across resamples.

    With ``tolerance=0`` this is the stability estimate Φ̂ of Nogueira,
    Sechidis and Brown (2018): 1 when every resample picks the same layers, 0
    (in expectation) when the picks are independent random sets of the same
    sizes, negative when they agree less than chance. It is defined for
    selections of different sizes, and for equal sizes it equals Kuncheva's
    index (the mean pairwise overlap, rescaled between its chance level and
    its maximum).

    With ``tolerance=t >= 1`` two picks within ``t`` layers of each other
    count as the same (adjacent blocks of a deep model are near-copies): for
    every pair of selections, the overlap is the size of a maximum one-to-one
    matching between them in which layers at most ``t`` apart may match, and
    the index is the mean over pairs of ``(overlap - chance) / (min(k_a, k_b) -
    chance)``, where ``chance`` is the exact expected overlap of two
    independent uniform random sets of those sizes (computed by a dynamic
    programme, not sampled). With ``t=0`` and equal sizes this reduces to the
    index above. Pairs where any two sets of those sizes match fully (for
    example 4 of 7 layers with ``t=1``) carry no information and are skipped.

    Read more in the :ref:`User Guide <selection_stability>`.

    .. versionadded:: 0.2

    Parameters
    ----------
    selections : list of array-like of int, or array-like of bool of shape \
(n_resamples, n_layers)
        The layers picked on each resample (indices, in any order), or a
        boolean mask per resample. At least two.
    n_layers : int
        Number of layers the selector chose from (the chance level depends on
        it; a selector offered fewer candidates, for example a grid, scores
        higher by construction when its candidates are counted as all
        ``n_layers``).
    tolerance : int, default=0
        Picks at most this many layers apart count as the same.
    return_variance : bool, default=False
        Also return the variance estimate of Nogueira et al. (Theorem 7;
        ``tolerance=0`` only, NaN otherwise).

    Returns
    -------
    stability : float
        The index; NaN when undefined (every selection empty or full).
    variance : float
        Only with ``return_variance=True``.

    References
    ----------
    S. Nogueira, K. Sechidis and G. Brown, "On the Stability of Feature
    Selection Algorithms", Journal of Machine Learning Research 18(174), 2018.

    Examples
    --------
    >>> from skloes.metrics import selection_stability
    >>> same = [[15, 17, 20, 22]] * 5
    >>> selection_stability(same, 31)
    1.0
    >>> shifted = [[15, 17, 20, 22], [16, 18, 21, 23], [14, 17, 19, 22]]
    >>> round(selection_stability(shifted, 31), 2)
    0.04
    >>> round(selection_stability(shifted, 31, tolerance=1), 2)
    0.88
    """
    Z = _check(selections, n_layers, tolerance)
    if tolerance == 0:
        stability, variance = _nogueira(Z)
    else:
        stability, variance = _tolerant(Z, tolerance), np.nan
    return (stability, variance) if return_variance else stability
