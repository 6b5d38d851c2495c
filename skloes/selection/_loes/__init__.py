"""LOES, Layer-wise Optimal Embedding Selection: the engine and its estimators.

A private subpackage, one module per concept, in the order a fit runs:

- ``_config``: the frozen configuration of one fit (the variants' components
  and how the estimator's parameters resolve against them);
- ``_prepare``: the calibration rows, the targets and the candidate layers,
  prepared once (their factors, spectra and shared products);
- ``_span``: the selected span, and a candidate orthogonalised against it;
- ``_terms``: the score and its label-blind statistics (isotropy,
  redundancy, the class-triangle term, the duplicate guard);
- ``_objective``: what an objective gives the greedy path (a step's context,
  a candidate's loss and fit);
- ``_residual``: the authors' step loss, a ridge fit of the residual;
- ``_fused``: the fast fused step loss, one ridge fit of the targets on the
  fused selection (the robust default);
- ``_path``: the greedy path that prepares once and picks one layer per step;
- ``_memory``: the path cached on disk (``memory=``);
- ``_grid``: the candidate grid (``candidate_grid="auto"``);
- ``_cv``: the budget cross-validation of ``LOESSelectorCV``;
- ``_estimators``: ``LOESSelector`` and ``LOESSelectorCV``.

See the user guide, :ref:`loes_score`, for the method and its variants.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.selection._loes._estimators import LOESSelector, LOESSelectorCV

__all__ = ["LOESSelector", "LOESSelectorCV"]
