"""The checks of a report's inputs: its task, its names, the precomputed
per-layer values it is given, and a fit whose every score is NaN."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from skloes.core._targets import check_continuous_target, plain_labels, task_of
from skloes.metrics._registry import METRICS
from skloes.report._methods import BASELINES
from skloes.report._presenting import REPORT_COLUMNS

__all__ = [
    "DATASET_METRICS",
    "check_extra",
    "check_names",
    "check_scores",
    "resolve_task",
]

DATASET_METRICS = tuple(METRICS)  # the registry of skloes.metrics


def resolve_task(task, y, owner):
    """The task (``task``, or read from ``y`` with ``"auto"``) and ``y``
    for it (float64 for regression)."""
    y = plain_labels(y)  # an object column of numbers: those numbers
    found = task_of(y, owner, multioutput=False)
    if task == "auto":
        return found, y
    if task == "classification" and found == "regression":
        raise ValueError(
            f"{owner}: `task`='classification' needs class labels; `y` holds "
            "continuous numbers. Pass task='regression'."
        )
    if task == "regression":
        y = check_continuous_target(y, owner)
    return task, y


def check_names(report, owner):
    """The report's ``metrics`` and ``baselines`` are names it knows."""
    for param, options in (("metrics", DATASET_METRICS), ("baselines", BASELINES)):
        for value in getattr(report, param):
            if value not in options:
                raise ValueError(
                    f"{owner}: `{param}` entries must be among {list(options)}; "
                    f"got {value!r}."
                )


def check_extra(extra_metrics, computed, n_layers, owner):
    """``extra_metrics`` as float64 columns, one value per layer, keyed by
    text that names no column of the report nor a ``computed`` metric."""
    if extra_metrics is not None and not isinstance(extra_metrics, Mapping):
        raise TypeError(
            f"{owner}: `extra_metrics` must be a dict of metric name to one "
            f"value per layer; got {type(extra_metrics).__name__}."
        )
    names = [str(key) for key in extra_metrics or {}]
    taken = sorted({n for n in names if n in REPORT_COLUMNS or not n.strip()})
    if taken:
        raise ValueError(
            f"{owner}: `extra_metrics` keys {taken} are the report's own "
            f"columns ({', '.join(REPORT_COLUMNS)}) or empty; "
            "rename them."
        )
    twins = sorted({n for n in names if names.count(n) > 1})
    if twins:
        raise ValueError(
            f"{owner}: `extra_metrics` keys {twins} name one column twice "
            "(keys are compared as text, e.g. 1 and '1'); rename them."
        )
    out = {}
    for key, values in (extra_metrics or {}).items():
        try:
            values = np.asarray(values, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise ValueError(
                f"{owner}: `extra_metrics[{key!r}]` must hold one number per "
                f"layer ({n_layers}); got {type(values).__name__} that is not "
                "numeric."
            ) from None
        if values.shape != (n_layers,):
            raise ValueError(
                f"{owner}: `extra_metrics[{key!r}]` must hold one value per layer "
                f"({n_layers}); got shape {values.shape}."
            )
        if str(key) in computed:  # would silently replace a computed one
            raise ValueError(
                f"{owner}: `extra_metrics` key {key!r} is also a computed metric "
                f"of `metrics`; rename it."
            )
        out[str(key)] = values
    return out


def check_scores(report, owner):
    """A report whose every score is NaN says nothing: an error instead."""
    scores = [*report.probe_scores_, *(e["score"] for e in report.summary_)]
    if not np.isfinite(scores).any():
        raise ValueError(
            f"{owner}: every {report.scoring_} score is NaN on these "
            f"{report.n_splits_} folds; `y` or the rows do not allow a score "
            "(more rows, or fewer folds with `cv`)."
        )
