"""The names of the fusions of selected layers, and the default one.

One home for the ``fusion`` values that the probes, the report and the
command line take (the command line's option table reads them from here
without importing the estimators): ``"average"`` and ``"stack"`` combine one
probe per layer (:class:`~skloes.probe.LayerEnsembleClassifier`),
``"concatenate"`` fits one probe on the concatenated layers, and ``"auto"``
chooses among those three by inner cross-validation on the training rows
(:data:`CANDIDATES`, ties to the first). The default was chosen by
measurement (``benchmarks/bench_fusion.py``; the user guide's :ref:`fusion`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

__all__ = ["CANDIDATES", "DEFAULT_FUSION", "FUSIONS"]

FUSIONS = ("auto", "average", "stack", "concatenate")
# What "auto" chooses among, in the order that breaks a tie: one model is
# cheapest to predict and to export, then the mean, then the meta model.
CANDIDATES = ("concatenate", "average", "stack")
DEFAULT_FUSION = "auto"
