"""Reports: :class:`LayerReport`, every layer's probe score and metrics at once.

It fits the selectors and probes of the floors below on a layer stack and
summarises them (table, JSON, plot). A new report column goes here.

May import: utils, core, models, extraction, metrics, selection, heads, probe.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.report._layer_report import LayerReport, layer_report

__all__ = ["LayerReport", "layer_report"]
