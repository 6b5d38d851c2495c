"""LayerTextEncoder: a text column of a table, in ColumnTransformer and skrub."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from _support.texts import REVIEWS, SENTIMENT

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pd = pytest.importorskip("pandas")

import sklearn  # noqa: E402
from _support.probes import blocks_run, first_layers  # noqa: E402
from _support.rounding import assert_same_states, forward_terms  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.compose import ColumnTransformer, make_column_transformer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import (  # noqa: E402
    GridSearchCV,
    StratifiedGroupKFold,
    StratifiedKFold,
    cross_validate,
)
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils import estimator_checks  # noqa: E402

from skloes import LayerTextEncoder  # noqa: E402
from skloes.extraction import HiddenStatesTransformer as HST  # noqa: E402
from skloes.probe import LayerProbeClassifier  # noqa: E402
from skloes.selection import LOESSelectorCV  # noqa: E402

TEXTS = REVIEWS[:8] * 3
Y = np.array(SENTIMENT[:8] * 3)


def _table():
    return pd.DataFrame(
        {
            "review": TEXTS,
            "stars": np.linspace(1, 5, len(TEXTS)),
            "words": [len(t.split()) for t in TEXTS],
        },
        index=np.arange(100, 100 + len(TEXTS)),
    )


# ------------------------------------------------------------- the column
def test_output_is_the_selected_layers_named_by_column_layer_and_unit(deep_tiny):
    enc = LayerTextEncoder(deep_tiny, selector=first_layers(2))
    out = enc.fit_transform(pd.Series(TEXTS, name="review"), Y)
    stack = HST(deep_tiny, max_length=128).fit_transform(TEXTS)
    np.testing.assert_allclose(out, np.hstack([stack[1], stack[2]]), atol=1e-6)
    names = enc.get_feature_names_out()
    assert names[0] == "review__layer1_0" and names[8] == "review__layer2_0"
    assert len(names) == out.shape[1] == 16
    assert enc.n_features_in_ == 1 and list(enc.feature_names_in_) == ["review"]
    np.testing.assert_allclose(enc.transform(pd.Series(TEXTS, name="review")), out)


def test_every_form_of_one_column_gives_the_same_numbers(deep_tiny):
    pl = pytest.importorskip("polars")
    enc = LayerTextEncoder(deep_tiny, selector=first_layers(2)).fit(TEXTS, Y)
    ref = enc.transform(TEXTS)
    assert list(enc.get_feature_names_out()[:1]) == ["layer1_0"]  # unnamed
    forms = [
        np.asarray(TEXTS, dtype=object),
        np.asarray(TEXTS, dtype=object)[:, None],
        pd.Series(TEXTS),
        pd.DataFrame({"review": TEXTS}),
        pl.Series("review", TEXTS),
        pl.DataFrame({"review": TEXTS}),
    ]
    for X in forms:
        np.testing.assert_allclose(enc.transform(X), ref, atol=1e-6)


def test_transform_runs_only_through_the_deepest_selected_block(deep_tiny):
    enc = LayerTextEncoder(deep_tiny, selector=first_layers(2)).fit(TEXTS, Y)
    np.testing.assert_array_equal(enc.selected_layers_, [1, 2])
    assert blocks_run(lambda: enc.transform(TEXTS[:4])) == 2  # blocks 1..2 of 6


def test_a_cache_runs_each_text_once_across_the_folds_of_a_search(
    deep_tiny, tmp_path, texts_through_model
):
    table = _table()
    ct = make_column_transformer(
        (LayerTextEncoder(deep_tiny, cache=tmp_path, random_state=0), "review"),
        (StandardScaler(), ["stars", "words"]),
    )
    pipe = make_pipeline(ct, LogisticRegression(max_iter=1000))
    grid = {"columntransformer__layertextencoder__selector__n_layers_to_select": [1, 2]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    GridSearchCV(pipe, grid, cv=cv).fit(table, Y)
    assert texts_through_model[0] == len(set(TEXTS))


def test_selection_is_label_free_without_y(deep_tiny):
    enc = LayerTextEncoder(deep_tiny, random_state=0).fit(TEXTS)
    assert enc.selector_.task_ == "label_free"
    assert enc.transform(TEXTS).shape == (len(TEXTS), 8 * enc.selected_layers_.size)


# ------------------------------------------------------- tables and frames
@pytest.mark.parametrize("column", ["review", ["review"]])
def test_column_transformer_names_and_frames(deep_tiny, column):
    pl = pytest.importorskip("polars")
    table = _table()
    ct = make_column_transformer(
        (LayerTextEncoder(deep_tiny, selector=first_layers(2)), column),
        (StandardScaler(), ["stars", "words"]),
    )
    plain = ct.fit_transform(table, Y)
    names = ct.get_feature_names_out()
    assert names[0] == "layertextencoder__review__layer1_0"
    assert names[-1] == "standardscaler__words" and len(names) == plain.shape[1]
    frame = ct.set_output(transform="pandas").fit_transform(table, Y)
    assert list(frame.columns) == list(names)
    np.testing.assert_array_equal(frame.index, table.index)
    np.testing.assert_allclose(frame.to_numpy(), plain, atol=1e-6)
    polars = ct.set_output(transform="polars").fit_transform(pl.from_pandas(table), Y)
    assert isinstance(polars, pl.DataFrame) and polars.columns == list(names)
    np.testing.assert_allclose(polars.to_numpy(), plain, atol=1e-6)


def test_set_output_on_the_encoder_alone(deep_tiny):
    pl = pytest.importorskip("polars")
    series = pd.Series(TEXTS, name="review", index=np.arange(7, 7 + len(TEXTS)))
    enc = LayerTextEncoder(deep_tiny, selector=first_layers(1)).fit(series, Y)
    frame = enc.set_output(transform="pandas").transform(series)
    assert frame.columns[0] == "review__layer1_0"
    np.testing.assert_array_equal(frame.index, series.index)
    polars = enc.set_output(transform="polars").transform(pl.Series("review", TEXTS))
    assert isinstance(polars, pl.DataFrame) and polars.columns[0] == "review__layer1_0"


def test_skrub_table_vectorizer_takes_it_as_high_cardinality_encoder(deep_tiny):
    skrub = pytest.importorskip("skrub")
    pl = pytest.importorskip("polars")
    table = _table()
    vectorizer = skrub.TableVectorizer(
        high_cardinality=LayerTextEncoder(deep_tiny, selector=first_layers(1)),
        cardinality_threshold=2,
    )
    for data in (table, pl.from_pandas(table)):
        out = vectorizer.fit_transform(data, Y)
        assert vectorizer.kind_to_columns_["high_cardinality"] == ["review"]
        columns = list(out.columns)
        assert columns[:2] == ["review__layer1_0", "review__layer1_1"]
        assert {"stars", "words"} <= set(columns) and len(columns) == 8 + 2
        assert type(out).__module__.split(".")[0] == type(data).__module__.split(".")[0]


# ------------------------------------------------------------- bad input
def test_bad_columns_get_a_one_line_error_naming_x(deep_tiny):
    enc = LayerTextEncoder(deep_tiny)
    table = _table()
    cases = [
        (table, ValueError, "must be one text column; got a table of 3 columns"),
        (table["stars"], TypeError, "column 'stars' holds float"),
        (table[["stars"]], TypeError, "column 'stars' holds float"),
        (pd.Series(["a", None, "b"]), TypeError, "a missing value at row 1"),
        (pd.Series(["a", np.nan, "b"]), TypeError, "a missing value at row 1"),
        (np.zeros((4, 2)), TypeError, "got a numeric array of shape"),
        (np.array([["a", "b"]] * 3, dtype=object), ValueError, "array of 2 col"),
        ("one text", TypeError, "column of texts"),
    ]
    for X, error, message in cases:
        with pytest.raises(error, match=message) as info:
            enc.fit(X)
        assert "\n" not in str(info.value) and "`X`" in str(info.value)
    fitted = LayerTextEncoder(deep_tiny, selector=first_layers(1)).fit(
        table[["review"]], Y
    )
    with pytest.raises(ValueError, match="fitted on the column 'review'"):
        fitted.transform(pd.Series(TEXTS, name="title"))
    with pytest.raises(ValueError, match="`input_features`"):
        fitted.get_feature_names_out(["review", "stars"])
    with pytest.raises(ValueError, match="`y`"):
        LayerTextEncoder(deep_tiny).fit(TEXTS, Y[:3])


# --------------------------------------------------------- sklearn checks
# The API checks and the numeric checks every text estimator shares run in
# tests/test_common.py; these transformer checks also feed 2-D numeric
# tables, which the one-text-column encoder refuses with its error naming
# `X` (what they guard is tested by hand above: pickling, frames, names).
TRANSFORMER_NUMERIC_CHECKS = [
    "check_estimators_pickle",
    "check_pipeline_consistency",
    "check_transformer_general",
    "check_f_contiguous_array_estimator",
    "check_estimators_dtypes",
    "check_dtype_object",
    "check_complex_data",
]


@pytest.mark.parametrize("check", TRANSFORMER_NUMERIC_CHECKS)
def test_transformer_checks_on_numbers_fail_with_the_text_column_error(
    deep_tiny, check
):
    with pytest.raises(
        (TypeError, ValueError), match=r"`X` must (hold strings|be one)"
    ):
        getattr(estimator_checks, check)(
            "LayerTextEncoder", LayerTextEncoder(deep_tiny)
        )


# deep_tiny: 6 blocks of MLP width 16 after the embeddings
DEEP_TERMS = forward_terms(16, 7)


@pytest.mark.cpu_sensitive
def test_encoder_contract_on_text(deep_tiny):
    enc = LayerTextEncoder(deep_tiny, random_state=0)
    params = enc.get_params()
    assert enc.fit(TEXTS, Y) is enc
    assert enc.get_params() == params
    first = enc.transform(TEXTS[:5])
    np.testing.assert_array_equal(enc.fit(TEXTS, Y).transform(TEXTS[:5]), first)
    # reversed: another batch, equal to float32 rounding (6 blocks of width 16)
    assert_same_states(enc.transform(TEXTS[:5][::-1]), first[::-1], terms=DEEP_TERMS)
    back = pickle.loads(pickle.dumps(enc))
    np.testing.assert_array_equal(back.transform(TEXTS[:5]), first)
    assert clone(enc).get_params() == params


# ------------------------------------------------------------- real models
@pytest.mark.integration
def test_minilm_table_in_a_grid_search_with_pandas_and_polars(
    minilm_path, rotten_tomatoes_small, tmp_path
):
    """The issue's case: a real text column beside numeric ones."""
    pl = pytest.importorskip("polars")
    texts, y = rotten_tomatoes_small
    texts, y = [str(t) for t in texts[:150]], np.asarray(y[:150])
    table = pd.DataFrame(
        {
            "review": texts,
            "words": [len(t.split()) for t in texts],
            "chars": [len(t) for t in texts],
        }
    )
    ct = ColumnTransformer(
        [
            (
                "text",
                LayerTextEncoder(minilm_path, cache=tmp_path, max_length=64),
                "review",
            ),
            ("numbers", StandardScaler(), ["words", "chars"]),
        ]
    )
    pipe = make_pipeline(ct, LogisticRegression(C=0.1, max_iter=2000))
    grid = {"columntransformer__text__selector__n_layers_to_select": [1, 2]}
    search = GridSearchCV(pipe, grid, cv=3).fit(table, y)
    best = search.best_estimator_
    encoder = best[0].named_transformers_["text"]
    k = encoder.selected_layers_.size
    assert k == search.best_params_[next(iter(grid))]
    names = best[0].get_feature_names_out()
    assert len(names) == 384 * k + 2
    assert names[0] == f"text__review__layer{encoder.selected_layers_[0]}_0"
    assert search.best_score_ > 0.55  # two balanced classes
    frame = best[0].set_output(transform="pandas").transform(table)
    assert list(frame.columns) == list(names)
    polars = best[0].set_output(transform="polars").transform(pl.from_pandas(table))
    assert isinstance(polars, pl.DataFrame) and polars.columns == list(names)
    np.testing.assert_allclose(polars.to_numpy(), frame.to_numpy(), atol=1e-5)


@pytest.mark.integration
def test_minilm_in_skrub_table_vectorizer(minilm_path, rotten_tomatoes_small):
    skrub = pytest.importorskip("skrub")
    texts, y = rotten_tomatoes_small
    table = pd.DataFrame({"review": [str(t) for t in texts[:80]], "n": np.arange(80.0)})
    vectorizer = skrub.TableVectorizer(
        high_cardinality=LayerTextEncoder(minilm_path, max_length=64, random_state=0)
    )
    out = vectorizer.fit_transform(table, np.asarray(y[:80]))
    encoder = vectorizer.transformers_["review"]
    layers = encoder.selected_layers_
    assert list(out.columns[:1]) == [f"review__layer{layers[0]}_0"]
    assert out.shape == (80, 384 * layers.size + 1)


@pytest.mark.integration
def test_smollm2_column_in_a_column_transformer(smollm2_path, rotten_tomatoes_small):
    texts, y = rotten_tomatoes_small
    table = pd.DataFrame({"review": [str(t) for t in texts[:40]], "n": np.arange(40.0)})
    enc = LayerTextEncoder(smollm2_path, max_length=32, random_state=0)
    ct = make_column_transformer((enc, "review"), ("passthrough", ["n"]))
    out = ct.set_output(transform="pandas").fit_transform(table, np.asarray(y[:40]))
    fitted = ct.named_transformers_["layertextencoder"]
    assert fitted.n_model_layers_ == 31 and out.shape[1] == 576 * 4 + 1
    deepest = int(fitted.selected_layers_.max())
    assert fitted.pipeline_[0].layers_.max() == deepest
    assert out.columns[0].startswith("layertextencoder__review__layer")


# ----------------------------------------------------- grouped folds, routed
GROUPS = np.repeat(np.arange(len(TEXTS) // 2), 2)


class _Recording(StratifiedGroupKFold):
    log: list = []

    def split(self, X, y=None, groups=None):
        for train, test in super().split(X, y, groups):
            _Recording.log.append((train, test, np.asarray(groups)))
            yield train, test


@pytest.fixture
def recording():
    _Recording.log.clear()
    yield _Recording
    sklearn.set_config(enable_metadata_routing=False)


def _grouped_selector():
    return LOESSelectorCV(cv=_Recording(2), max_layers_to_select=2)


def _no_leak():
    assert _Recording.log
    for train, test, groups in _Recording.log:
        assert not set(groups[train]) & set(groups[test])


@pytest.mark.parametrize("routing", [False, True])
def test_probe_and_encoder_route_groups_to_their_selector(
    deep_tiny, recording, routing
):
    sklearn.set_config(enable_metadata_routing=routing)
    LayerProbeClassifier(deep_tiny, selector=_grouped_selector()).fit(
        TEXTS, Y, groups=GROUPS
    )
    assert len(recording.log) == 2
    _no_leak()
    recording.log.clear()
    LayerTextEncoder(deep_tiny, selector=_grouped_selector()).fit(
        TEXTS, Y, groups=GROUPS
    )
    assert len(recording.log) == 2
    _no_leak()


def test_routed_groups_reach_the_encoder_inside_a_column_transformer(
    deep_tiny, recording
):
    sklearn.set_config(enable_metadata_routing=True)
    table = _table()
    ct = make_column_transformer(
        (LayerTextEncoder(deep_tiny, selector=_grouped_selector()), "review"),
        (StandardScaler(), ["stars", "words"]),
    )
    pipe = make_pipeline(ct, LogisticRegression(max_iter=1000))
    out = cross_validate(
        pipe, table, Y, params={"groups": GROUPS}, cv=StratifiedGroupKFold(3)
    )
    assert out["test_score"].shape == (3,)
    assert len(recording.log) == 3 * 2  # each outer fold's encoder split by group
    _no_leak()


def test_groups_a_selector_cannot_use_and_unrouted_weights_are_refused(deep_tiny):
    with pytest.raises(TypeError, match="`groups` is used by no inner splitter"):
        LayerProbeClassifier(deep_tiny).fit(TEXTS, Y, groups=GROUPS)
    with pytest.raises(TypeError, match="`sample_weight` reaches the inner"):
        LayerProbeClassifier(deep_tiny).fit(TEXTS, Y, sample_weight=np.ones(len(Y)))


def test_routed_sample_weight_reaches_the_head_that_requests_it(deep_tiny, recording):
    sklearn.set_config(enable_metadata_routing=True)
    weights = np.linspace(0.1, 3.0, len(Y))
    head = LogisticRegression(C=0.01, max_iter=1000).set_fit_request(sample_weight=True)
    probe = LayerProbeClassifier(deep_tiny, estimator=head, random_state=0)
    probe.fit(TEXTS, Y, sample_weight=weights)
    fused = probe.pipeline_[:-1].transform(TEXTS)
    scaled = probe.pipeline_[-1][0].transform(fused)
    by_hand = LogisticRegression(C=0.01, max_iter=1000).fit(
        scaled, Y, sample_weight=weights
    )
    np.testing.assert_allclose(probe.estimator_.coef_, by_hand.coef_, rtol=1e-6)
    unweighted = LayerProbeClassifier(deep_tiny, random_state=0).fit(TEXTS, Y)
    assert not np.allclose(unweighted.estimator_.coef_, probe.estimator_.coef_)
    with pytest.raises(ValueError, match="`sample_weight` cannot be honoured"):
        LayerProbeClassifier(
            deep_tiny, estimator=head, selector=LOESSelectorCV(estimator=head)
        ).fit(TEXTS, Y, sample_weight=weights)
