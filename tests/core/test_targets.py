"""Targets (skloes.core._targets): the task, the classes, continuous targets, folds."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold

from skloes.core._targets import (
    check_classes,
    check_continuous_target,
    check_label_vector,
    cv_splits,
    resolve_task,
    task_of,
)


def test_resolve_task():
    y = np.array(["b", "a", "b", "c"])
    task, classes, out = resolve_task(y, "auto", "Est")
    assert task == "classification"
    np.testing.assert_array_equal(classes, ["a", "b", "c"])
    np.testing.assert_array_equal(out, y)
    assert resolve_task(y[:, None], "classification", "Est")[2].shape == (4,)
    task, classes, out = resolve_task([0.5, 1.5, 2.0], "auto", "Est")
    assert (task, classes, out.dtype, out.shape) == (
        "regression",
        None,
        np.float64,
        (3, 1),
    )
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
    with pytest.raises(ValueError, match=r"Est: `y` must hold numbers.*got 'a'"):
        resolve_task(["a", "b"], "regression", "Est")
    with pytest.raises(ValueError, match="one column of class labels"):
        resolve_task([[0, 1], [1, 0]], "classification", "Est")


# --------------------------------------------------------------------------
# Continuous targets: one conversion that names `y`
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "y, expected",
    [
        pytest.param([1, 2, 3], [1.0, 2.0, 3.0], id="ints"),
        pytest.param(np.array([[0.5], [1.5]]), [0.5, 1.5], id="one_column"),
        pytest.param(["1.5", "2"], [1.5, 2.0], id="numeric_strings"),
        pytest.param([True, False], [1.0, 0.0], id="booleans"),
    ],
)
def test_a_continuous_target_is_float64_and_one_column(y, expected):
    out = check_continuous_target(y, "Est")
    assert out.dtype == np.float64 and out.ndim == 1
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(
    "y, match",
    [
        pytest.param(
            ["a", "b"], r"Est: `y` must hold numbers.*got 'a' \(dtype <U1\)", id="text"
        ),
        pytest.param(
            np.array([1.0, "x"], dtype=object),
            r"`y` must hold numbers.*got 'x' \(dtype object\)",
            id="object_with_text",
        ),
        pytest.param([1.0, None], r"`y` must be finite", id="none_is_missing"),
        pytest.param(
            [[1.0, 2.0]] * 3, r"`y` must be one column of numbers", id="two_d"
        ),
        pytest.param(3.0, r"`y` must be one column.*shape \(\)", id="scalar"),
        pytest.param([1.0, np.inf], r"`y` must be finite", id="inf"),
        pytest.param(None, r"Est requires y to be passed", id="missing"),
    ],
)
def test_a_target_that_is_not_continuous_names_y(y, match):
    with pytest.raises(ValueError, match=match) as info:
        check_continuous_target(y, "Est")
    assert "\n" not in str(info.value) and "np.str_" not in str(info.value)


def test_several_target_columns_only_where_allowed():
    y = np.arange(6.0).reshape(3, 2)
    assert check_continuous_target(y, "Est", multioutput=True).shape == (3, 2)
    with pytest.raises(ValueError, match="one column of numbers"):
        check_continuous_target(y, "Est")


# --------------------------------------------------------------------------
# Classes and folds
# --------------------------------------------------------------------------
def test_task_of_reads_the_kind_of_target():
    assert task_of(np.array([0, 1, 1]), "Est") == "classification"
    assert task_of(np.array([0.5, 1.5]), "Est") == "regression"
    assert task_of(np.arange(6.0).reshape(3, 2) + 0.5, "Est") == "regression"
    with pytest.raises(ValueError, match="1-D continuous target"):
        task_of(np.arange(6.0).reshape(3, 2) + 0.5, "Est", multioutput=False)


@pytest.mark.parametrize(
    "classes, match",
    [
        pytest.param(np.array(["a"]), r"one class \('a'\)", id="one"),
        pytest.param(np.array([], dtype=int), r"got none", id="none"),
    ],
)
def test_fewer_than_two_classes_name_y(classes, match):
    with pytest.raises(
        ValueError, match=r"Est: `y` must contain at least two.*" + match
    ):
        check_classes(classes, "Est")


def test_a_label_vector_is_one_column():
    np.testing.assert_array_equal(check_label_vector([[1], [0]], "Est"), [1, 0])
    with pytest.raises(ValueError, match=r"`y` must be a 1-D array.*\(2, 2\)"):
        check_label_vector([[1, 0], [0, 1]], "Est")


def test_folds_name_the_parameter_and_warn_once_for_a_small_class():
    y = np.array([0] * 9 + [1] * 2)
    with pytest.raises(ValueError, match=r"Est: `inner`=20 folds need at least 20"):
        cv_splits(StratifiedKFold(20), y, "Est", param="inner")
    with pytest.warns(
        UserWarning, match=r"Est: class 1 has 2 samples.*`cv`=3"
    ) as record:
        folds = cv_splits(StratifiedKFold(3), y, "Est")
    assert len(record) == 1 and len(folds) == 3
    with pytest.raises(ValueError, match=r"largest of the 11 classes has 1"):
        cv_splits(StratifiedKFold(2), np.arange(11), "Est")
