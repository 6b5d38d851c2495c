"""The report folder: the files :data:`~skloes.report._presenting.REPORT_FILES`
names, written from a fitted :class:`~skloes.report.LayerReport` by its
presenting modules (the tables, figures and summary of
:mod:`~skloes.report._presenting`, the page of :mod:`~skloes.report._html`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import json
from pathlib import Path

from skloes.report._html import check_about, report_page
from skloes.report._presenting import (
    REPORT_FILES,
    _csv_value,
    has_budget_curve,
    layer_columns,
)

__all__ = ["write_report"]


def write_report(report, folder, about=None):
    """Write :data:`REPORT_FILES` into ``folder`` (created); an earlier
    report's ``budget.png`` that this one has no curve for is removed.
    ``about`` (what the report was made from) is shown on ``report.html``."""
    about = check_about(about)  # before any file is written
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    page, table, profile, summary, budget = (folder / name for name in REPORT_FILES)
    cols = layer_columns(report)
    with open(table, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(list(cols))
        for i in range(len(report.layers_)):
            writer.writerow([_csv_value(cols[c][i]) for c in cols])
    with open(summary, "w", encoding="utf-8") as f:
        json.dump(report.summary(), f, indent=2)
        f.write("\n")
    report.plot().savefig(profile, dpi=100)
    if has_budget_curve(report):
        report.plot_budget().savefig(budget, dpi=100)
    elif budget.is_file():  # an earlier report's curve would describe no fit
        budget.unlink()
    with open(page, "w", encoding="utf-8") as f:
        f.write(report_page(report, about))
    return folder
