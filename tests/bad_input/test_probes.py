"""The probes (LayerProbeClassifier, LayerProbeRegressor) and the text-column
encoder (LayerTextEncoder): nested extractor_params that collide, heads
without probabilities, fit_stack, metadata routing.

New in issue 34 (the section at the end): LayerTextEncoder given wrong
columns, types and frames, missing values of every library and targets that
are no array; fit_stack given wrong shapes, NaN, other rows or the stack of
another model; a regressor given text and a classifier given a continuous
target; groups and sample_weight routed (or not) to the selector and head.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok, warns  # noqa: E402
from _support.probes import first_layer  # noqa: E402
from _support.texts import PROBE_TEXTS, PROBE_Y  # noqa: E402

from skloes.probe import (  # noqa: E402
    LayerEnsembleClassifier,
    LayerEnsembleRegressor,
    LayerProbeClassifier,
    LayerProbeRegressor,
    LayerTextEncoder,
    load_probe,
)

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
    "classifier": (LayerProbeClassifier, PROBE_Y),
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
    ).check(lambda: est.fit(PROBE_TEXTS, y))


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("key", list(SET_BY_PROBE))
def test_extractor_params_that_the_probe_sets_are_refused(tiny_model_path, probe, key):
    cls, y = PROBES[probe]
    est = cls(tiny_model_path, device="cpu", extractor_params={key: SET_BY_PROBE[key]})
    err(rf"`extractor_params` sets '{key}', which the estimator sets itself").check(
        lambda: est.fit(PROBE_TEXTS, y)
    )


@pytest.mark.parametrize("key", ["pool", "max_lenght", "trust_remote"])
def test_unknown_extractor_params_are_refused(tiny_model_path, key):
    est = LayerProbeClassifier(tiny_model_path, device="cpu", extractor_params={key: 1})
    err(
        rf"`extractor_params` key '{key}' is not a HiddenStatesTransformer parameter"
    ).check(lambda: est.fit(PROBE_TEXTS, PROBE_Y))


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
        selector=first_layer(),
        extractor_params={key: ALLOWED[key]},
    ).fit(PROBE_TEXTS, PROBE_Y)
    assert est.pipeline_[0].get_params()[key] == ALLOWED[key]


@pytest.mark.parametrize(
    "head", ["linear_svc", "ridge_classifier", "svc_no_probability"]
)
def test_a_head_without_probabilities_hides_predict_proba(saved_probes, head):
    probe, folder = saved_probes[head]
    assert not hasattr(probe, "predict_proba")
    assert not hasattr(load_probe(folder), "predict_proba")


# ==========================================================================
# New in issue 34: the text-column encoder, fit_stack, routing, targets
# ==========================================================================
def _pd():
    return pytest.importorskip("pandas")


def _pl():
    return pytest.importorskip("polars")


@pytest.fixture(scope="module")
def stack(tiny_model_path):
    """Every layer of PROBE_TEXTS as a probe's extractor computes them."""
    from skloes import HiddenStatesTransformer

    return HiddenStatesTransformer(
        tiny_model_path, device="cpu", output="stack", max_length=128
    ).fit_transform(PROBE_TEXTS)


def _encoder(model, **params):
    return LayerTextEncoder(model, device="cpu", selector=first_layer(), **params)


# --------------------------------------------------------------------------
# LayerTextEncoder: one text column, or one line naming `X` (or `y`)
# --------------------------------------------------------------------------
def _width(n_rows):
    def check(out):
        assert np.asarray(out).shape[0] == n_rows and np.isfinite(out).all()

    return check


ENCODER_INPUTS = [  # (id, X, y, outcome of fit_transform)
    (
        "two_column_frame",
        lambda: _pd().DataFrame({"a": PROBE_TEXTS, "b": PROBE_TEXTS}),
        PROBE_Y,
        err(r"`X` must be one text column; got a table of 2 columns \('a', 'b'\)"),
    ),
    (
        "zero_column_frame",
        lambda: _pd().DataFrame(index=range(12)),
        PROBE_Y,
        err(r"`X` must be one text column; got a table of 0 columns"),
    ),
    (
        "polars_two_columns",
        lambda: _pl().DataFrame({"a": PROBE_TEXTS, "b": PROBE_TEXTS}),
        PROBE_Y,
        err(r"`X` must be one text column; got a table of 2 columns"),
    ),
    (
        "two_column_array",
        lambda: np.array([PROBE_TEXTS, PROBE_TEXTS], dtype=object).T,
        PROBE_Y,
        err(r"`X` must be one text column; got an array of 2 columns"),
    ),
    ("a_string", lambda: "a text", None, err(r"`X` must be a column of texts.*str")),
    ("none", lambda: None, None, err(r"`X` must be a column of texts.*NoneType")),
    (
        "sparse",
        lambda: __import__("scipy").sparse.csr_matrix(np.ones((3, 1))),
        None,
        err(r"sparse input is not supported"),
    ),
    ("ints", lambda: list(range(12)), None, err(r"`X` holds int 0 at row 0")),
    ("bools", lambda: ["a", True], None, err(r"holds bool True at row 1")),
    ("bytes", lambda: [b"a", b"b"], None, err(r"holds bytes b'a' at row 0")),
    ("nested_lists", lambda: [["a"], ["b"]], None, err(r"holds list \['a'\]")),
    (
        "pandas_na",
        lambda: _pd().Series(["a", None, "b"], dtype="string", name="review"),
        None,
        err(r"column 'review' holds a missing value at row 1; fill or drop"),
    ),
    (
        "pandas_nat",
        lambda: ["a", _pd().NaT],
        None,
        err(r"`X` holds a missing value at row 1; fill or drop"),
    ),
    (
        "numpy_float32_nan",
        lambda: ["a", np.float32("nan")],
        None,
        err(r"`X` holds a missing value at row 1; fill or drop"),
    ),
    (
        "object_nan",
        lambda: np.array(["a", np.nan], dtype=object),
        None,
        err(r"`X` holds a missing value at row 1"),
    ),
    (
        "polars_null",
        lambda: _pl().Series("review", ["a", None]),
        None,
        err(r"column 'review' holds a missing value at row 1"),
    ),
    ("empty", lambda: [], None, err(r"`X` is empty")),
    (
        "y_short",
        lambda: PROBE_TEXTS,
        PROBE_Y[:3],
        err(r"`y` must have one entry per text"),
    ),
    ("y_scalar", lambda: PROBE_TEXTS, 5, err(r"`y` must be an array-like.*got int")),
    ("y_string", lambda: PROBE_TEXTS, "labels", err(r"`y` must be an array-like")),
    ("y_generator", lambda: PROBE_TEXTS, (v for v in PROBE_Y), ok(_width(12))),
    (
        "categorical_series",
        lambda: _pd().Series(PROBE_TEXTS, dtype="category"),
        PROBE_Y,
        ok(_width(12)),
    ),
    (
        "one_column_array",
        lambda: np.array(PROBE_TEXTS, dtype=object)[:, None],
        PROBE_Y,
        ok(_width(12)),
    ),
    (
        "polars_series",
        lambda: _pl().Series("review", PROBE_TEXTS),
        PROBE_Y,
        ok(_width(12)),
    ),
    ("no_y", lambda: PROBE_TEXTS, None, ok(_width(12))),
]


@pytest.mark.parametrize(
    "make_X, y, outcome", [pytest.param(x, y, o, id=i) for i, x, y, o in ENCODER_INPUTS]
)
def test_encoder_inputs(tiny_model_path, make_X, y, outcome):
    outcome.check(lambda: _encoder(tiny_model_path).fit_transform(make_X(), y))


@pytest.fixture(scope="module")
def encoder(tiny_model_path):
    return _encoder(tiny_model_path).fit(
        _pd().Series(PROBE_TEXTS, name="review"), PROBE_Y
    )


ENCODER_AFTER_FIT = [  # (id, call(fitted), outcome)
    (
        "transform_other_column",
        lambda e: e.transform(_pd().Series(PROBE_TEXTS, name="title")),
        err(r"`X` is the column 'title', but the encoder was fitted on .*'review'"),
    ),
    (
        "transform_frame_of_other_column",
        lambda e: e.transform(_pd().DataFrame({"title": PROBE_TEXTS})),
        err(r"`X` is the column 'title'"),
    ),
    (
        "transform_unnamed_list",
        lambda e: e.transform(PROBE_TEXTS),
        ok(_width(12)),
    ),
    (
        "names_of_two_columns",
        lambda e: e.get_feature_names_out(["a", "b"]),
        err(r"`input_features` must be the one column seen in fit \('review'\)"),
    ),
    (
        "names_of_another_column",
        lambda e: e.get_feature_names_out(["title"]),
        err(r"`input_features` must be the one column"),
    ),
    (
        "transform_numbers",
        lambda e: e.transform(np.arange(3.0)),
        err(r"`X` must hold strings .*numeric array"),
    ),
]


@pytest.mark.parametrize(
    "call, outcome", [pytest.param(c, o, id=i) for i, c, o in ENCODER_AFTER_FIT]
)
def test_encoder_after_fit(encoder, call, outcome):
    outcome.check(lambda: call(encoder))


def test_encoder_pandas_output_names_its_columns(encoder):
    out = encoder.set_output(transform="pandas").transform(
        _pd().Series(PROBE_TEXTS[:3], name="review")
    )
    encoder.set_output(transform="default")
    layer = int(encoder.selected_layers_[0])
    assert list(out.columns[:2]) == [
        f"review__layer{layer}_0",
        f"review__layer{layer}_1",
    ]


# --------------------------------------------------------------------------
# fit_stack: every layer of the rows of X, or one line naming what differs
# --------------------------------------------------------------------------
def _probe_of(model, cls=None):
    return (cls or LayerProbeClassifier)(model, device="cpu", selector=first_layer())


FIT_STACK = [  # (id, X, stack(s), y, outcome)
    (
        "one_layer",
        PROBE_TEXTS,
        lambda s: s[0],
        PROBE_Y,
        err(r"`stack` must hold every layer"),
    ),
    (
        "layers_missing",
        PROBE_TEXTS,
        lambda s: s[:2],
        PROBE_Y,
        err(r"`stack` must hold every layer .*of shape \(3, 12, 8\).*\(2, 12, 8\)"),
    ),
    (
        "other_width",
        PROBE_TEXTS,
        lambda s: s[:, :, :4],
        PROBE_Y,
        err(r"`stack` must hold every layer.*\(3, 12, 4\)"),
    ),
    (
        "a_flat_table",
        PROBE_TEXTS,
        lambda s: s.transpose(1, 0, 2).reshape(12, -1),
        PROBE_Y,
        err(r"`stack` must hold every layer"),
    ),
    (
        "rows_of_other_texts",
        PROBE_TEXTS,
        lambda s: s[:, :6],
        PROBE_Y,
        err(r"`stack` has 6 rows \(axis 1\) but `X` and `y` have 12"),
    ),
    (
        "nan",
        PROBE_TEXTS,
        lambda s: s * np.nan,
        PROBE_Y,
        err(r"`stack` holds NaN or infinite"),
    ),
    (
        "inf",
        PROBE_TEXTS,
        lambda s: s + np.inf,
        PROBE_Y,
        err(r"`stack` holds NaN or infinite"),
    ),
    (
        "strings",
        PROBE_TEXTS,
        lambda s: np.full(s.shape, "a"),
        PROBE_Y,
        err(r"`stack` must be a numeric array.*could not convert string to float: 'a'"),
    ),
    (
        "X_shorter",
        PROBE_TEXTS[:6],
        lambda s: s,
        PROBE_Y,
        err(r"`X` has 6 inputs but `y` has 12"),
    ),
    (
        "X_longer",
        PROBE_TEXTS * 2,
        lambda s: s,
        PROBE_Y,
        err(r"`X` has 24 inputs but `y` has 12"),
    ),
    (
        "y_shorter",
        PROBE_TEXTS,
        lambda s: s,
        PROBE_Y[:6],
        err(r"`X` has 12 inputs but `y` has 6"),
    ),
    ("X_none", None, lambda s: s, PROBE_Y, err(r"`X` must be a list or array of text")),
    (
        "another_model_stack",
        PROBE_TEXTS,
        lambda s: np.random.RandomState(0).randn(7, 12, 16),
        PROBE_Y,
        err(r"`stack` must hold every layer .*\(3, 12, 8\).*\(7, 12, 16\)"),
    ),
    ("as_a_list", PROBE_TEXTS, lambda s: s.tolist(), PROBE_Y, ok()),
    ("float16", PROBE_TEXTS, lambda s: s.astype(np.float16), PROBE_Y, ok()),
    ("texts_as_a_generator", (t for t in PROBE_TEXTS), lambda s: s, PROBE_Y, ok()),
]


@pytest.mark.parametrize(
    "X, make_stack, y, outcome",
    [pytest.param(x, s, y, o, id=i) for i, x, s, y, o in FIT_STACK],
)
def test_fit_stack(tiny_model_path, stack, X, make_stack, y, outcome):
    outcome.check(lambda: _probe_of(tiny_model_path).fit_stack(X, make_stack(stack), y))


def test_fit_stack_predicts_as_fit(tiny_model_path, stack):
    fitted = _probe_of(tiny_model_path).fit(PROBE_TEXTS, PROBE_Y)
    from_stack = _probe_of(tiny_model_path).fit_stack(PROBE_TEXTS, stack, PROBE_Y)
    np.testing.assert_allclose(
        from_stack.predict_proba(PROBE_TEXTS), fitted.predict_proba(PROBE_TEXTS)
    )


# --------------------------------------------------------------------------
# Targets: a regressor given text, a classifier given a continuous target
# --------------------------------------------------------------------------
TARGETS = [  # (id, cls, y, outcome)
    (
        "regressor_text",
        LayerProbeRegressor,
        ["a", "b"] * 6,
        err(r"LayerProbeRegressor: `y` must hold numbers.*got 'a'"),
    ),
    (
        "regressor_the_texts",
        LayerProbeRegressor,
        PROBE_TEXTS,
        err(r"`y` must hold numbers.*got 'a good movie'"),
    ),
    (
        "regressor_mixed_objects",
        LayerProbeRegressor,
        np.array([1.0, "x"] * 6, dtype=object),
        err(r"`y` must hold numbers.*got 'x' \(dtype object\)"),
    ),
    (
        "regressor_two_columns",
        LayerProbeRegressor,
        np.ones((12, 2)),
        err(r"LayerProbeRegressor: `y` must be one column of numbers; got shape"),
    ),
    (
        "regressor_none_values",
        LayerProbeRegressor,
        [1.0, None] * 6,
        err(r"`y` must be finite"),
    ),
    ("regressor_numeric_strings", LayerProbeRegressor, ["1.5", "2"] * 6, ok()),
    (
        "classifier_continuous",
        LayerProbeClassifier,
        np.linspace(0, 1, 12),
        err(r"LayerProbeClassifier: `y` must hold class labels; got continuous"),
    ),
    (
        "classifier_two_columns",
        LayerProbeClassifier,
        np.c_[PROBE_Y, PROBE_Y],
        err(r"LayerProbeClassifier: `y` must be one column of class labels"),
    ),
    (
        "classifier_bytes",
        LayerProbeClassifier,
        np.array([b"pos", b"neg"] * 6),
        err(r"`y` holds bytes labels; decode them to str"),
    ),
    (
        "classifier_mixed_types",
        LayerProbeClassifier,
        np.array([0, "a"] * 6, dtype=object),
        err(r"`y` mixes text and number labels \(0 at row 0, 'a' at row 1\)"),
    ),
    ("classifier_one_class", LayerProbeClassifier, [1] * 12, err(r"at least two")),
    ("classifier_string_labels", LayerProbeClassifier, ["neg", "pos"] * 6, ok()),
]


@pytest.mark.parametrize(
    "cls, y, outcome", [pytest.param(c, y, o, id=i) for i, c, y, o in TARGETS]
)
def test_probe_targets(tiny_model_path, cls, y, outcome):
    outcome.check(lambda: _probe_of(tiny_model_path, cls).fit(PROBE_TEXTS, y))


ENSEMBLE_OF = {
    LayerProbeRegressor: LayerEnsembleRegressor,
    LayerProbeClassifier: LayerEnsembleClassifier,
}


@pytest.mark.parametrize(
    "cls, y, outcome",
    [
        pytest.param(c, y, o, id=i)
        for i, c, y, o in TARGETS
        if i not in ("regressor_the_texts",)
    ],
)
def test_ensemble_targets(cls, y, outcome):
    # The per-layer ensembles check targets by the probes' one rule, in
    # their own name.
    ensemble = ENSEMBLE_OF[cls]
    stack = np.random.RandomState(0).normal(size=(2, 12, 3))
    if isinstance(outcome, err):
        named = outcome.needle.replace(cls.__name__, ensemble.__name__)
        outcome = err(named if named != outcome.needle else ensemble.__name__)
    outcome.check(lambda: ensemble().fit(stack, y))


# --------------------------------------------------------------------------
# Fusions on rows too few for inner folds (a class of one sample, or a
# regression of 3): a stack is refused by name, "auto" concatenates and says so
# --------------------------------------------------------------------------
def _all_layers_probe(model, cls, fusion):
    from skloes.selection import AllLayersSelector

    return cls(model, device="cpu", selector=AllLayersSelector(), fusion=fusion)


FEW_ROWS = [  # (id, make(model), y, outcome)
    (
        "probe_stack_class_of_one",
        lambda m: _all_layers_probe(m, LayerProbeClassifier, "stack"),
        [0, 0, 0, 1],
        err(r"LayerProbeClassifier: fusion='stack' .*class 1 has 1 sample"),
    ),
    (
        "probe_auto_class_of_one",
        lambda m: _all_layers_probe(m, LayerProbeClassifier, "auto"),
        [0, 0, 0, 1],
        warns(
            r"fusion='auto' .*class 1 has 1 sample.*concatenated",
            then=lambda p: p.fusion_ == "concatenate" and p.fusion_scores_ is None,
        ),
    ),
    (
        "probe_average_class_of_one",
        lambda m: _all_layers_probe(m, LayerProbeClassifier, "average"),
        [0, 0, 0, 1],
        ok(lambda p: p.fusion_ == "average"),
    ),
    (
        "regressor_stack_three_rows",
        lambda m: _all_layers_probe(m, LayerProbeRegressor, "stack"),
        [0.0, 1.0, 2.0],
        err(r"LayerProbeRegressor: fusion='stack' .*3 samples \(a regression needs 4"),
    ),
    (
        "regressor_auto_three_rows",
        lambda m: _all_layers_probe(m, LayerProbeRegressor, "auto"),
        [0.0, 1.0, 2.0],
        warns(r"3 samples", then=lambda p: p.fusion_ == "concatenate"),
    ),
]


@pytest.mark.parametrize(
    "make, y, outcome", [pytest.param(m, y, o, id=i) for i, m, y, o in FEW_ROWS]
)
def test_fusion_on_too_few_rows(tiny_model_path, make, y, outcome):
    outcome.check(lambda: make(tiny_model_path).fit(PROBE_TEXTS[: len(y)], y))


@pytest.mark.parametrize(
    "cls, y, needle",
    [
        (LayerEnsembleClassifier, [0, 1, 1, 1, 0, 2], r"class 2 has 1 sample"),
        (LayerEnsembleClassifier, ["a", "b", "a"], r"class 'b' has 1 sample"),
        (LayerEnsembleRegressor, [0.0, 1.0], r"2 samples \(a regression needs 4"),
    ],
)
def test_ensemble_stack_on_too_few_rows(cls, y, needle):
    stack = np.random.RandomState(0).normal(size=(2, len(y), 3))
    err(rf"{cls.__name__}: combine='stack' .*{needle}").check(
        lambda: cls(combine="stack").fit(stack, y)
    )
    cls(combine="average").fit(stack, y)  # no inner folds needed


# --------------------------------------------------------------------------
# Metadata routing: groups and sample_weight
# --------------------------------------------------------------------------
def _cv_probe(model, **params):
    from skloes.selection import LOESSelector, LOESSelectorCV

    selector = LOESSelectorCV(
        selector=LOESSelector(random_state=0), max_layers_to_select=2, **params
    )
    return LayerProbeClassifier(model, device="cpu", selector=selector)


ROUTING = [  # (id, make(model), fit params, outcome)
    (
        "groups_short",
        lambda m: _cv_probe(m, cv=2),
        {"groups": [0, 1]},
        err(r"`groups` must hold one group per sample \(12\)"),
    ),
    (
        "groups_one",
        lambda m: _cv_probe(m, cv=2),
        {"groups": [0] * 12},
        err(r"`groups` must hold at least 2 groups.*got only 0\.$"),
    ),
    (
        "groups_missing_value",
        lambda m: _cv_probe(m, cv=2),
        {"groups": [np.nan] + [0, 1] * 5 + [1]},
        err(r"sample 0 has none \(nan\)"),
    ),
    (
        "groups_fewer_than_folds",
        lambda m: _cv_probe(m, cv=3),
        {"groups": ["a", "b"] * 6},
        err(r"`cv`=3 grouped folds need at least 3 groups; `groups` holds 2"),
    ),
    (
        "groups_to_a_selector_without_folds",
        lambda m: _probe_of(m),
        {"groups": [0, 1, 2] * 4},
        err(r"`groups` is used by no inner splitter here", TypeError),
    ),
    (
        "sample_weight_without_routing",
        lambda m: _probe_of(m),
        {"sample_weight": np.ones(12)},
        err(r"`sample_weight` reaches the inner estimators only with", TypeError),
    ),
    ("groups_three", lambda m: _cv_probe(m, cv=3), {"groups": [0, 1, 2] * 4}, ok()),
]


@pytest.mark.parametrize(
    "make, params, outcome", [pytest.param(m, p, o, id=i) for i, m, p, o in ROUTING]
)
def test_probe_routing(tiny_model_path, make, params, outcome):
    outcome.check(lambda: make(tiny_model_path).fit(PROBE_TEXTS, PROBE_Y, **params))


def test_sample_weight_routed_to_the_head(tiny_model_path):
    """With metadata routing on, sample_weight reaches a head that asks for
    it (and changes the fit), and no other step."""
    import sklearn
    from sklearn.linear_model import LogisticRegression

    weights = np.where(np.asarray(PROBE_Y) == 1, 5.0, 1.0)
    with sklearn.config_context(enable_metadata_routing=True):
        head = LogisticRegression().set_fit_request(sample_weight=True)
        weighted = LayerProbeClassifier(
            tiny_model_path, device="cpu", selector=first_layer(), estimator=head
        ).fit(PROBE_TEXTS, PROBE_Y, sample_weight=weights)
    plain = LayerProbeClassifier(
        tiny_model_path,
        device="cpu",
        selector=first_layer(),
        estimator=LogisticRegression(),
    ).fit(PROBE_TEXTS, PROBE_Y)
    assert not np.allclose(weighted.estimator_.coef_, plain.estimator_.coef_)


# --------------------------------------------------------------------------
# New in issue 55: labels of mixed types or missing are one error naming the
# row (numpy turned [1, "a"] into the text labels "1" and "a" without a
# word, and None met scikit-learn's "Unknown label type"), in every class
# estimator and selector; an ensemble's sample_weight reaches its house
# probe (a Pipeline, which refused it with scikit-learn's routing message).
# --------------------------------------------------------------------------
def _label_takers():
    from skloes.probe import LayerEnsembleClassifier
    from skloes.report import LayerReport
    from skloes.selection import (
        BestSingleLayerSelector,
        LOESSelector,
        RidgeProbeClassifier,
    )

    return {
        "ensemble": lambda X, y: LayerEnsembleClassifier().fit(X, y),
        "report": lambda X, y: LayerReport(metrics=(), cv=2).fit(X, y),
        "loes": lambda X, y: LOESSelector().fit(X, y),
        "ridge_probe": lambda X, y: RidgeProbeClassifier().fit(
            X.transpose(1, 0, 2).reshape(X.shape[1], -1), y
        ),
        "best_single": lambda X, y: BestSingleLayerSelector().fit(X, y),
    }


def _object(values):
    return np.asarray(values, dtype=object)


BAD_LABELS = [  # (id, labels of 20 rows, needle)
    ("int_and_str", [1, "a"] * 10, r"mixes text and number labels \(1 at row 0, 'a'"),
    ("str_then_float", ["a", 2.5] * 10, r"mixes text and number.*2\.5 at row 1"),
    ("bool_and_str", ["yes", True] * 10, r"mixes text and number"),
    ("numpy_int_and_str", _object([np.int64(3), "b"] * 10), r"mixes text and number"),
    (
        "none_among_str",
        ["a", "b"] * 9 + ["a", None],
        r"missing label \(None\) at row 19",
    ),
    ("none_among_ints", [0, 1] * 9 + [None, 1], r"missing label \(None\) at row 18"),
    ("nan_among_str", ["a", "b"] * 9 + [float("nan"), "a"], r"missing label \(nan\)"),
    ("all_none", [None] * 20, r"missing label \(None\) at row 0"),
]


@pytest.mark.parametrize(
    "taker", ["ensemble", "report", "loes", "ridge_probe", "best_single"]
)
@pytest.mark.parametrize(
    "labels, needle", [pytest.param(lab, n, id=i) for i, lab, n in BAD_LABELS]
)
def test_mixed_or_missing_labels_are_one_error_naming_the_row(taker, labels, needle):
    X = np.random.RandomState(0).randn(3, 20, 4)
    err(rf"`y` .*{needle}|`y` {needle}").check(
        lambda: _label_takers()[taker](X, labels)
    )


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param(["a", "b"] * 10, id="str"),
        pytest.param(_object(["a", "b"] * 10), id="object_str"),
        pytest.param(_object([0, 1] * 10), id="object_ints"),
        pytest.param([True, False] * 10, id="bools"),
    ],
)
def test_labels_of_one_type_are_fine(labels):
    X = np.random.RandomState(0).randn(3, 20, 4)
    for taker in _label_takers().values():
        taker(X, labels)


def test_ensemble_sample_weight_reaches_the_house_probe():
    """Zero weights equal dropping the rows (the scaler and the model alike)."""
    from skloes.probe import LayerEnsembleClassifier, LayerEnsembleRegressor

    rng = np.random.RandomState(0)
    X, y = rng.randn(3, 30, 4), np.arange(30) % 2
    w = np.r_[np.zeros(6), np.ones(24)]
    weighted = LayerEnsembleClassifier(combine="average").fit(X, y, sample_weight=w)
    dropped = LayerEnsembleClassifier(combine="average").fit(X[:, 6:], y[6:])
    np.testing.assert_allclose(
        weighted.predict_proba(X), dropped.predict_proba(X), atol=1e-4
    )
    stacked = LayerEnsembleClassifier().fit(X, y, sample_weight=w)
    assert stacked.predict(X).shape == (30,)
    LayerEnsembleRegressor().fit(X, rng.randn(30), sample_weight=w)


def test_ensemble_fit_parameter_its_estimator_does_not_take():
    from sklearn.neighbors import KNeighborsClassifier

    from skloes.probe import LayerEnsembleClassifier

    X, y = np.random.RandomState(0).randn(3, 20, 4), np.arange(20) % 2
    err(r"fit parameter `sample_weight` is not taken .*KNeighborsClassifier").check(
        lambda: LayerEnsembleClassifier(estimator=KNeighborsClassifier()).fit(
            X, y, sample_weight=np.ones(20)
        )
    )
    err(r"fit parameter `bogus` is not taken .*LogisticRegression").check(
        lambda: LayerEnsembleClassifier().fit(X, y, bogus=1)
    )
