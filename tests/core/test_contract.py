"""The layer data contract (skloes.core._contract): stacks, flat tables and
layer indices."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from skloes.core._contract import (
    LayerTable,
    flat_layer_dim,
    fuse_layers,
    layer_feature_names,
    mark_layers,
    resolve_layer_indices,
    stack_view,
    validate_layers,
)


class _Dummy(BaseEstimator):
    pass


def test_flat_table_is_a_strided_view_of_the_stack():
    rng = np.random.RandomState(0)
    stack = rng.normal(size=(3, 5, 4))
    flat = np.hstack(list(stack))  # column j of layer l at l * dim + j
    est = _Dummy()
    out = validate_layers(est, flat, layer_dim=4)
    assert out.shape == (3, 5, 4)
    np.testing.assert_array_equal(out, stack)
    assert np.shares_memory(out, flat)
    assert (est.n_layers_in_, est.dim_in_, est.n_features_in_) == (3, 4, 12)


def test_layer_dim_none_makes_every_column_a_layer():
    est = _Dummy()
    out = validate_layers(est, np.ones((6, 5)))
    assert out.shape == (5, 6, 1)


def test_layer_dim_must_divide_the_columns():
    with pytest.raises(ValueError, match="layer_dim"):
        validate_layers(_Dummy(), np.ones((4, 10)), layer_dim=3)


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4, 5)])
def test_wrong_rank_is_rejected(shape):
    with pytest.raises(ValueError, match="layer stack"):
        validate_layers(_Dummy(), np.ones(shape))


def test_stack_with_samples_not_on_axis_1_is_rejected():
    with pytest.raises(ValueError, match="samples on axis 1"):
        validate_layers(_Dummy(), np.ones((3, 5, 4)), np.zeros(3))


def test_non_finite_values_are_rejected():
    X = np.ones((2, 4, 3))
    X[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        validate_layers(_Dummy(), X)


def test_later_calls_check_the_fitted_layout():
    est = _Dummy()
    validate_layers(est, np.ones((3, 5, 4)))
    validate_layers(est, np.ones((3, 2, 4)), reset=False)
    with pytest.raises(ValueError, match="fitted on 3 layers"):
        validate_layers(est, np.ones((2, 5, 4)), reset=False)


def test_layer_indices_follow_hidden_states_with_negatives():
    np.testing.assert_array_equal(resolve_layer_indices([-1, 0, 2], 7), [0, 2, 6])
    np.testing.assert_array_equal(resolve_layer_indices("all", 3), [0, 1, 2])
    with pytest.raises(ValueError, match="out of range"):
        resolve_layer_indices([7], 7)
    with pytest.raises(TypeError, match="layers"):
        resolve_layer_indices(["a"], 7)


def test_feature_names_and_fusion_agree():
    stack = np.arange(24.0).reshape(3, 2, 4)
    fused = fuse_layers(stack, [0, 2])
    names = layer_feature_names([0, 2], 4)
    assert fused.shape == (2, 8)
    assert names[4] == "layer2_0"
    np.testing.assert_array_equal(fused[:, 4], stack[2][:, 0])


def test_y_none_is_returned_as_none_for_both_layouts():
    for X in (np.ones((4, 6)), np.ones((2, 4, 3))):
        stack, y = validate_layers(_Dummy(), X, None, layer_dim=3)
        assert y is None and stack.shape == (2, 4, 3)


# --------------------------------------------------------------------------
# The layout a flat table declares: the LayerTable marker and column names
# --------------------------------------------------------------------------
def _marked(n=12, n_layers=3, dim=4, seed=0):
    stack = np.random.RandomState(seed).normal(size=(n_layers, n, dim))
    flat = np.hstack(list(stack))
    return stack, mark_layers(flat, dim, layers=[0, 2, 5])


def test_marker_survives_row_selections_ufuncs_and_pickling():
    import pickle

    _, X = _marked()
    for kept in (
        X[[0, 3, 5]],
        X[2:7],
        X.take([1, 2], axis=0),
        X * 2.0,
        X.copy(),
        pickle.loads(pickle.dumps(X)),
    ):
        assert isinstance(kept, LayerTable) and flat_layer_dim(kept) == 4
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(X)).layers, [0, 2, 5])


def test_marker_is_dropped_when_the_columns_change():
    _, X = _marked()
    for lost in (
        X[:, :4],
        X[:, 1:],
        X.T,
        X.reshape(6, 24),
        X.mean(axis=0),
        np.asarray(X),
        np.hstack([X, X]),
    ):
        assert flat_layer_dim(lost) is None


def test_marker_gives_the_layout_without_layer_dim():
    stack, X = _marked()
    est = _Dummy()
    out = validate_layers(est, X)
    np.testing.assert_array_equal(out, stack)
    assert (est.n_layers_in_, est.dim_in_) == (3, 4)
    with pytest.raises(ValueError, match="`layer_dim`=2 contradicts"):
        validate_layers(_Dummy(), X, layer_dim=2)
    validate_layers(_Dummy(), X, layer_dim=4)  # agreeing is fine


def test_layer_feature_names_give_the_layout():
    pd = pytest.importorskip("pandas")
    stack, X = _marked()
    names = layer_feature_names([0, 2, 5], 4)
    df = pd.DataFrame(np.asarray(X), columns=names)
    assert flat_layer_dim(df) == 4
    est = _Dummy()
    np.testing.assert_array_equal(validate_layers(est, df), stack)
    assert est.n_layers_in_ == 3
    # names that are not a complete block grid declare nothing
    for bad in (list(names[:-1]) + ["other"], list(names[1:]) + ["layer9_0"]):
        assert flat_layer_dim(pd.DataFrame(np.asarray(X), columns=bad)) is None


def test_plain_table_is_columns_for_selectors_and_one_layer_for_heads():
    X = np.ones((6, 5))
    assert validate_layers(_Dummy(), X).shape == (5, 6, 1)
    assert validate_layers(_Dummy(), X, plain="one_layer").shape == (1, 6, 5)


def test_stack_view_is_the_metrics_entry_point():
    from skloes.metrics import effective_rank

    stack, X = _marked(n=30)
    np.testing.assert_array_equal(stack_view(X), stack)
    plain = np.asarray(X)
    assert stack_view(plain) is plain
    np.testing.assert_allclose(
        effective_rank(X, max_prompts=None), effective_rank(stack, max_prompts=None)
    )
    assert isinstance(effective_rank(plain, max_prompts=None), float)


def test_every_consumer_reads_a_marked_table_as_its_layers():
    from skloes.heads import ScalarMixClassifier
    from skloes.report import LayerReport
    from skloes.selection import LastLayerSelector, RidgeProbeClassifier

    stack, X = _marked(n=60, n_layers=3, dim=4)
    y = np.arange(60) % 2
    sel = LastLayerSelector().fit(X, y)
    assert (sel.n_layers_in_, sel.dim_in_) == (3, 4)
    assert sel.transform(X).shape == (60, 4)
    report = LayerReport(
        metrics=("isotropy",), cv=2, baselines=("last_layer",), n_layers_to_select=1
    ).fit(X, y)
    assert report.probe_scores_.shape == (3,)
    probe = RidgeProbeClassifier().fit(X, y)  # one scale per declared block
    told = RidgeProbeClassifier(layer_dim=4).fit(np.asarray(X), y)
    np.testing.assert_array_equal(probe.layer_scale_, told.layer_scale_)
    assert np.unique(probe.layer_scale_).size == 3
    pytest.importorskip("torch")
    mix = ScalarMixClassifier(max_epochs=1, random_state=0).fit(X, y)
    assert mix.layer_weights_.shape == (3,)
    plain = ScalarMixClassifier(max_epochs=1, random_state=0).fit(np.asarray(X), y)
    assert plain.layer_weights_.shape == (1,)  # a plain table is one layer


def test_hidden_states_flat_output_feeds_a_default_pipeline(tiny_model_path):
    from sklearn.pipeline import make_pipeline

    from skloes import HiddenStatesTransformer, LOESSelector

    texts = ["good film", "bad plot", "great fun", "dull movie"] * 5
    y = np.arange(20) % 2
    hst = HiddenStatesTransformer(tiny_model_path, output="flat", device="cpu")
    flat = hst.fit_transform(texts)
    assert isinstance(flat, LayerTable) and flat.layer_dim == hst.dim_
    pipe = make_pipeline(
        HiddenStatesTransformer(tiny_model_path, output="flat", device="cpu"),
        LOESSelector(n_layers_to_select=1, random_state=0),
    )
    sel = pipe.fit(texts, y)[-1]
    assert (sel.n_layers_in_, sel.dim_in_) == (hst.n_layers_, hst.dim_)
    hst.set_output(transform="pandas")
    frame = hst.transform(texts)
    sel = LOESSelector(n_layers_to_select=1, random_state=0).fit(frame, y)
    assert sel.n_layers_in_ == hst.n_layers_


def test_minilm_flat_output_is_read_as_seven_layers(minilm_path, rotten_tomatoes_small):
    """The bug this contract fixes: 2,688 MiniLM columns read as 2,688 layers."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from skloes import GeoRegClassifier, HiddenStatesTransformer, LOESSelector
    from skloes.metrics import isotropy

    texts, y = rotten_tomatoes_small
    texts, y = list(texts[:60]), np.asarray(y[:60])
    hst = HiddenStatesTransformer(
        minilm_path, output="flat", max_length=32, device="cpu"
    )
    pipe = make_pipeline(
        hst,
        LOESSelector(n_layers_to_select=2, random_state=0),
        LogisticRegression(max_iter=200),
    ).fit(texts, y)
    sel = pipe[1]
    assert (sel.n_layers_in_, sel.dim_in_) == (7, 384)
    assert pipe.predict(texts).shape == (60,)
    flat = hst.transform(texts)
    assert isotropy(flat).shape == (7,)
    head = GeoRegClassifier(
        layers=[5, 6], proj_dim=8, max_epochs=1, device="cpu", random_state=0
    ).fit(flat, y)
    assert (head.n_layers_in_, head.dim_in_) == (7, 384)
