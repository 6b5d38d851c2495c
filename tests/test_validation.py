"""The layer data contract: stacks, flat tables and layer indices."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from skloes.utils._validation import (
    fuse_layers,
    layer_feature_names,
    resolve_layer_indices,
    resolve_task,
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


def test_resolve_task():
    y = np.array(["b", "a", "b", "c"])
    task, classes, out = resolve_task(y, "auto", "Est")
    assert task == "classification"
    np.testing.assert_array_equal(classes, ["a", "b", "c"])
    np.testing.assert_array_equal(out, y)
    assert resolve_task(y[:, None], "classification", "Est")[2].shape == (4,)
    task, classes, out = resolve_task([0.5, 1.5, 2.0], "auto", "Est")
    assert (task, classes, out.dtype, out.shape) == (
        "regression", None, np.float64, (3, 1))
    assert resolve_task([1, 2, 3], "regression", "Est")[2].shape == (3, 1)
    assert resolve_task(None, "auto", "Est") == ("label_free", None, None)
    assert resolve_task(y, "label_free", "Est") == ("label_free", None, None)
    with pytest.raises(ValueError, match="Est: `y` is required"):
        resolve_task(None, "classification", "Est")
    with pytest.raises(ValueError, match="Est: `y` must be finite"):
        resolve_task([0.0, np.nan], "auto", "Est")
    with pytest.raises(ValueError, match="Est: `y` must contain at least two"):
        resolve_task([1, 1, 1], "auto", "Est")
    with pytest.raises(ValueError, match="type_of_target.*Unknown label type"):
        resolve_task([[1], [2], [{}]], "auto", "Est")  # an "unknown" target
    with pytest.raises(ValueError, match="must be numeric for task='regression'"):
        resolve_task(["a", "b"], "regression", "Est")
    with pytest.raises(ValueError, match="one column of class labels"):
        resolve_task([[0, 1], [1, 0]], "classification", "Est")
