"""What a fitted :class:`~skloes.report.LayerReport` offers its reader.

The per-layer table as a frame or text, the selection summary as a dict or
text, the plots, the page and the report folder: the methods of
``LayerReport`` that read a fitted report, defined here and bound in its
class body (``save = _reading.save``), so that the estimator's module holds
its fit. Each checks that the report is fitted, then hands it to the module
that does the work (:mod:`skloes.report._presenting`, :mod:`skloes.plotting`,
:mod:`skloes.report._html`, :mod:`skloes.report._folder`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

import skloes.report._presenting as _presenting
from skloes.utils._validation import check_bool

__all__ = [
    "format_summary",
    "format_table",
    "plot",
    "plot_budget",
    "save",
    "summary",
    "to_frame",
    "to_html",
]


def to_frame(self):
    """The per-layer table as a pandas DataFrame indexed by layer.

    Returns
    -------
    frame : pandas.DataFrame
        Columns ``probe_score``, ``probe_score_std``, ``selected``,
        ``selection_frequency`` (with fold selections) and one per metric.
    """
    from skloes.utils._optional import import_optional

    check_is_fitted(self, "comparison_")
    pd = import_optional("pandas", extra="plot")
    return pd.DataFrame(_presenting.layer_columns(self)).set_index("layer")


def summary(self):
    """The selection summary as a JSON-ready dict.

    Returns
    -------
    summary : dict
        The task, the scoring, the ``fusion`` every multi-layer method
        was scored under and ``fusion_counts`` (``fusion_``: how many
        folds of each method used each fusion), whether the selection
        was ``nested``, the number of folds and of groups (None without
        ``groups``), the selected layers and order, the fused (LOES) score, the last
        layer's score, the best single layer and its score (from the
        ``best_single_layer`` method when it is a baseline, so with
        ``nested`` chosen by inner CV; else the profile's best), the
        profile's best layer and score (``profile_best_layer``: the
        argmax of the per-layer table, a description), the fold
        selections, their stability and per-layer frequency (None
        without), ``recommendation`` (``recommendation_``) and every
        method of ``summary_``.
    """
    check_is_fitted(self, "summary_")
    return _presenting.selection_summary(self)


def format_table(self):
    """The per-layer table as plain text (one row per layer).

    Returns
    -------
    table : str
        A header line, then one line per layer.
    """
    check_is_fitted(self, "comparison_")
    return _presenting.format_table(self)


def format_summary(self):
    """The selection summary as plain text, LOES first.

    Returns
    -------
    summary : str
        A header line, one line per method (with its cost: layers kept,
        deepest block), the recommendation and why, how the multi-layer
        methods combined their layers (``fusion``, and with ``"auto"``
        what each method's folds chose), then (with fold selections) the
        layers each fold picked and their stability.
    """
    check_is_fitted(self, "comparison_")
    return _presenting.format_summary(self)


def plot(self, metrics=None, *, ax=None, figsize=(10.0, 6.0)):
    """Draw the layer profile (probe score and metrics against the layer).

    Parameters
    ----------
    metrics : list of str or None, default=None
        Metrics to draw; None draws every metric.
    ax : pair of matplotlib Axes or None, default=None
        Axes for the score and the metric panels; None makes a new figure.
    figsize : tuple of float, default=(10.0, 6.0)
        Size in inches of a new figure.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure holding both panels.
    """
    from skloes.plotting import plot_layer_profile

    check_is_fitted(self, "summary_")
    return plot_layer_profile(self, metrics=metrics, ax=ax, figsize=figsize)


def plot_budget(self, *, ax=None, figsize=(5.5, 3.5)):
    """Draw the cross-validated budget curve of the report's selector.

    Only when the selector is a ``LOESSelectorCV``
    (``n_layers_to_select="auto"``); see
    :func:`~skloes.plotting.plot_budget_curve`.

    .. versionadded:: 0.3

    Parameters
    ----------
    ax : matplotlib Axes or None, default=None
        Where to draw; None makes a new figure.
    figsize : tuple of float, default=(5.5, 3.5)
        Size in inches of a new figure.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure drawn on.
    """
    from skloes.plotting import plot_budget_curve

    check_is_fitted(self, "summary_")
    return plot_budget_curve(self.selector_, ax=ax, figsize=figsize)


def save(self, folder, *, about=None, overwrite=False):
    """Write ``report.html``, ``layers.csv``, ``profile.png``, ``selection.json``.

    With a ``LOESSelectorCV`` selector, also ``budget.png``, its
    cross-validated budget curve (:meth:`plot_budget`). ``report.html``
    is one self-contained page (no network, scripts optional) that shows
    every number of the other files (see :ref:`report_page`).

    Each file is made in memory, then written whole; a report never
    writes through a symbolic link or into a special file, and never
    touches a file of the folder other than those above.

    .. versionchanged:: 0.3
       Writes ``report.html`` too; ``about`` and ``overwrite`` added.

    Parameters
    ----------
    folder : str or os.PathLike
        Created if missing. A folder that already holds one of the
        files above is refused unless ``overwrite``; one where such a
        name is a symbolic link or not a regular file is always refused.
    about : dict of str to object or None, default=None
        What the report was made from (``{"data": ..., "model": ...}``),
        shown as text on ``report.html``; ``skloes probe`` gives the data,
        the model and the extraction settings.
    overwrite : bool, default=False
        Replace the report files already in ``folder`` (and remove an
        earlier ``budget.png`` this report has no curve for), as
        ``skloes probe --force`` does.

    Returns
    -------
    folder : pathlib.Path
        The folder written.
    """
    check_is_fitted(self, "comparison_")
    from skloes.report._folder import write_report

    overwrite = check_bool(overwrite, "LayerReport.save", "overwrite")
    return write_report(self, folder, about=about, overwrite=overwrite)


def to_html(self, about=None):
    """The report as one self-contained HTML page (``report.html``).

    .. versionadded:: 0.3

    Parameters
    ----------
    about : dict of str to object or None, default=None
        What the report was made from, shown as text (see :meth:`save`).

    Returns
    -------
    html : str
        A complete HTML document with inline styles, SVG and script.
    """
    from skloes.report._html import report_page

    check_is_fitted(self, "comparison_")
    return report_page(self, about)
