"""Validation of the layer data contract: a stack or a flat table of layer blocks.

A 3-D array is a stack ``(n_layers, n_samples, dim)``; a 2-D array is a flat
table ``(n_samples, n_layers * dim)`` whose block width is ``layer_dim``
(``None``: every column is its own block). The layout is never guessed.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, validate_data

FLOAT_DTYPES = (np.float64, np.float32, np.float16)


def _name(estimator) -> str:
    return type(estimator).__name__


def validate_layers(
    estimator,
    X,
    y="no_validation",
    *,
    layer_dim=None,
    reset=True,
    dtype=np.float64,
    **check_params,
):
    """Validate a stack or flat table and return it as a stack view.

    Parameters
    ----------
    estimator : estimator instance
        Receives ``n_layers_in_``, ``dim_in_``, ``input_format_`` (and, for flat
        input, ``n_features_in_``/``layer_dim_``) when ``reset=True``; these are
        checked when ``reset=False``.
    X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
        A layer stack or a flat table.
    y : array-like of shape (n_samples,), None or "no_validation"
        Targets, checked for length against the samples axis.
    layer_dim : int or None
        Block width of a flat table; ignored for a stack.
    reset : bool
        Whether this is ``fit`` (record the layout) or a later call (check it).
    dtype : dtype or tuple of dtypes
        Passed to :func:`~sklearn.utils.check_array`.
    **check_params : dict
        Passed to :func:`~sklearn.utils.validation.validate_data` (2-D input) or
        :func:`~sklearn.utils.check_array` (3-D input).

    Returns
    -------
    stack : ndarray of shape (n_layers, n_samples, dim)
        For a flat table, a strided view of it (no copy).
    y : ndarray or None
        Only returned when ``y`` is not "no_validation".
    """
    name = _name(estimator)
    ndim = input_ndim(X)
    if ndim == 3:
        out = _validate_stack(estimator, X, y, reset=reset, dtype=dtype, **check_params)
    elif ndim == 2:
        out = _validate_flat(
            estimator, X, y, layer_dim=layer_dim, reset=reset, dtype=dtype, **check_params
        )
    else:
        raise ValueError(
            f"{name}: `X` must be a layer stack of shape (n_layers, n_samples, dim) "
            f"or a flat table of shape (n_samples, n_layers * dim); got an array "
            f"with {ndim} dimension(s). Reshape your data either using "
            "array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample."
        )
    return out


def resolve_task(y, task, name):
    """Resolve the task of a layer selector from its targets (spec §2.1).

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_outputs) or None
        Class labels or continuous targets; ``None`` means no labels.
    task : {"auto", "classification", "regression", "label_free"}
        The requested task; ``"auto"`` reads it from ``type_of_target(y)``
        (``"label_free"`` when ``y`` is None).
    name : str
        The estimator name that prefixes the error messages.

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
        raise ValueError(f"{name}: `y` is required for task={task!r}; got None.")
    y = check_array(y, ensure_2d=False, dtype=None, input_name="y",
                    ensure_all_finite=False)
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name}: `y` must be finite; got NaN or infinity in y.")
    if task == "auto":
        kind = type_of_target(y, input_name="y")
        if kind in ("binary", "multiclass"):
            task = "classification"
        elif kind in ("continuous", "continuous-multioutput"):
            task = "regression"
        else:
            raise ValueError(
                f"{name}: `y` must hold class labels or continuous targets; got "
                f"type_of_target(y)={kind!r} (Unknown label type)."
            )
    if task == "regression":
        try:
            return task, None, np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: `y` must be numeric for task='regression'; "
                             f"got dtype {y.dtype}.") from None
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"{name}: `y` must be one column of class labels for "
                         f"task='classification'; got shape {y.shape}.")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"{name}: `y` must contain at least two classes; got 1 "
                         f"class ({classes[0]!r}).")
    return task, classes, y


def input_ndim(X) -> int:
    """Number of dimensions of an array-like, without ``np.ndim`` dispatch."""
    ndim = getattr(X, "ndim", None)
    if ndim is None:  # lists, and array-likes that only implement __array__
        ndim = np.asarray(X).ndim
    return ndim


def _validate_stack(estimator, X, y, *, reset, dtype, **check_params):
    name = _name(estimator)
    check_params.pop("ensure_min_features", None)
    X = check_array(
        X, allow_nd=True, dtype=dtype, input_name="X", estimator=estimator,
        ensure_2d=False, **check_params,
    )
    n_layers, n_samples, dim = X.shape
    if n_samples == 0 or n_layers == 0 or dim == 0:
        raise ValueError(
            f"{name}: the layer stack `X` must have at least one layer, sample and "
            f"feature; got shape {X.shape}."
        )
    if reset:
        estimator.input_format_ = "stack"
        estimator.n_layers_in_ = n_layers
        estimator.dim_in_ = dim
        for attr in ("n_features_in_", "feature_names_in_", "layer_dim_"):
            if hasattr(estimator, attr):
                delattr(estimator, attr)
    else:
        _check_layout(estimator, n_layers, dim)
    if isinstance(y, str) and y == "no_validation":
        return X
    if y is not None:
        y = np.asarray(y)
        if y.shape[0] != n_samples:
            raise ValueError(
                f"{name}: the layer stack `X` of shape {X.shape} is read as "
                f"(n_layers, n_samples, dim), so it has {n_samples} samples, but `y` "
                f"has {y.shape[0]}. Pass a stack with the samples on axis 1."
            )
    return X, y


def _validate_flat(estimator, X, y, *, layer_dim, reset, dtype, **check_params):
    name = _name(estimator)
    no_y = isinstance(y, str) and y == "no_validation"
    if no_y or y is None:
        X = validate_data(estimator, X, reset=reset, dtype=dtype, **check_params)
    else:
        X, y = validate_data(estimator, X, y, reset=reset, dtype=dtype, **check_params)
    n_samples, n_features = X.shape
    if reset:
        width = _check_layer_dim(name, layer_dim, n_features)
        estimator.input_format_ = "flat"
        estimator.layer_dim_ = width
        estimator.n_layers_in_ = n_features // width
        estimator.dim_in_ = width
    else:
        _check_layout(estimator, n_features // estimator.dim_in_, estimator.dim_in_)
    stack = X.reshape(n_samples, n_features // estimator.dim_in_, estimator.dim_in_)
    stack = stack.transpose(1, 0, 2)
    return stack if no_y else (stack, None if y is None else y)


def _check_layer_dim(name, layer_dim, n_features):
    if layer_dim is None:
        return 1
    if not isinstance(layer_dim, Integral) or isinstance(layer_dim, bool) or layer_dim < 1:
        raise ValueError(
            f"{name}: `layer_dim` must be a positive integer or None; got {layer_dim!r}."
        )
    if n_features % layer_dim:
        raise ValueError(
            f"{name}: `layer_dim`={layer_dim} does not divide the {n_features} columns "
            "of the flat table `X`; the columns must be n_layers blocks of layer_dim "
            "features each."
        )
    return int(layer_dim)


def _check_layout(estimator, n_layers, dim):
    if n_layers != estimator.n_layers_in_ or dim != estimator.dim_in_:
        raise ValueError(
            f"{_name(estimator)}: `X` has {n_layers} layers of width {dim}, but the "
            f"estimator was fitted on {estimator.n_layers_in_} layers of width "
            f"{estimator.dim_in_}."
        )


def resolve_layer_indices(layers, n_layers, *, param="layers", owner="skloes"):
    """Resolve Hugging Face ``hidden_states`` indices (negatives from the end).

    Layer ``0`` is the embedding output and ``1..n_layers-1`` are the blocks.
    Returns a sorted array of unique non-negative indices.
    """
    if isinstance(layers, str) and layers == "all":
        return np.arange(n_layers)
    if isinstance(layers, Integral) and not isinstance(layers, bool):
        layers = [layers]
    try:
        values = [int(v) for v in layers]
        if any(isinstance(v, bool) or int(v) != v for v in layers):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError(
            f"{owner}: `{param}` must be 'all', an int or a list of ints; got "
            f"{layers!r}."
        ) from None
    if not values:
        raise ValueError(f"{owner}: `{param}` must name at least one layer; got [].")
    bad = [v for v in values if not -n_layers <= v < n_layers]
    if bad:
        raise ValueError(
            f"{owner}: `{param}` index {bad[0]} is out of range for a model with "
            f"{n_layers} hidden states (valid: {-n_layers}..{n_layers - 1}; 0 is the "
            "embedding output)."
        )
    return np.unique(np.asarray(values) % n_layers)


def layer_feature_names(layers, dim):
    """Names ``layer{l}_{j}`` of the columns of the given layers concatenated."""
    return np.asarray(
        [f"layer{l}_{j}" for l in layers for j in range(dim)], dtype=object
    )


def fuse_layers(stack, layers):
    """Concatenate ``stack[l]`` over ``layers`` along the feature axis."""
    return np.concatenate([stack[l] for l in layers], axis=1)
