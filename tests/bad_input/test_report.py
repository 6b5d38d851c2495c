"""LayerReport and layer_report: degenerate layers, extra metrics, tiny data,
the task, regression on few rows, and all-NaN scores.

New in issue 34 (the section at the end): LayerReport.method_selector, the
comparison objects built by hand (MethodScore, MethodComparison) and groups
that follow the classes.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok, warns  # noqa: E402

from skloes.report import (  # noqa: E402
    LayerReport,
    MethodComparison,
    MethodScore,
    layer_report,
)

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
    from skloes.report import _comparison, _fold_fusion, _layer_scoring

    rng = np.random.RandomState(0)
    stack, y = rng.randn(3, 20, 4), rng.randn(20)
    # Every way a score is made: the per-layer table's scorer, a method's
    # cross-validation, and the fused methods' scores of held-out outputs.
    monkeypatch.setattr(_comparison, "cross_val_scores", lambda *a: np.full(5, np.nan))
    monkeypatch.setattr(
        _layer_scoring, "check_scoring", lambda *a, **k: lambda *b: np.nan
    )
    monkeypatch.setattr(_fold_fusion, "score_predictions", lambda *a: np.nan)
    for fusion in ("concatenate", "auto"):
        err(r"every r2 score is NaN").check(
            lambda f=fusion: LayerReport(nested=False, fusion=f).fit(stack, y)
        )


@pytest.mark.parametrize(
    "fusion, outcome",
    [
        ("auto", ok(lambda r: r.n_splits_ == 2)),
        ("average", ok(lambda r: r.n_splits_ == 2)),
        ("concatenate", ok(lambda r: r.n_splits_ == 2)),
        (
            "stack",
            err(r"LayerReport: fusion='stack' .*class 0 has 1 sample"),
        ),
    ],
)
def test_fusion_of_folds_too_small_for_inner_folds(fusion, outcome):
    # 5 rows, 2 folds: a training fold holds one row of a class, so no inner
    # folds exist: "auto" concatenates that fold, a stack is refused.
    outcome.check(
        lambda: layer_report(
            STACK[:, :5],
            [0, 0, 0, 1, 1],
            n_layers_to_select=2,
            nested=False,
            fusion=fusion,
        )
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


# ==========================================================================
# New in issue 34: method_selector, the comparison objects, grouped folds
# ==========================================================================
REPORT_STACK = np.random.RandomState(0).randn(5, 40, 4)
REPORT_Y = np.arange(40) % 2
REPORT_STACK[3, :, 0] += 2 * REPORT_Y


@pytest.fixture(scope="module")
def fitted_report():
    return LayerReport(n_layers_to_select=2, metrics=(), random_state=0).fit(
        REPORT_STACK, REPORT_Y
    )


def unfitted(cls_name):
    def check(selector):
        assert type(selector).__name__ == cls_name
        assert not hasattr(selector, "support_") and not hasattr(
            selector, "selected_layers_"
        )

    return check


METHOD_SELECTOR = [  # (id, method, outcome)
    ("loes", "loes", ok(unfitted("LOESSelector"))),
    ("numpy_str", np.str_("last_k"), ok(unfitted("LastKSelector"))),
    ("unknown", "lasso", err(r"`method` must be one of the report's methods")),
    ("upper_case", "LOES", err(r"`method` must be one of .*got 'LOES'")),
    ("none", None, err(r"`method` must be one of .*got None")),
    ("a_list", ["loes"], err(r"`method` must be one of .*got \['loes'\]")),
    (
        "a_baseline_not_compared",
        "entropy_top_k",
        err(r"`method` must be one of the report's methods \['loes', 'last_layer'"),
    ),
]


@pytest.mark.parametrize(
    "method, outcome", [pytest.param(m, o, id=i) for i, m, o in METHOD_SELECTOR]
)
def test_method_selector(fitted_report, method, outcome):
    outcome.check(lambda: fitted_report.method_selector(method))


def test_method_selector_before_fit():
    from sklearn.exceptions import NotFittedError

    err(r"not fitted yet", NotFittedError).check(
        lambda: LayerReport().method_selector("loes")
    )


def test_method_selector_of_the_recommendation_refits_to_its_layers(fitted_report):
    rec = fitted_report.recommendation_
    selector = fitted_report.method_selector(rec.method)
    flat = REPORT_STACK.transpose(1, 0, 2).reshape(40, -1)
    from skloes.core._contract import mark_layers

    fitted = selector.fit(mark_layers(flat, 4), REPORT_Y)
    assert fitted.get_support(indices=True).tolist() == rec.layers


def _score(method="loes", layers=(1,), folds=(0.5, 0.6), fold_layers=None):
    return MethodScore(method, list(layers), np.asarray(folds), fold_layers)


COMPARISONS = [  # (id, build, outcome)
    (
        "no_method",
        lambda: MethodComparison([], nested=True),
        err(r"MethodComparison: `methods` must be a non-empty list of MethodScore"),
    ),
    (
        "not_a_method_score",
        lambda: MethodComparison([{"method": "loes"}], nested=True),
        err(r"`methods` must be a non-empty list of MethodScore"),
    ),
    (
        "folds_of_other_counts",
        lambda: MethodComparison(
            [_score(), _score("last_layer", folds=(0.5,))], nested=True
        ),
        err(r"every method must be scored on the same folds"),
    ),
    (
        "a_method_twice",
        lambda: MethodComparison([_score(), _score()], nested=True),
        err(r"`methods` names \['loes'\] more than once"),
    ),
    ("no_layers", lambda: _score(layers=()), err(r"MethodScore: `layers` must be")),
    ("float_layer", lambda: _score(layers=(1.5,)), err(r"`layers` must be")),
    ("negative_layer", lambda: _score(layers=(-1,)), err(r"`layers` must be")),
    ("no_fold", lambda: _score(folds=()), err(r"`fold_scores` must be one score")),
    (
        "fold_scores_as_a_list",
        lambda: _score(folds=[0.5, 0.7]).score,
        ok(lambda s: s == 0.6),
    ),
    (
        "every_score_nan",
        lambda: __import__("skloes.report")
        .report.MethodComparison([_score(folds=(np.nan, 0.5))], nested=True)
        .recommend(),
        err(r"no method was scored on every fold"),
    ),
    (
        "one_fold",
        lambda: __import__("skloes.report")
        .report.MethodComparison(
            [_score(folds=(0.5,)), _score("last_layer", folds=(0.6,))], nested=True
        )
        .recommend(),
        ok(lambda rec: rec.method == "last_layer" and rec.difference_se == 0.0),
    ),
]


@pytest.mark.parametrize(
    "build, outcome", [pytest.param(b, o, id=i) for i, b, o in COMPARISONS]
)
def test_comparison_objects(build, outcome):
    outcome.check(build)


@pytest.mark.parametrize(
    "groups, outcome",
    [
        pytest.param(
            REPORT_Y,
            err(r"the folds split by `groups` leave a training fold with the one"),
            id="groups_are_the_classes",
        ),
        pytest.param(
            [0, 1],
            err(r"`groups` must hold one group per sample \(40\)"),
            id="groups_short",
        ),
        pytest.param(
            np.zeros(40),
            err(r"`groups` must hold at least 2 groups.*got only 0\.0\.$"),
            id="groups_one",
        ),
        pytest.param(np.arange(40) % 8, ok(lambda r: r.n_groups_ == 8), id="eight"),
    ],
)
def test_report_groups(groups, outcome):
    report = LayerReport(n_layers_to_select=2, metrics=(), random_state=0)
    outcome.check(lambda: report.fit(REPORT_STACK, REPORT_Y, groups=groups))


# --------------------------------------------------------------------------
# New in issue 55: the report's own column names, and the report folder's
# rule (it writes only its own files, whole, never through a link).
# --------------------------------------------------------------------------
RESERVED = [  # (id, extra_metrics, outcome)
    *[
        (name, {name: np.ones(5)}, err(rf"`extra_metrics` keys \['{name}'\] are the"))
        for name in (
            "layer",
            "probe_score",
            "probe_score_std",
            "selected",
            "selection_frequency",
        )
    ],
    ("empty_name", {"": np.ones(5)}, err(r"`extra_metrics` keys \[''\] .* or empty")),
    ("blank_name", {"  ": np.ones(5)}, err(r"or empty")),
    ("text_twins", {1: np.ones(5), "1": np.ones(5)}, err(r"keys \['1'\] name one")),
    ("not_a_dict", [("m", np.ones(5))], err(r"`extra_metrics` must be a dict")),
    ("not_numbers", {"m": list("abcde")}, err(r"`extra_metrics\['m'\]` must hold")),
    (
        "near_names_are_fine",
        {"Probe_Score": np.arange(5.0), "layers": np.ones(5)},
        ok(
            lambda r: list(r.to_frame()["Probe_Score"]) == [0, 1, 2, 3, 4]
            and r.to_frame()["probe_score"].tolist() == r.probe_scores_.tolist()
        ),
    ),
]


@pytest.mark.parametrize(
    "extra, outcome", [pytest.param(e, o, id=i) for i, e, o in RESERVED]
)
def test_a_metric_never_takes_a_column_of_the_report(extra, outcome):
    report = LayerReport(n_layers_to_select=2, metrics=(), random_state=0)
    outcome.check(lambda: report.fit(REPORT_STACK, REPORT_Y, extra_metrics=extra))


def _place(folder, name, kind, outside):
    """Put at ``folder/name`` what a user may have there."""
    path = folder / name
    if kind == "user_file":
        path.write_bytes(b"the user's own")
    elif kind == "link":
        path.symlink_to(outside)
    elif kind == "dangling":
        path.symlink_to(folder.parent / "nowhere")
    elif kind == "fifo":
        import os

        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
        (path / "x").write_text("x")
    return path


REPORT_NAMES = (
    "report.html",
    "layers.csv",
    "profile.png",
    "selection.json",
    "budget.png",
)


@pytest.mark.parametrize("overwrite", [False, True], ids=["default", "overwrite"])
@pytest.mark.parametrize("kind", ["user_file", "link", "dangling", "fifo", "folder"])
@pytest.mark.parametrize("name", REPORT_NAMES)
def test_save_leaves_what_it_did_not_write_alone(
    fitted_report, tmp_path, name, kind, overwrite
):
    """Without ``overwrite`` any report name already there refuses the
    folder; with it, only regular files are replaced: a link (to a file
    outside, or dangling), a pipe or a folder is refused whatever the flag,
    named, and nothing of the folder or outside it changes."""
    from _support.outcomes import snapshot

    folder, outside = tmp_path / "out", tmp_path / "outside.txt"
    folder.mkdir()
    outside.write_text("outside")
    (folder / "notes.txt").write_text("mine")
    path = _place(folder, name, kind, outside)
    before = snapshot(tmp_path)
    if kind == "user_file" and overwrite:  # replaced, as asked (budget.png:
        fitted_report.save(folder, overwrite=True)  # this report draws none)
        if name == "budget.png":
            assert not path.exists()
        else:
            assert path.is_file() and path.read_bytes() != b"the user's own"
        assert (folder / "notes.txt").read_text() == "mine"
        return
    needle = "already holds" if kind == "user_file" else "never through a link"
    err(rf"`folder` .*out'.* {needle}" if kind == "user_file" else needle).check(
        lambda: fitted_report.save(folder, overwrite=overwrite)
    )
    assert name in str(pytest.raises(ValueError, fitted_report.save, folder).value)
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted({"notes.txt", name})


@pytest.mark.parametrize(
    "about, needle",
    [
        ({"data": "bad \udcff text"}, r"`about` entry 'data' holds text that is not"),
        ({"mo\ud800del": "x"}, r"`about` entry .* not valid Unicode"),
        ({"data": 3, 4: "x"}, r"`about` must be a dict of str"),
    ],
    ids=["surrogate_value", "surrogate_key", "key_not_text"],
)
def test_save_with_text_it_cannot_write_leaves_no_file(
    fitted_report, tmp_path, about, needle
):
    err(needle).check(lambda: fitted_report.save(tmp_path / "out", about=about))
    assert not (tmp_path / "out").exists()


def test_save_with_a_metric_name_it_cannot_write_leaves_no_file(tmp_path):
    """A surrogate in a metric's name reaches the page and the table: refused
    before any file is written, naming the text."""
    report = LayerReport(n_layers_to_select=2, metrics=(), random_state=0)
    report.fit(REPORT_STACK, REPORT_Y, extra_metrics={"m \udcff": np.ones(5)})
    err(r"not valid Unicode .*Nothing was written").check(
        lambda: report.save(tmp_path / "out")
    )
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize("flag", [1, "yes", None])
def test_save_overwrite_must_be_a_bool(fitted_report, tmp_path, flag):
    err(r"`overwrite` must be").check(
        lambda: fitted_report.save(tmp_path, overwrite=flag)
    )


def test_save_into_a_read_only_folder_is_a_clear_error(fitted_report, tmp_path):
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user that writes anywhere")
        err(r"`folder` .*'ro'.* cannot be written \(Permission denied").check(
            lambda: fitted_report.save(folder)
        )
    finally:
        os.chmod(folder, 0o700)
