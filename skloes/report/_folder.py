"""The report folder: the files :data:`~skloes.report._presenting.REPORT_FILES`
names, written from a fitted :class:`~skloes.report.LayerReport` by its
presenting modules (the tables, figures and summary of
:mod:`~skloes.report._presenting`, the page of :mod:`~skloes.report._html`).

A report owns those names only: every file is made in memory first (so that
a text that cannot be written fails before any file is), then written whole
(:func:`~skloes.core._atomic.write_whole`: never through a link, never into
a special file). A folder that already holds one of them is refused unless
the caller allows replacing (``overwrite``, ``--force``); other files are
never touched.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from skloes.core._atomic import ForeignFile, foreign_problem, write_bytes_whole
from skloes.report._html import check_about, report_page
from skloes.report._presenting import (
    REPORT_FILES,
    _csv_value,
    has_budget_curve,
    layer_columns,
)

__all__ = ["report_target_problem", "write_report"]


def report_target_problem(folder, *, overwrite, replace_hint):
    """Why ``folder`` cannot take a report now, or None.

    The one check of a report's target, run by :meth:`LayerReport.save` and,
    before any work, by ``skloes probe --out``: a file, a report name that is
    a link or a special file (never written through), and, unless
    ``overwrite``, a folder already holding a report's file are refused.
    ``replace_hint`` says how the caller's user allows replacing
    (``"overwrite=True"``, ``"--force"``). The problem ends a sentence that
    starts with the folder's name.
    """
    folder = Path(folder).expanduser()
    if folder.is_symlink() and not folder.exists():
        return "is a broken symbolic link"
    if folder.exists() and not folder.is_dir():
        return "is a file, not a folder"
    if not folder.is_dir():
        return None
    foreign = [
        f"{name}, which {problem}"
        for name in REPORT_FILES
        if (problem := foreign_problem(folder / name))
    ]
    if foreign:
        return (
            f"holds {'; '.join(foreign)}: a report writes only regular files of "
            "its own, never through a link or into a special file; move them away "
            "or choose another folder"
        )
    existing = [name for name in REPORT_FILES if (folder / name).exists()]
    if existing and not overwrite:
        return (
            f"already holds {', '.join(existing)}; pass {replace_hint} to replace "
            "them or choose another folder"
        )
    return None


def write_report(report, folder, about=None, overwrite=False):
    """Write :data:`REPORT_FILES` into ``folder`` (created); with
    ``overwrite``, an earlier report's ``budget.png`` that this one has no
    curve for is removed. ``about`` (what the report was made from) is shown
    on ``report.html``."""
    owner = "LayerReport.save"
    about = check_about(about)  # before any file is written
    problem = report_target_problem(
        folder, overwrite=overwrite, replace_hint="overwrite=True"
    )
    if problem:
        raise ValueError(f"{owner}: `folder` {os.fspath(folder)!r} {problem}.")
    files = _report_bytes(report, about, owner)
    folder = Path(folder).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            write_bytes_whole(folder / name, data)
        budget = folder / "budget.png"
        if "budget.png" not in files and budget.is_file() and not budget.is_symlink():
            budget.unlink()  # an earlier report's curve would describe no fit
    except ForeignFile as exc:  # appeared since the check
        raise ValueError(f"{owner}: {exc}") from None
    except OSError as exc:
        raise ValueError(
            f"{owner}: `folder` {os.fspath(folder)!r} cannot be written "
            f"({exc.strerror or type(exc).__name__}"
            f"{' on ' + repr(exc.filename) if exc.filename else ''})."
        ) from None
    return folder


def _report_bytes(report, about, owner):
    """``{name: bytes}`` of every file of the report, made in memory."""
    cols = layer_columns(report)
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow(list(cols))
    for i in range(len(report.layers_)):
        writer.writerow([_csv_value(cols[c][i]) for c in cols])
    texts = {
        "report.html": report_page(report, about),
        "layers.csv": table.getvalue(),
        "selection.json": json.dumps(report.summary(), indent=2) + "\n",
    }
    files = {}
    for name, text in texts.items():
        try:
            files[name] = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[max(exc.start - 20, 0) : exc.end + 20]
            raise ValueError(
                f"{owner}: the report's {name} holds text that is not valid "
                f"Unicode (a lone surrogate?) near {bad!r}; give labels, names "
                "and `about` as valid text. Nothing was written."
            ) from None
    figures = {"profile.png": report.plot()}
    if has_budget_curve(report):
        figures["budget.png"] = report.plot_budget()
    for name, fig in figures.items():
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        files[name] = buffer.getvalue()
    return {name: files[name] for name in REPORT_FILES if name in files}
