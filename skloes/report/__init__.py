"""Reports: :class:`LayerReport`, every layer's probe score and metrics at once.

It fits the selectors and probes of the floors below on a layer stack and
summarises them. Computing and presenting live apart: ``_layer_report`` fits
(per-layer scores, metrics), ``_methods`` names the methods compared,
``_comparison`` scores them on shared folds and computes the
:class:`Recommendation` (:class:`MethodComparison`), and ``_presenting``
shows a fitted report (tables, text, files). A new report column goes in
``_layer_report``; a new way to show it in ``_presenting``.

May import: utils, core, models, extraction, metrics, selection, heads, probe.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.report._comparison import MethodComparison, MethodScore, Recommendation
from skloes.report._layer_report import LayerReport, layer_report

__all__ = [
    "LayerReport",
    "MethodComparison",
    "MethodScore",
    "Recommendation",
    "layer_report",
]
