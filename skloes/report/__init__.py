"""Reports: :class:`LayerReport`, every layer's probe score and metrics at once.

It fits the selectors and probes of the floors below on a layer stack and
summarises them. Computing and presenting live apart: ``_layer_report`` is
the estimator and its fit, which checks its inputs (``_report_inputs``),
splits the folds and scores every layer (``_layer_scoring``, whose frozen
``LayerScores`` is all the comparison is given), computes the metrics
(``_layer_metrics``); ``_methods`` names the methods compared,
``_comparison`` scores them on shared folds (``_fold_fusion`` for the
per-layer fusions) and computes the :class:`Recommendation`
(:class:`MethodComparison`); ``_reading`` holds the report's reading
methods, ``_presenting`` shows a fitted report (tables, text, files) and
``_html`` its page, whose styles and script are the package data files of
``_static/``. A new report column goes in ``_layer_report``; a new way to
show it in ``_presenting``.

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
