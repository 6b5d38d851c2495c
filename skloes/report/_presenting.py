"""Presenting a fitted report: text tables, the recommendation in words, files.

Everything here reads a fitted :class:`~skloes.report.LayerReport` through
its public attributes (``probe_scores_``, ``metrics_``, ``comparison_``,
``recommendation_``...) and computes nothing of its own: the numbers come
from :mod:`skloes.report._layer_report` and :mod:`skloes.report._comparison`.
The plots are :mod:`skloes.plotting`'s.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

__all__ = [
    "REPORT_COLUMNS",
    "REPORT_FILES",
    "format_summary",
    "fusion_text",
    "format_table",
    "has_budget_curve",
    "layer_columns",
    "recommendation_text",
    "selection_summary",
]

# The files :func:`write_report` writes (``budget.png`` only with a
# ``LOESSelectorCV``): a report folder holds these and nothing else of ours.
# ``report.html`` (:mod:`skloes.report._html`) shows all the others hold.
REPORT_FILES = (
    "report.html",
    "layers.csv",
    "profile.png",
    "selection.json",
    "budget.png",
)


def recommendation_text(rec, n_splits):
    """The recommendation and why, in one sentence (report and command line).

    Parameters
    ----------
    rec : Recommendation or dict
        ``LayerReport.recommendation_`` (or its JSON form).
    n_splits : int
        The number of shared folds.

    Returns
    -------
    text : str
    """
    cost = (
        f"{rec['n_layers_kept']} layer{'s' if rec['n_layers_kept'] > 1 else ''} "
        f"kept, deepest block {rec['deepest_layer']}"
    )
    head = f"recommended: {rec['method']} ({cost}): {rec['score']:.4f}"
    if rec["method"] == rec["best_method"]:
        others = [m for m in rec["within_noise"] if m != rec["method"]]
        why = (
            "the best score, and no cheaper answer is within noise of it"
            if not others
            else f"the best score and the cheapest within noise of it "
            f"(also within noise: {', '.join(others)})"
        )
    else:
        why = (
            f"within noise of the best, {rec['best_method']} "
            f"{rec['best_score']:.4f} (difference {rec['difference']:+.4f} ± "
            f"{rec['difference_se']:.4f}), and cheaper"
        )
    return (
        f"{head}: {why}; within noise = less than one standard error of the "
        f"paired difference below the best over the same {n_splits} folds"
    )


FUSION_WORDS = {
    "auto": "in each fold, the best of concatenation, average and stack by "
    "closed-form leave-one-out scores on its training rows",
    "average": "one probe per layer, their probabilities averaged",
    "stack": "one probe per layer, a meta model on their out-of-fold outputs",
    "concatenate": "one probe on the concatenated layers",
}


def fusion_text(fusion, counts, regression=False):
    """How the multi-layer methods combined their layers, in one line.

    Parameters
    ----------
    fusion : str
        The report's ``fusion``.
    counts : dict of str to dict
        ``LayerReport.fusion_`` (its summary's ``fusion_counts``): for each
        method, the folds that used each fusion.
    regression : bool, default=False
        Predictions, not probabilities, are averaged.

    Returns
    -------
    text : str
        "multi-layer methods scored with fusion=...", and with ``"auto"``
        what each multi-layer method's folds chose.
    """
    words = FUSION_WORDS[fusion]
    if regression:
        words = words.replace("probabilities", "predictions")
    text = f"multi-layer methods scored with fusion={fusion!r} ({words})"
    if fusion != "auto":
        return text
    chosen = [
        f"{method} " + ", ".join(f"{name} {n}" for name, n in c.items())
        for method, c in counts.items()
        if c
    ]
    if chosen:
        text += "; folds chose: " + "; ".join(chosen)
    return text


def _fmt(value, width=9):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-".rjust(width)
    if isinstance(value, (bool, np.bool_)):
        return ("*" if value else "").rjust(width)
    value = float(value)
    if abs(value) >= 1000 or (value != 0 and abs(value) < 1e-3):
        return f"{value:.3g}".rjust(width)
    return f"{value:.4f}".rjust(width)


# The per-layer table's own columns, before the metrics: no metric may take
# one of these names (``LayerReport.fit`` refuses an ``extra_metrics`` key).
REPORT_COLUMNS = (
    "layer",
    "probe_score",
    "probe_score_std",
    "selected",
    "selection_frequency",
)


def layer_columns(report):
    """The per-layer table's columns: layer, probe score and spread, whether
    LOES selected it, how often the folds picked it, then every metric."""
    cols = {
        "layer": report.layers_,
        "probe_score": report.probe_scores_,
        "probe_score_std": report.probe_scores_std_,
        "selected": np.isin(report.layers_, report.selected_layers_),
    }
    if report.selection_frequency_ is not None:
        cols["selection_frequency"] = report.selection_frequency_
    cols.update(report.metrics_)
    return cols


def has_budget_curve(report):
    """Whether the report's selector drew a budget curve (a LOESSelectorCV)."""
    return "n_layers" in getattr(report.selector_, "cv_results_", {})


def format_table(report):
    """The per-layer table as plain text (one row per layer)."""
    cols = layer_columns(report)
    names = [c for c in cols if c != "layer"]
    widths = {c: max(9, len(c) + 2) for c in names}
    lines = ["layer" + "".join(c.rjust(widths[c]) for c in names)]
    for i, layer in enumerate(cols["layer"]):
        row = "".join(_fmt(cols[c][i], widths[c]) for c in names)
        lines.append(f"{layer:>5}{row}")
    return "\n".join(lines)


def format_summary(report):
    """The selection summary as plain text, LOES first: one line per method
    with its cost, the recommendation and why, the layers each fold picked."""
    lines = [
        f"{'method':<18}{'layers':<22}{report.scoring_ + ' (CV)':>16}"
        f"{'kept':>6}{'deepest':>9}"
    ]
    for e in report.comparison_.methods:
        layers = ",".join(map(str, e.layers))
        layers = layers if len(layers) <= 20 else layers[:17] + "..."
        score = f"{e.score:.4f} ± {e.score_std:.3f}"
        lines.append(
            f"{e.method:<18}{layers:<22}{score:>16}{len(e.layers):>6}{max(e.layers):>9}"
        )
    lines.append(recommendation_text(report.recommendation_, report.n_splits_))
    lines.append(
        fusion_text(report.fusion, report.fusion_, report.task_ == "regression")
    )
    if report.fold_selections_ is not None:
        folds = " | ".join(",".join(map(str, f)) for f in report.fold_selections_)
        lines.append(f"LOES layers per fold: {folds}")
        lines.append(
            f"selection stability {report.selection_stability_:.2f} "
            "(Nogueira et al. 2018; 1 = the same layers in every "
            "fold, 0 = chance)"
        )
    return "\n".join(lines)


def selection_summary(report):
    """The fitted ``report``'s selection summary, the JSON-ready dict of
    ``LayerReport.summary()`` (``selection.json``)."""
    by = {e["method"]: e for e in report.summary_}
    top = int(np.argmax(report.probe_scores_))
    best = by.get(
        "best_single_layer",
        {"layers": [top], "score": float(report.probe_scores_[top])},
    )
    last = by.get("last_layer", {"score": float(report.probe_scores_[-1])})
    folds = report.fold_selections_
    freq = report.selection_frequency_
    stability = report.selection_stability_
    return {
        "task": report.task_,
        "scoring": report.scoring_,
        "fusion": report.fusion,
        "fusion_counts": report.fusion_,
        "nested": bool(report.nested),
        "n_layers": int(len(report.layers_)),
        "n_splits": report.n_splits_,
        "n_groups": report.n_groups_,
        "selected_layers": [int(v) for v in report.selected_layers_],
        "selection_order": [int(v) for v in report.selection_order_],
        "fused_score": by["loes"]["score"],
        "last_layer_score": last["score"],
        "best_layer": int(best["layers"][0]),
        "best_layer_score": best["score"],
        "profile_best_layer": top,
        "profile_best_layer_score": float(report.probe_scores_[top]),
        "fold_selections": (
            None if folds is None else [[int(v) for v in f] for f in folds]
        ),
        "selection_stability": None if np.isnan(stability) else stability,
        "selection_frequency": None if freq is None else freq.tolist(),
        "recommendation": report.recommendation_.as_dict(),
        "methods": report.summary_,
    }


def _csv_value(value):
    if isinstance(value, (bool, np.bool_, np.integer, int)):
        return int(value)
    return repr(float(value))
