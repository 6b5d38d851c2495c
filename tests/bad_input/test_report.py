"""LayerReport and layer_report: degenerate layers, extra metrics, tiny data,
the task, regression on few rows, and all-NaN scores.

Outcomes (``tests/_support/outcomes.py``): ``err`` (one line naming what is
wrong), ``warns`` (a warning, then a result), ``ok`` (a correct result).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok, warns  # noqa: E402

from skloes.report import LayerReport, layer_report  # noqa: E402

# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
RNG = np.random.RandomState(0)
N, L, D = 24, 4, 3
STACK = RNG.randn(L, N, D)
Y = np.arange(N) % 2


def with_value(value, where=(1, 2, 0)):
    X = STACK.copy()
    X[where] = value
    return X


# layer_report's own entry points.
REPORT_CASES = [
    (
        "constant_layer",
        lambda: layer_report(
            with_value(1.0, where=(2,)), Y, n_layers_to_select=2, cv=3
        ),
        warns(r"layers \[2\]"),
    ),
    (
        "extra_metrics_wrong_length",
        lambda: layer_report(
            STACK, Y, n_layers_to_select=2, cv=3, extra_metrics={"m": np.ones(L + 1)}
        ),
        err("extra_metrics"),
    ),
    (
        "extra_metrics_clash",
        lambda: layer_report(
            STACK, Y, n_layers_to_select=2, cv=3, extra_metrics={"isotropy": np.ones(L)}
        ),
        err(r"extra_metrics|isotropy"),
    ),
    ("layer_dim_bad", lambda: layer_report(STACK[0], Y, layer_dim=2), err("layer_dim")),
    (
        "tiny_classes",
        lambda: layer_report(
            STACK[:, :5], [0, 0, 0, 1, 1], n_layers_to_select=1, nested=False
        ),
        ok(lambda r: r.n_splits_ == 2),
    ),
    (
        "tiny_nested",
        lambda: layer_report(STACK[:, :5], [0, 0, 0, 1, 1], n_layers_to_select=1),
        err(r"nested=False"),
    ),
    (
        "tiny_regression_nested",
        lambda: layer_report(STACK[:, :4], RNG.randn(4), n_layers_to_select=1, cv=2),
        err(r"nested"),
    ),
    (
        "singleton_class",
        lambda: layer_report(STACK[:, :5], [0, 0, 0, 0, 1]),
        err(r"class 1 has 1"),
    ),  # not np.int64(1)
    (
        "regression_target",
        lambda: layer_report(STACK, RNG.randn(N), n_layers_to_select=2, cv=3),
        ok(lambda r: r.task_ == "regression"),
    ),
]


@pytest.mark.parametrize(
    "run, outcome", [pytest.param(r, o, id=i) for i, r, o in REPORT_CASES]
)
def test_layer_report(run, outcome):
    outcome.check(run)


# --------------------------------------------------------------------------
# No all-NaN report without an error: regression on a handful of rows
# --------------------------------------------------------------------------
def finite_scores(report):
    assert np.isfinite(report.probe_scores_).all(), report.probe_scores_
    assert all(np.isfinite(e["score"]) for e in report.summary_), report.summary_


REPORT_ROWS = [  # (id, rows, nested, outcome)
    ("three_rows", 3, False, err(r"regression report needs at least 4 rows")),
    (
        "four_rows_nested",
        4,
        True,
        err(r"nested selection needs at least 3 training rows"),
    ),
    (
        "five_rows_nested",
        5,
        True,
        err(r"nested selection needs at least 3 training rows"),
    ),
    ("six_rows_nested", 6, True, ok(finite_scores)),
    ("eight_rows_nested", 8, True, ok(finite_scores)),
    ("four_rows", 4, False, ok(finite_scores)),
    ("seven_rows", 7, False, ok(finite_scores)),
]


@pytest.mark.parametrize(
    "rows, nested, outcome",
    [pytest.param(r, n, o, id=i) for i, r, n, o in REPORT_ROWS],
)
def test_regression_report_on_few_rows(rows, nested, outcome):
    rng = np.random.RandomState(0)
    stack = rng.randn(3, rows, 4)
    y = stack[1, :, 0] + 0.1 * rng.randn(rows)
    report = LayerReport(n_layers_to_select=1, nested=nested, random_state=0)
    outcome.check(lambda: report.fit(stack, y))


def test_a_report_of_only_nan_scores_is_an_error(monkeypatch):
    from skloes.report import _layer_report

    rng = np.random.RandomState(0)
    stack, y = rng.randn(3, 20, 4), rng.randn(20)
    monkeypatch.setattr(_layer_report.LayerReport, "_cv", lambda *a: np.full(5, np.nan))
    err(r"every r2 score is NaN").check(
        lambda: LayerReport(n_layers_to_select=1, nested=False).fit(stack, y)
    )


REPORT_TASKS = [
    (
        "integer_ratings_as_regression",
        np.arange(30) % 5 + 1,
        "regression",
        ok(lambda r: r.task_ == "regression"),
    ),
    (
        "integer_ratings_auto",
        np.arange(30) % 5 + 1,
        "auto",
        ok(lambda r: r.task_ == "classification"),
    ),
    (
        "continuous_as_classes",
        np.linspace(0, 1, 30) + 0.001,
        "classification",
        err(r"`task`='classification' needs class labels"),
    ),
    (
        "strings_as_regression",
        np.array(["a", "b"] * 15),
        "regression",
        err(r"`y` must hold numbers.*got 'a'.*or task='classification'"),
    ),
    ("bad_task", np.arange(30) % 2, "ranking", err(r"'task' parameter")),
]


@pytest.mark.parametrize(
    "y, task, outcome",
    [pytest.param(y, t, o, id=i) for i, y, t, o in REPORT_TASKS],
)
def test_report_task(y, task, outcome):
    stack = np.random.RandomState(0).randn(3, 30, 4)
    report = LayerReport(n_layers_to_select=1, task=task, nested=False)
    outcome.check(lambda: report.fit(stack, y))


# --------------------------------- 10. layer_report and one constant layer
def test_layer_report_names_a_constant_layer():
    rng = np.random.RandomState(0)
    stack = rng.randn(4, 40, 5)
    stack[2] = 1.0
    y = np.arange(40) % 2
    with pytest.warns(UserWarning, match=r"layer_report|LayerReport.*layers? \[?2"):
        report = layer_report(stack, y, n_layers_to_select=2, random_state=0)
    assert np.isnan(report.metrics_["intrinsic_dim"][2])
    assert np.isfinite(np.delete(report.metrics_["intrinsic_dim"], 2)).all()
    assert 2 not in report.summary()["selected_layers"]


def test_no_warning_on_a_clean_report():
    rng = np.random.RandomState(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        layer_report(
            rng.randn(3, 30, 4), np.arange(30) % 2, n_layers_to_select=2, random_state=0
        )
