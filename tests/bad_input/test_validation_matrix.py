"""The validation matrix of issue 26: one rule per kind of value, and the CLI.

Layer lists, sample counts, thresholds, nested parameters that collide, a
save that could never load back, reports that would be all NaN, and the
command line's remaining gaps (regression targets, byte-order marks, numeric
text columns, heads without probabilities). Outcomes as in
``test_matrix.py``: ``err`` (one line naming what is wrong), ``warns``,
``ok`` (a correct result).
"""

from __future__ import annotations

import functools
import json
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from sklearn.linear_model import (  # noqa: E402
    LogisticRegression,
    RidgeClassifier,
)
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402
from sklearn.svm import SVC, LinearSVC  # noqa: E402

from skloes import GeoRegClassifier, HiddenStatesTransformer, datasets  # noqa: E402
from skloes.cli import main  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    LayerProbeRegressor,
    load_probe,
    prune_layers,
    save_probe,
)
from skloes.report import LayerReport  # noqa: E402
from skloes.selection import LastKSelector  # noqa: E402

TEXTS = ["a good movie", "a dull plot", "fun", "the story was great"] * 3
Y = [1, 0, 1, 0] * 3
NEW = ["a fun film", "the plot was dull"]


class err:  # noqa: N801 - reads as a table entry
    """An exception on one line whose message matches ``needle``."""

    def __init__(self, needle, exc=(ValueError, TypeError)):
        self.needle, self.exc = needle, exc

    def check(self, run):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(self.exc) as info:
                run()
        message = str(info.value)
        assert re.search(self.needle, message), (self.needle, message)
        assert "\n" not in message and "Traceback" not in message, message


class ok:  # noqa: N801
    def __init__(self, then=None):
        self.then = then

    def check(self, run):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = run()
        if self.then is not None:
            self.then(result)


def _first_layer():
    return LastKSelector(n_layers_to_select=1)


def _hst(path, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(path, **params)


# --------------------------------------------------------------------------
# Layer lists: a boolean mask is a mask, never the indices 0 and 1
# --------------------------------------------------------------------------
def layers_are(expected):
    def check(hst):
        assert hst.layers_.tolist() == expected, hst.layers_

    return check


LAYER_CASES = [  # the tiny model has 3 hidden states
    ("numpy_mask", np.array([True, False, True]), ok(layers_are([0, 2]))),
    ("list_mask", [False, True, True], ok(layers_are([1, 2]))),
    ("tuple_mask", (False, False, True), ok(layers_are([2]))),
    (
        "numpy_bool_items",
        [np.bool_(True), np.bool_(False), np.bool_(False)],
        ok(layers_are([0])),
    ),
    (
        "support_mask_from_a_selector",
        np.array([False, True, False]),
        ok(layers_are([1])),
    ),
    ("int_indices_0_1", np.array([1, 0]), ok(layers_are([0, 1]))),
    (
        "mask_too_short",
        np.array([True, False]),
        err(r"`layers` is a boolean mask of 2.*one per layer \(3"),
    ),
    ("mask_too_long", [True] * 5, err(r"`layers` is a boolean mask of 5")),
    (
        "mask_selects_none",
        [False, False, False],
        err(r"`layers` is a boolean mask that selects no layer"),
    ),
    ("mask_mixed_with_ints", [True, 1, 2], err(r"`layers` mixes booleans")),
    ("mask_2d", np.array([[True, False, True]]), err(r"`layers` is not 1-D")),
    ("bool_scalar", True, err(r"`layers` must be 'all', an int")),
    ("numpy_bool_scalar", np.bool_(True), err(r"'layers' parameter|`layers`")),
    ("string", "last", err(r"'layers' parameter|`layers`")),
    ("floats", [0.5, 1.5], err(r"`layers` must be 'all', an int")),
    ("ragged", [[0], [1, 2]], err(r"`layers`")),
]


@pytest.mark.parametrize(
    "layers, outcome", [pytest.param(v, o, id=i) for i, v, o in LAYER_CASES]
)
def test_extractor_layers(tiny_model_path, layers, outcome):
    outcome.check(lambda: _hst(tiny_model_path, layers=layers).fit(TEXTS))


GEOREG_LAYER_CASES = [
    ("numpy_mask", np.array([False, True, True]), ok()),
    (
        "mask_too_short",
        np.array([True, False]),
        err(r"`layers` is a boolean mask of 2"),
    ),
    ("mask_none", np.zeros(3, bool), err(r"selects no layer")),
    ("bool_scalar", True, err(r"`layers`")),
    ("mixed", [True, 2], err(r"`layers` mixes booleans")),
]


@pytest.mark.parametrize(
    "layers, outcome", [pytest.param(v, o, id=i) for i, v, o in GEOREG_LAYER_CASES]
)
def test_georeg_layers(layers, outcome):
    rng = np.random.RandomState(0)
    stack, y = rng.randn(3, 24, 4), np.arange(24) % 2
    est = GeoRegClassifier(
        layers=layers, max_epochs=1, proj_dim=4, device="cpu", random_state=0
    )

    def run():
        est.fit(stack, y)
        if isinstance(layers, np.ndarray) and layers.dtype == bool:
            assert est.layers_.tolist() == np.flatnonzero(layers).tolist()
        return est

    outcome.check(run)


def grid_is(expected):
    def check(est):
        assert est.grid_layers_.tolist() == expected, est.grid_layers_

    return check


GRID_CASES = [  # a 6-layer stack
    (
        "numpy_mask",
        np.array([False, True, False, True, True, False]),
        ok(grid_is([1, 3, 4])),
    ),
    ("list_mask", [True, True, False, False, False, True], ok(grid_is([0, 1, 5]))),
    ("support_of_a_fitted_selector", "support", ok(grid_is([4, 5]))),
    ("indices_0_1", np.array([0, 1]), ok(grid_is([0, 1]))),
    (
        "mask_too_short",
        np.array([True, False]),
        err(r"`candidate_grid` is a boolean mask of 2.*one per layer \(6"),
    ),
    (
        "mask_selects_none",
        [False] * 6,
        err(r"`candidate_grid` is a boolean mask that selects no layer"),
    ),
    ("mask_mixed_with_ints", [True, 3], err(r"`candidate_grid` mixes booleans")),
    ("mask_2d", np.ones((2, 3), bool), err(r"`candidate_grid` is not 1-D")),
]


@pytest.mark.parametrize("cv", [False, True], ids=["LOESSelector", "LOESSelectorCV"])
@pytest.mark.parametrize(
    "grid, outcome", [pytest.param(g, o, id=i) for i, g, o in GRID_CASES]
)
def test_candidate_grid(grid, outcome, cv):
    """A mask is read as a mask; LOESSelectorCV's picks stay in the grid."""
    from skloes import LOESSelector, LOESSelectorCV

    rng = np.random.RandomState(0)
    stack, y = rng.randn(6, 60, 4), np.arange(60) % 2
    if isinstance(grid, str):  # get_support() of a fitted selector, fed back
        grid = LastKSelector(n_layers_to_select=2).fit(stack, y).get_support()
    selector = LOESSelector(n_layers_to_select=2, candidate_grid=grid, random_state=0)
    if not cv:
        return outcome.check(lambda: selector.fit(stack, y))
    est = LOESSelectorCV(selector=selector, max_layers_to_select=2, cv=3)
    if isinstance(outcome, err):
        return outcome.check(lambda: est.fit(stack, y))
    picked = est.fit(stack, y).get_support(indices=True).tolist()
    grid = np.asarray(grid)
    allowed = np.flatnonzero(grid) if grid.dtype == bool else grid
    assert set(picked) <= set(allowed.tolist()), (picked, allowed)


# --------------------------------------------------------------------------
# Sample counts, thresholds and counts of the data set loaders
# --------------------------------------------------------------------------
def n_texts(n):
    def check(result):
        texts = result.data if hasattr(result, "data") else result[0]
        assert len(texts) == n, len(texts)

    return check


def every_class(result):
    assert len(np.unique(result.target)) == len(result.target_names)


COUNT_CASES = [
    ("one", 1, err(r"`n_samples`=1 cannot be drawn stratified")),
    ("true", True, err(r"`n_samples` must be a positive int")),
    ("false", False, err(r"`n_samples` must be a positive int")),
    ("zero", 0, err(r"`n_samples` must be a positive int")),
    ("negative", -5, err(r"`n_samples` must be a positive int")),
    ("float_above_one", 2.5, err(r"`n_samples` must be a positive int")),
    ("nan", float("nan"), err(r"`n_samples`")),
    ("inf", float("inf"), err(r"`n_samples`")),
    ("string", "20", err(r"`n_samples`")),
    ("too_many", 10**9, err(r"`n_samples`=.* exceeds")),
    ("fraction_too_small", 1e-6, err(r"`n_samples`=1e-06 cannot be drawn")),
    ("numpy_int", np.int64(30), ok(n_texts(30))),
    ("numpy_float", np.float64(0.01), ok(every_class)),
    ("fraction_one", 1.0, ok(every_class)),
    ("count_two_per_class", 40, ok(every_class)),
]
COUNT_LOADERS = {
    "sms_spam": datasets.load_sms_spam,
    "trec6": datasets.load_trec6,
    "vader_nyt3": datasets.load_vader_nyt3,
}


def _loader_or_skip(run):
    try:
        return run()
    except ImportError as exc:  # the data wheel is not installed here
        pytest.skip(str(exc))


@pytest.mark.parametrize("loader", list(COUNT_LOADERS))
@pytest.mark.parametrize(
    "value, outcome", [pytest.param(v, o, id=i) for i, v, o in COUNT_CASES]
)
def test_loader_sample_counts(loader, value, outcome):
    run = functools.partial(COUNT_LOADERS[loader], n_samples=value)
    _loader_or_skip(lambda: outcome.check(run))


def three_classes(result):
    assert list(result.target_names) == ["negative", "neutral", "positive"]


THRESHOLD_CASES = [
    ("negative", -0.5, err(r"`threshold` must be a finite number in \[0.0, 4.0\)")),
    ("nan", float("nan"), err(r"`threshold` must be a finite number")),
    ("inf", float("inf"), err(r"`threshold`")),
    ("minus_inf", -float("inf"), err(r"`threshold`")),
    ("max_rating", 4.0, err(r"`threshold`")),
    ("above_ratings", 10, err(r"`threshold`")),
    ("bool", True, err(r"`threshold`")),
    ("string", "0.5", err(r"`threshold`")),
    ("none", None, err(r"`threshold`")),
    ("zero", 0, ok(three_classes)),
    ("numpy_float", np.float32(0.5), ok(three_classes)),
    ("wide", 2.0, ok(three_classes)),
    (
        "wider_than_every_rating",
        3.8,
        err(r"`threshold`=3.8 leaves every text in one class"),
    ),
]
THRESHOLD_LOADERS = {
    "vader_tweets3": datasets.load_vader_tweets3,
    "vader_nyt3": datasets.load_vader_nyt3,
}


@pytest.mark.parametrize("loader", list(THRESHOLD_LOADERS))
@pytest.mark.parametrize(
    "value, outcome", [pytest.param(v, o, id=i) for i, v, o in THRESHOLD_CASES]
)
def test_loader_thresholds(loader, value, outcome):
    run = functools.partial(THRESHOLD_LOADERS[loader], threshold=value)
    _loader_or_skip(lambda: outcome.check(run))


def test_a_threshold_changes_the_classes_as_documented():
    rating = _loader_or_skip(lambda: datasets.load_vader_tweets3(threshold=0))
    wide = datasets.load_vader_tweets3(threshold=2.0)
    counts = [np.bincount(d.target, minlength=3)[1] for d in (rating, wide)]
    assert counts[0] < counts[1]  # a wider band holds more neutral texts


LANGUAGE_CASES = [
    ("zero", 0, err(r"`min_per_language` must be an int >= 1")),
    ("negative", -1, err(r"`min_per_language`")),
    ("bool", True, err(r"`min_per_language`")),
    ("float", 150.0, err(r"`min_per_language`")),
    ("leaves_one", 10**6, err(r"`min_per_language`=1000000 leaves 0 language")),
    ("default", 150, ok(every_class)),
]


@pytest.mark.parametrize(
    "value, outcome", [pytest.param(v, o, id=i) for i, v, o in LANGUAGE_CASES]
)
def test_chatterbot_min_per_language(value, outcome):
    run = functools.partial(datasets.load_chatterbot_langid, min_per_language=value)
    _loader_or_skip(lambda: outcome.check(run))


FLAG_CASES = [
    ("return_X_y_string", {"return_X_y": "yes"}, err(r"`return_X_y` must be True")),
    ("return_X_y_int", {"return_X_y": 1}, err(r"`return_X_y`")),
    ("return_X_y_none", {"return_X_y": None}, err(r"`return_X_y`")),
    (
        "random_state_string",
        {"n_samples": 20, "random_state": "x"},
        err(r"`random_state`"),
    ),
    (
        "random_state_float",
        {"n_samples": 20, "random_state": 0.5},
        err(r"`random_state`"),
    ),
    ("return_X_y_numpy_bool", {"return_X_y": np.True_}, ok(lambda r: len(r) == 2)),
]


@pytest.mark.parametrize(
    "kwargs, outcome", [pytest.param(k, o, id=i) for i, k, o in FLAG_CASES]
)
def test_loader_flags(kwargs, outcome):
    _loader_or_skip(lambda: outcome.check(lambda: datasets.load_sms_spam(**kwargs)))


# --------------------------------------------------------------------------
# Nested parameters that collide: an error naming both, never an override
# --------------------------------------------------------------------------
COLLIDING = {
    "model": "/another/model",
    "pooling": "max",
    "max_length": 16,
    "batch_size": 4,
    "cache": "/tmp/elsewhere",
    "device": "cpu",
    "verbose": 1,
}
SET_BY_PROBE = {"layers": [1], "output": "flat"}
PROBES = {
    "classifier": (LayerProbeClassifier, Y),
    "regressor": (LayerProbeRegressor, np.arange(12.0)),
}


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("key", list(COLLIDING))
def test_extractor_params_that_are_the_probes_own_are_refused(
    tiny_model_path, probe, key
):
    cls, y = PROBES[probe]
    est = cls(tiny_model_path, device="cpu", extractor_params={key: COLLIDING[key]})
    err(
        rf"`extractor_params` sets '{key}', which is the estimator's own "
        rf"parameter `{key}`"
    ).check(lambda: est.fit(TEXTS, y))


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("key", list(SET_BY_PROBE))
def test_extractor_params_that_the_probe_sets_are_refused(tiny_model_path, probe, key):
    cls, y = PROBES[probe]
    est = cls(tiny_model_path, device="cpu", extractor_params={key: SET_BY_PROBE[key]})
    err(rf"`extractor_params` sets '{key}', which the estimator sets itself").check(
        lambda: est.fit(TEXTS, y)
    )


@pytest.mark.parametrize("key", ["pool", "max_lenght", "trust_remote"])
def test_unknown_extractor_params_are_refused(tiny_model_path, key):
    est = LayerProbeClassifier(tiny_model_path, device="cpu", extractor_params={key: 1})
    err(
        rf"`extractor_params` key '{key}' is not a HiddenStatesTransformer parameter"
    ).check(lambda: est.fit(TEXTS, Y))


ALLOWED = {
    "precision": "bfloat16",
    "exclude_tokens": "special",
    "max_batch_tokens": 16,
    "dtype": "float16",
    "trust_remote_code": False,
}


@pytest.mark.parametrize("key", list(ALLOWED))
def test_extractor_params_of_the_extractor_are_taken(tiny_model_path, key):
    est = LayerProbeClassifier(
        tiny_model_path,
        device="cpu",
        selector=_first_layer(),
        extractor_params={key: ALLOWED[key]},
    ).fit(TEXTS, Y)
    assert est.pipeline_[0].get_params()[key] == ALLOWED[key]


# --------------------------------------------------------------------------
# A save that could never load back is an error at save, naming the object
# --------------------------------------------------------------------------
def _outer():
    def inner(x):
        return x

    return inner


def identity(x):  # a module-level function: it loads back (with trusted=)
    return x


ROUND_TRIP = [
    (
        "lambda_step",
        lambda: FunctionTransformer(lambda x: x),
        err(r"holds .*<lambda>.*cannot be loaded back"),
    ),
    (
        "nested_function_step",
        lambda: FunctionTransformer(_outer()),
        err(r"holds .*inner.*cannot be loaded back"),
    ),
    (
        "partial_of_a_lambda",
        lambda: FunctionTransformer(functools.partial(lambda x, y: x, y=1)),
        err(r"cannot be loaded back|does not load back"),
    ),
    ("module_function_step", lambda: FunctionTransformer(identity), ok()),
]


@pytest.mark.parametrize(
    "make, outcome", [pytest.param(m, o, id=i) for i, m, o in ROUND_TRIP]
)
def test_a_pipeline_that_cannot_load_back_is_an_error_at_save(
    tiny_model_path, tmp_path, make, outcome
):
    pipe = prune_layers(
        make_pipeline(
            _hst(tiny_model_path), _first_layer(), make(), LogisticRegression()
        ).fit(TEXTS, Y)
    )
    outcome.check(lambda: save_probe(pipe, tmp_path / "p"))
    if isinstance(outcome, err):
        assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_lambda_pooling_is_an_error_at_save(tiny_model_path, tmp_path):
    pooling = lambda hidden, mask: hidden.mean(1)  # noqa: E731
    pipe = prune_layers(
        make_pipeline(
            _hst(tiny_model_path, pooling=pooling), _first_layer(), LogisticRegression()
        ).fit(TEXTS, Y)
    )
    err(r"<lambda>.*cannot be loaded back").check(
        lambda: save_probe(pipe, tmp_path / "p")
    )


def test_a_probe_whose_estimator_holds_a_lambda_is_an_error_at_save(
    tiny_model_path, tmp_path
):
    head = make_pipeline(FunctionTransformer(lambda x: x), LogisticRegression())
    probe = LayerProbeClassifier(
        tiny_model_path, device="cpu", selector=_first_layer(), estimator=head
    ).fit(TEXTS, Y)
    err(r"<lambda>").check(lambda: save_probe(probe, tmp_path / "p"))


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
        err(r"`task`='regression' needs numeric `y`"),
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


# --------------------------------------------------------------------------
# The command line's remaining gaps
# --------------------------------------------------------------------------
def cli_error(argv, needle, capsys):
    status = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert status == 2, lines
    assert len(errors) == 1 and re.search(needle, errors[0]), lines
    assert not any("Traceback" in line for line in lines)


def _words(n, seed=0):
    rng = np.random.RandomState(seed)
    words = "the a good bad great awful movie film plot actor story fun dull".split()
    return [" ".join(rng.choice(words, size=rng.randint(3, 8))) for _ in range(n)]


def _write(path, header, rows, sep=","):
    lines = [sep.join(header)] + [sep.join(map(str, row)) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def saved_probes(tiny_model_path, tmp_path_factory):
    """Probes saved with heads that do and do not give probabilities."""
    root = tmp_path_factory.mktemp("heads")
    texts = _words(24)
    labels = ["pos", "neg"] * 12
    heads = {
        "logistic": LogisticRegression(),
        "linear_svc": LinearSVC(),
        "ridge_classifier": RidgeClassifier(),
        "svc_no_probability": SVC(),
    }
    out = {}
    for name, head in heads.items():
        probe = LayerProbeClassifier(
            tiny_model_path, device="cpu", selector=_first_layer(), estimator=head
        ).fit(texts, labels)
        out[name] = (probe, save_probe(probe, root / name))
    regressor = LayerProbeRegressor(
        tiny_model_path, device="cpu", selector=_first_layer()
    ).fit(texts, np.arange(24.0))
    out["regressor"] = (regressor, save_probe(regressor, root / "regressor"))
    return out


HEAD_CASES = [  # (head, header, a note on stderr)
    ("logistic", ["prediction", "proba_neg", "proba_pos"], False),
    ("linear_svc", ["prediction"], True),
    ("ridge_classifier", ["prediction"], True),
    ("svc_no_probability", ["prediction"], True),
    ("regressor", ["prediction"], False),
]


@pytest.mark.parametrize(
    "head, header, note", [pytest.param(h, c, n, id=h) for h, c, n in HEAD_CASES]
)
def test_skloes_predict_with_any_head(
    saved_probes, tmp_path, capsys, head, header, note
):
    probe, folder = saved_probes[head]
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in NEW])
    assert main(["predict", str(folder), "--data", data]) == 0
    captured = capsys.readouterr()
    rows = captured.out.strip().splitlines()
    assert rows[0].split(",") == header
    expected = probe.predict(NEW)
    got = [row.split(",")[0] for row in rows[1:]]
    if head == "regressor":
        np.testing.assert_allclose(np.array(got, float), expected, rtol=1e-5)
    else:
        assert got == [str(v) for v in expected]
    assert ("gives no probabilities; writing predictions only" in captured.err) is note


@pytest.mark.parametrize(
    "head", ["linear_svc", "ridge_classifier", "svc_no_probability"]
)
def test_a_head_without_probabilities_hides_predict_proba(saved_probes, head):
    probe, folder = saved_probes[head]
    assert not hasattr(probe, "predict_proba")
    assert not hasattr(load_probe(folder), "predict_proba")


def test_predict_options_device_and_batch_size(saved_probes, tmp_path, capsys):
    probe, folder = saved_probes["logistic"]
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in NEW])
    argv = [
        "predict",
        str(folder),
        "--data",
        data,
        "--device",
        "cpu",
        "--batch-size",
        "1",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("prediction,proba_")
    cli_error([*argv[:4], "--device", "gpu9"], r"device", capsys)


# Byte-order marks and encodings, read by skloes predict (fast) and probe.
def _encoded(tmp_path, name, encoding, bom, sep=","):
    text = ("text" + sep + "id\n") + "".join(
        f"{t}{sep}{i}\n" for i, t in enumerate(NEW)
    )
    if name.endswith(".jsonl"):
        text = "".join(
            json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(NEW)
        )
    data = bom + text.encode(encoding)
    (tmp_path / name).write_bytes(data)
    return str(tmp_path / name)


ENCODINGS = [  # (id, file name, encoding, BOM bytes)
    ("csv_utf8_bom", "d.csv", "utf-8", b"\xef\xbb\xbf"),
    ("tsv_utf8_bom", "d.tsv", "utf-8", b"\xef\xbb\xbf"),
    ("jsonl_utf8_bom", "d.jsonl", "utf-8", b"\xef\xbb\xbf"),
    ("csv_utf16_le", "d.csv", "utf-16-le", b"\xff\xfe"),
    ("tsv_utf16_be", "d.tsv", "utf-16-be", b"\xfe\xff"),
    ("jsonl_utf16", "d.jsonl", "utf-16-le", b"\xff\xfe"),
    ("csv_utf32", "d.csv", "utf-32-le", b"\xff\xfe\x00\x00"),
    ("csv_no_bom", "d.csv", "utf-8", b""),
]


@pytest.mark.parametrize(
    "name, encoding, bom",
    [pytest.param(n, e, b, id=i) for i, n, e, b in ENCODINGS],
)
def test_skloes_predict_reads_byte_order_marks(
    saved_probes, tmp_path, capsys, name, encoding, bom
):
    probe, folder = saved_probes["logistic"]
    sep = "\t" if name.endswith(".tsv") else ","
    data = _encoded(tmp_path, name, encoding, bom, sep)
    assert main(["predict", str(folder), "--data", data]) == 0, capsys.readouterr().err
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == list(probe.predict(NEW))


def test_a_file_that_is_not_utf8_is_one_line(saved_probes, tmp_path, capsys):
    _, folder = saved_probes["logistic"]
    (tmp_path / "d.csv").write_bytes("text\ncaf\u00e9 film\n".encode("latin-1"))
    cli_error(
        ["predict", str(folder), "--data", str(tmp_path / "d.csv")],
        r"is not UTF-8 text \(byte b'\\xe9' at offset",
        capsys,
    )


NUMERIC_TEXTS = [  # (id, texts, noted)
    ("all_numbers", ["26.0", "31", "1,000", "-4.5"] * 3, True),
    (
        "nine_in_ten_numbers",
        ["1", "2", "3", "4", "5", "6", "7", "8", "9", "a film"],
        True,
    ),
    ("half_numbers", ["1", "a film", "2", "the plot"] * 2, False),
    ("words", NEW, False),
    ("scientific", ["1e3", "2E-2", "3.5", "-inf"], True),
]


@pytest.mark.parametrize(
    "texts, noted", [pytest.param(t, n, id=i) for i, t, n in NUMERIC_TEXTS]
)
def test_a_numeric_text_column_is_noted(saved_probes, tmp_path, capsys, texts, noted):
    _, folder = saved_probes["logistic"]
    data = _write(tmp_path / "d.csv", ["text"], [[f'"{t}"'] for t in texts])
    assert main(["predict", str(folder), "--data", data]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == len(texts) + 1
    assert ("holds numbers in" in captured.err) is noted, captured.err


# skloes probe --task: failures come before the model is loaded (fast).
def _labelled(tmp_path, labels, name="d.csv"):
    texts = _words(len(labels))
    return _write(tmp_path / name, ["text", "label"], zip(texts, labels, strict=True))


TASK_ERRORS = [  # (id, labels, --task, needle)
    (
        "continuous_as_classes",
        [0.5, 1.25, 2.5, 3.75] * 5,
        "classification",
        r"--task classification needs class labels.*e\.g\. 0\.5",
    ),
    (
        "strings_as_regression",
        ["pos", "neg"] * 10,
        "regression",
        r"--task regression needs numbers; --label-column 'label' holds '(pos|neg)'",
    ),
    (
        "singleton_numeric_class",
        [18, 19, 20, 21, 22] * 2 + [23],
        "auto",
        r"class 23 has 1 sample.*pass --task regression",
    ),
    (
        "singleton_string_class",
        ["a", "b"] * 5 + ["c"],
        "auto",
        r"class 'c' has 1 sample(?!.*--task)",
    ),
    ("constant_target", [2.5] * 12, "regression", r"single value \(2\.5\)"),
    ("too_few_rows", [1.5, 2.5, 3.5] * 3, "regression", r"only 9 labelled rows"),
    ("infinite_target", [1.5, 2.5, "inf"] * 4, "regression", r"'label' holds infinity"),
    ("infinite_target_auto", [1.5, 2.5, "-inf"] * 4, "auto", r"'label' holds infinity"),
]


@pytest.mark.parametrize(
    "labels, task, needle",
    [pytest.param(lab, t, n, id=i) for i, lab, t, n in TASK_ERRORS],
)
def test_skloes_probe_task_errors(
    tiny_model_path, tmp_path, capsys, labels, task, needle
):
    data = _labelled(tmp_path, labels)
    argv = ["probe", "--model", tiny_model_path, "--data", data, "--task", task]
    cli_error([*argv, "--out", str(tmp_path / "out")], needle, capsys)
    assert not (tmp_path / "out").exists()


def test_skloes_probe_task_regression_on_builtin_data_is_refused(tmp_path, capsys):
    cli_error(
        ["probe", "--task", "regression", "--out", str(tmp_path / "o")],
        r"built-in data set 'rotten_tomatoes' has classes",
        capsys,
    )


def test_skloes_probe_task_choices(tmp_path, capsys):
    cli_error(["probe", "--task", "ranking"], r"--task.*invalid choice", capsys)


@pytest.mark.parametrize(
    "labels, task, expected",
    [
        pytest.param(
            [float(v) for v in range(18, 58)],
            "auto",
            "regression",
            id="float_ages_auto",
        ),
        pytest.param(
            list(range(18, 58)), "regression", "regression", id="int_ages_regression"
        ),
        pytest.param(
            [0.0, 1.0] * 20, "auto", "classification", id="float_zero_one_auto"
        ),
    ],
)
def test_skloes_probe_task_is_read_and_saved(
    tiny_model_path, tmp_path, capsys, labels, task, expected
):
    from skloes.cli._data import load_data

    data = _labelled(tmp_path, labels)
    _, y, _, found, _ = load_data(data, "text", "label", None, 0, task=task)
    assert found == expected
    if expected == "regression":
        assert y.dtype == np.float64
    noted = "probed as a continuous target" in capsys.readouterr().err
    assert noted is (task == "auto" and expected == "regression")


def test_skloes_probe_regression_end_to_end(tiny_model_path, tmp_path, capsys):
    """A numeric target from a file with a byte-order mark: a regression
    report, a saved regressor, and predictions of it."""
    labels = [float(v) for v in range(18, 58)]
    texts = _words(len(labels))
    body = "text,label\n" + "".join(
        f"{t},{v}\n" for t, v in zip(texts, labels, strict=True)
    )
    (tmp_path / "ages.csv").write_bytes(b"\xef\xbb\xbf" + body.encode())
    argv = [
        "probe", "--model", tiny_model_path, "--data", str(tmp_path / "ages.csv"),
        "--n-layers-to-select", "1", "--device", "cpu", "--max-samples", "all",
        "--out", str(tmp_path / "out"), "--save", str(tmp_path / "out" / "probe"),
    ]  # fmt: skip
    status = main(argv)
    assert status == 0, capsys.readouterr().err
    capsys.readouterr()
    report = json.loads((tmp_path / "out" / "selection.json").read_text())
    assert report["task"] == "regression" and report["scoring"] == "r2"
    probe = load_probe(tmp_path / "out" / "probe")
    assert isinstance(probe, LayerProbeRegressor)
    new = _write(tmp_path / "new.csv", ["text"], [[t] for t in NEW])
    assert main(["predict", str(tmp_path / "out" / "probe"), "--data", new]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0] == "prediction"
    np.testing.assert_allclose(np.array(rows[1:], float), probe.predict(NEW), rtol=1e-5)
