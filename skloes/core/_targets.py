"""Targets: task resolution, class-label checks and cross-validation splits.

Every estimator that reads ``y`` resolves its task, checks its classes and
splits it for cross-validation here, so each rule and its message exist once.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
import zlib
from numbers import Integral

import numpy as np
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, column_or_1d


def resolve_task(y, task, owner):
    """Resolve the task of a layer selector from its targets.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_outputs) or None
        Class labels or continuous targets; ``None`` means no labels.
    task : {"auto", "classification", "regression", "label_free"}
        The requested task; ``"auto"`` reads it from ``type_of_target(y)``
        (``"label_free"`` when ``y`` is None).
    owner : str
        the estimator name that prefixes the error messages.

    Returns
    -------
    task : str
        ``"classification"``, ``"regression"`` or ``"label_free"``.
    classes : ndarray or None
        The sorted class labels for classification, None otherwise.
    y : ndarray or None
        The 1-D labels for classification, a float64 ``(n_samples, n_outputs)``
        matrix for regression, None for label_free.
    """
    if task == "label_free":
        return "label_free", None, None
    if y is None:
        if task == "auto":
            return "label_free", None, None
        raise ValueError(f"{owner}: `y` is required for task={task!r}; got None.")
    refuse_mixed_labels(y, owner)
    y = check_array(
        y, ensure_2d=False, dtype=None, input_name="y", ensure_all_finite=False
    )
    refuse_bytes(y, owner)
    y = plain_labels(y)
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError(f"{owner}: `y` must be finite; got NaN or infinity in y.")
    if task == "auto":
        task = task_of(y, owner)
    if task == "regression":
        y = check_continuous_target(y, owner, multioutput=True)
        return task, None, y.reshape(len(y), -1)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(
            f"{owner}: `y` must be one column of class labels for "
            f"task='classification'; got shape {y.shape}."
        )
    classes = np.unique(y)
    check_classes(classes, owner)
    return task, classes, y


_NEED = "`y` must hold numbers (a continuous target, task='regression')"


def check_continuous_target(y, owner, *, multioutput=False):
    """A regression target: float64, finite, one column (or several with
    ``multioutput``); anything else is one error naming ``y``.

    The one conversion every regressor and regression task goes through, so
    that text labels given to a regressor are named as such rather than
    failing inside numpy ("could not convert string to float").

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        The target.
    owner : str
        The estimator name that prefixes the error.
    multioutput : bool, default=False
        Whether several target columns are allowed.

    Returns
    -------
    y : ndarray of float64
        1-D for one column; ``(n_samples, n_outputs)`` with ``multioutput``.
    """
    if y is None:  # scikit-learn's own words for it
        raise ValueError(f"{owner} requires y to be passed, but the target y is None.")
    raw = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if raw.dtype.kind == "c":
        raise ValueError(
            f"{owner}: {_NEED}; got complex numbers (Complex data not supported)."
        )
    try:
        out = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        example = next(
            (v for v in np.ravel(raw) if not _is_number(v)), np.ravel(raw)[:1]
        )
        if isinstance(example, np.generic):  # 'a', not np.str_('a')
            example = example.item()
        raise ValueError(
            f"{owner}: {_NEED}; got {example!r} (dtype {raw.dtype}). For class "
            "labels use a classifier, or task='classification'."
        ) from None
    if out.ndim == 2 and out.shape[1] == 1 and not multioutput:
        out = out.ravel()
    if out.ndim == 0 or out.ndim > 2 or (out.ndim == 2 and not multioutput):
        what = "one column" if not multioutput else "one or more columns"
        raise ValueError(
            f"{owner}: `y` must be {what} of numbers; got shape {out.shape}."
        )
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{owner}: `y` must be finite; got NaN or infinity.")
    return out


def _is_number(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def task_of(y, owner, multioutput=True):
    """``"classification"`` or ``"regression"``, read from ``type_of_target(y)``.

    Parameters
    ----------
    y : ndarray
        Checked targets.
    owner : str
        the estimator name that prefixes the error.
    multioutput : bool, default=True
        Whether several continuous target columns are a regression task.

    Returns
    -------
    task : {"classification", "regression"}
    """
    kind = type_of_target(y, input_name="y")
    if kind in ("binary", "multiclass"):
        return "classification"
    if kind == "continuous" or (multioutput and kind == "continuous-multioutput"):
        return "regression"
    what = "continuous targets" if multioutput else "a 1-D continuous target"
    raise ValueError(
        f"{owner}: `y` must hold class labels or {what}; got "
        f"type_of_target(y)={kind!r} (Unknown label type)."
    )


def plain_labels(y):
    """An object array of one kind of number (ints, floats or bools: a pandas
    column of object dtype) as the numpy array of that kind, which
    scikit-learn's ``type_of_target`` reads (it calls objects that are not
    str "unknown"); anything else (str labels included) as it is."""
    y = np.asarray(y)
    if y.dtype != object or y.size == 0:
        return y
    kinds = {type(v.item() if isinstance(v, np.generic) else v) for v in y.ravel()}
    if len(kinds) == 1 and kinds <= {int, float, bool}:
        return np.asarray(y.tolist())
    return y


def refuse_mixed_labels(y, owner):
    """Labels as given (a list, or an object array or column) that hold a
    missing value (None, NaN) among other labels, or text beside numbers,
    are one error naming ``y`` and the first such row: numpy would turn
    ``[1, "a"]`` into the text labels ``"1"`` and ``"a"`` without a word,
    and scikit-learn's message for None names neither."""
    if isinstance(y, str) or y is None:
        return
    values = getattr(y, "values", y)  # a pandas column: its values
    if isinstance(values, np.ndarray) and values.dtype != object:
        return
    if not isinstance(values, (list, tuple, np.ndarray)):
        return
    flat = np.asarray(values, dtype=object).ravel()
    has_text = any(isinstance(v, str) for v in flat)
    text_at = number_at = None
    for i, value in enumerate(flat):
        value = value.item() if isinstance(value, np.generic) else value
        nan = isinstance(value, float) and value != value
        if value is None or (nan and has_text):
            raise ValueError(
                f"{owner}: `y` holds a missing label ({value!r}) at row {i}; "
                "drop those rows or give every row a label."
            )
        if isinstance(value, str):
            text_at = i if text_at is None else text_at
        elif isinstance(value, (bool, int, float)):
            number_at = i if number_at is None else number_at
        if text_at is not None and number_at is not None:
            raise ValueError(
                f"{owner}: `y` mixes text and number labels ({flat[number_at]!r} "
                f"at row {number_at}, {flat[text_at]!r} at row {text_at}); give "
                "one type of label (all str, or all numbers)."
            )


def refuse_bytes(y, owner):
    """Labels given as bytes (a column read in binary) are one error naming
    ``y`` and the fix (scikit-learn's says neither)."""
    y = np.asarray(y)
    held = y.dtype.kind == "S" or (
        y.dtype == object and any(isinstance(v, bytes) for v in y.ravel()[:1000])
    )
    if held:
        raise ValueError(
            f"{owner}: `y` holds bytes labels; decode them to str first "
            "(y.astype(str), or read the column as text)."
        )


def check_regression_target(y, owner):
    """One column of regression values, the check of every single-output
    regressor: a column vector warns and is raveled (scikit-learn's rule),
    then :func:`check_continuous_target` (which names a missing ``y``)."""
    if y is not None and not hasattr(y, "shape"):
        y = np.asarray(y)
    if len(getattr(y, "shape", ())) == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    return check_continuous_target(y, owner)


def check_class_targets(y, owner):
    """Class labels as a 1-D array, the one check of every classifier.

    A column vector warns and is raveled (scikit-learn's rule); several
    columns, bytes, and values that are not class labels (a continuous
    target, mixed types) are one error naming ``y``.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, 1)
        The labels.
    owner : str
        The estimator name that prefixes the error.

    Returns
    -------
    y : ndarray of shape (n_samples,)
    """
    if y is None:
        raise ValueError(f"{owner} requires y to be passed, but the target y is None.")
    refuse_mixed_labels(y, owner)
    y = np.asarray(y) if not hasattr(y, "shape") else y
    if len(getattr(y, "shape", ())) == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(
            f"{owner}: `y` must be one column of class labels; got shape {y.shape}."
        )
    refuse_bytes(y, owner)
    y = plain_labels(y)
    kind = type_of_target(y, input_name="y")
    if kind not in ("binary", "multiclass"):
        example = y[0].item() if isinstance(y[0], np.generic) else y[0]
        hint = (
            "; for a continuous target use a regressor"
            if kind == "continuous"
            else " (one type of label: str, int or bool)"
        )
        raise ValueError(
            f"{owner}: `y` must hold class labels; got {kind} values (e.g. "
            f"{example!r}){hint}."
        )
    return y


def check_classes(classes, owner):
    """The one "at least two classes" rule of every classifier and selector.

    Parameters
    ----------
    classes : ndarray
        The distinct class labels of ``y``.
    owner : str
        the estimator name that prefixes the error.
    """
    if len(classes) < 2:
        found = f"one class ({classes[0].tolist()!r})" if len(classes) else "none"
        raise ValueError(
            f"{owner}: `y` must contain at least two classes; got {found}."
        )


def check_label_vector(y, owner):
    """Class labels as a 1-D array; a 2-D ``y`` is an error naming ``y``."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        return y.ravel()
    if y.ndim != 1:
        raise ValueError(
            f"{owner}: `y` must be a 1-D array of class labels; got shape {y.shape}."
        )
    return y


def cv_splits(cv, y, owner, param="cv", groups=None):
    """The ``(train, test)`` splits of ``cv`` over ``y``, checked against ``y``.

    ``cv`` is the splitter returned by :func:`sklearn.model_selection.check_cv`
    (or :func:`~skloes.core._routing.grouped_splitter`); ``groups`` go to its
    ``split``. More folds than samples is an error naming ``param``; for
    stratified k-fold, a class smaller than the number of folds gives one
    warning naming ``param`` (in place of the splitter's own).
    """

    n_splits, n = getattr(cv, "n_splits", None), len(y)
    if isinstance(n_splits, Integral) and n_splits > n:
        raise ValueError(
            f"{owner}: `{param}`={n_splits} folds need at least {n_splits} samples; "
            f"got {n}."
        )
    with warnings.catch_warnings():
        if isinstance(cv, StratifiedKFold):
            _check_stratifiable(cv.n_splits, y, owner, param)
            _warn_small_classes(cv.n_splits, y, owner, param)
            warnings.filterwarnings("ignore", "The least populated class", UserWarning)
        return list(cv.split(np.zeros((n, 1)), y, groups))


def _check_stratifiable(n_splits, y, owner, param):
    """Stratified folds need one class with at least ``n_splits`` samples."""
    classes, counts = np.unique(y, return_counts=True)
    if counts.max() < n_splits:
        raise ValueError(
            f"{owner}: `{param}`={n_splits} stratified folds need a class with at "
            f"least {n_splits} samples; the largest of the {classes.size} classes "
            f"has {counts.max()} ({len(y)} samples); lower `{param}` to at most "
            f"{max(counts.max(), 2)} or pass a KFold splitter."
        )


def _warn_small_classes(n_splits, y, owner, param):
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < n_splits:
        warnings.warn(
            f"{owner}: class {classes[counts.argmin()].tolist()!r} has "
            f"{counts.min()} samples, fewer than the `{param}`={n_splits} "
            "stratified folds, so some test folds lack it; lower `cv` for "
            "scores on every class.",
            UserWarning,
            stacklevel=4,
        )


def target_seed(y):
    """A seed drawn from the targets themselves, for ``random_state=None``.

    The CRC-32 of the rows' label codes (the rank of each value among the
    distinct values), so the same targets give the same seed on any machine
    and in any process, whatever their dtype: an estimator that seeds its
    folds or its selector with it fits the same rows the same way twice.

    Examples
    --------
    >>> from skloes.core._targets import target_seed
    >>> target_seed(["b", "a", "b"]) == target_seed(["y", "x", "y"])
    True
    """
    codes = np.unique(np.asarray(y).ravel(), return_inverse=True)[1]
    return zlib.crc32(np.ascontiguousarray(codes, dtype="<i8").tobytes())
