"""Within noise: the paired one-standard-error rule over shared folds.

Several candidates (budgets of a selection, or answers of a report) scored on
the **same** cross-validation folds differ by less than their spread suggests:
the folds move them together. Candidate ``j`` is *within noise* of the best
candidate ``b`` (highest mean score) when its fold-wise difference ``d = s_j -
s_b`` has ``mean(d) + se(d) >= 0``, ``se(d) = std(d, ddof=1) / sqrt(n_folds)``:
it is not worse by more than one standard error of the paired difference
(the one-standard-error rule of Breiman et al. 1984, on paired differences as
in Nadeau and Bengio 2003's comparisons over shared folds). Of those, the
cheapest is the answer (:func:`cheapest_within_noise`). See
:ref:`loes_cv` and :ref:`report_recommendation`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

__all__ = ["cheapest_within_noise", "within_noise"]


def within_noise(scores):
    """Which candidates are within one paired standard error of the best.

    Parameters
    ----------
    scores : array-like of shape (n_folds, n_candidates)
        Held-out score of each candidate on each fold, the folds shared
        (higher is better). A candidate with a NaN (not scored on every
        fold) is never within noise.

    Returns
    -------
    mask : ndarray of bool, shape (n_candidates,)
        True for the best candidate and every candidate within noise of it.
    best : int
        The candidate with the highest mean score (the first on ties).

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._noise import within_noise
    >>> s = np.array([[0.70, 0.74, 0.60], [0.72, 0.73, 0.61], [0.69, 0.75, 0.63]])
    >>> mask, best = within_noise(s)
    >>> mask.tolist(), best
    ([False, True, False], 1)
    """
    S = np.asarray(scores, dtype=np.float64)
    if S.ndim != 2 or S.shape[1] == 0:
        raise ValueError(
            f"within_noise: `scores` must be (n_folds, n_candidates); got shape "
            f"{S.shape}."
        )
    complete = ~np.isnan(S).any(axis=0)
    if not complete.any():
        raise ValueError("within_noise: no candidate was scored on every fold.")
    mean = np.where(complete, np.nan_to_num(S.mean(axis=0)), -np.inf)
    best = int(np.argmax(mean))
    if S.shape[0] < 2:
        return mean >= mean[best], best
    d = S - S[:, [best]]
    se = np.nan_to_num(d.std(axis=0, ddof=1)) / np.sqrt(S.shape[0])
    mask = complete & (np.nan_to_num(d.mean(axis=0), nan=-np.inf) + se >= 0)
    mask[best] = True
    return mask, best


def cheapest_within_noise(scores, costs):
    """The cheapest candidate within noise of the best (:func:`within_noise`).

    Parameters
    ----------
    scores : array-like of shape (n_folds, n_candidates)
        Held-out scores on shared folds.
    costs : array-like of shape (n_candidates,) or (n_candidates, n_keys)
        Cost of each candidate, compared in order of the keys (for example
        layers kept, then deepest block run); ties go to the higher mean
        score, then to the first candidate.

    Returns
    -------
    choice : int
        Index of the chosen candidate.
    best : int
        Index of the candidate with the best mean score.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._noise import cheapest_within_noise
    >>> s = np.array([[0.74, 0.75], [0.73, 0.74], [0.75, 0.74]])
    >>> cheapest_within_noise(s, costs=[1, 4])
    (0, 1)
    """
    mask, best = within_noise(scores)
    S = np.asarray(scores, dtype=np.float64)
    C = np.asarray(costs, dtype=np.float64).reshape(S.shape[1], -1)
    mean = np.nan_to_num(S.mean(axis=0), nan=-np.inf)
    keys = [(*C[j], -mean[j], j) for j in np.flatnonzero(mask)]
    return int(min(keys)[-1]), best
