"""The fusion maths every caller shares (skloes.core._fusion): the average of
per-layer outputs, the stacked meta model's input and its two-class rule."""

from __future__ import annotations

import numpy as np
import pytest

from skloes.core._fusion import average_outputs, meta_columns, meta_features


def _outputs(n_layers, n_samples, m, seed=0):
    rng = np.random.RandomState(seed)
    raw = rng.uniform(size=(n_layers, n_samples, m))
    return raw / raw.sum(axis=2, keepdims=True)


@pytest.mark.parametrize("n_classes", [None, 2, 3, 5])
def test_meta_features_have_meta_columns_per_layer(n_classes):
    m = 1 if n_classes is None else n_classes
    classes = None if n_classes is None else np.arange(n_classes)
    outputs = _outputs(4, 7, m)
    meta = meta_features(outputs, classes)
    assert meta.shape == (7, 4 * meta_columns(n_classes))


def test_two_classes_keep_each_layers_positive_probability_alone():
    outputs = _outputs(3, 6, 2)
    meta = meta_features(outputs, np.array(["no", "yes"]))
    np.testing.assert_array_equal(meta, outputs[:, :, 1].T)
    # two-class decision scores (one column per layer) are kept as they are
    scores = np.random.RandomState(1).normal(size=(3, 6, 1))
    np.testing.assert_array_equal(
        meta_features(scores, np.array([0, 1])), scores[:, :, 0].T
    )


def test_more_classes_put_each_layers_outputs_side_by_side():
    outputs = _outputs(2, 5, 3)
    meta = meta_features(outputs, np.arange(3))
    np.testing.assert_array_equal(meta[:, :3], outputs[0])
    np.testing.assert_array_equal(meta[:, 3:], outputs[1])


def test_the_average_predicts_the_label_of_the_largest_mean():
    classes = np.array(["a", "b", "c"])
    outputs = np.array(
        [[[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]], [[0.0, 0.9, 0.1], [0.2, 0.2, 0.6]]]
    )
    mean, labels = average_outputs(outputs, classes)
    np.testing.assert_allclose(mean, [[0.3, 0.6, 0.1], [0.15, 0.2, 0.65]])
    np.testing.assert_array_equal(labels, ["b", "c"])
    # two-class decision scores: the sign of the mean score
    scores = np.array([[[1.0], [-3.0]], [[-2.0], [1.0]]])
    np.testing.assert_array_equal(average_outputs(scores, classes[:2])[1], ["a", "a"])
    # a regression: the mean value
    values = np.array([[[1.0], [2.0]], [[3.0], [6.0]]])
    np.testing.assert_array_equal(average_outputs(values)[1], [2.0, 4.0])
