"""The layer data contract (see ``doc/user_guide/data_contract.rst``).

A 3-D array is a stack ``(n_layers, n_samples, dim)``. A 2-D array is a flat
table ``(n_samples, n_layers * dim)`` whose block width comes, in this order,
from the ``layer_dim`` parameter, from a :class:`LayerTable` marker (the flat
numpy output of ``HiddenStatesTransformer``), or from ``layer{l}_{j}``
column names (its pandas output). A table with none of these is a plain
feature table. The layout is never guessed from the numbers.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib
import re
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_array, validate_data

from skloes.core._store import is_layer_source
from skloes.core._targets import refuse_mixed_labels
from skloes.utils._validation import check_count

FLOAT_DTYPES = (np.float64, np.float32, np.float16)


_LAYER_NAME = re.compile(r"layer(\d+)_(\d+)")


def _name(estimator) -> str:
    return type(estimator).__name__


def first_line(exc) -> str:
    """The first line of an error's message (or its type's name, where it
    has none): what an error quoted inside another one shows of it."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def one_line_input_errors(owner):
    """scikit-learn's refusals of an input (NaN, complex data, a 1-D array)
    span several lines and quote the data; re-raised as their first line
    (and the reshape hint of a 1-D array), prefixed by ``owner``, naming `X`
    or `y` as every skloes message does."""
    try:
        yield
    except ValueError as exc:
        text = str(exc).strip()
        if "\n" not in text:
            raise
        lines = [line.strip() for line in text.splitlines()]
        first = re.sub(r"^Input (X|y)\b", r"`\1`", lines[0].rstrip(":"))
        hint = [line for line in lines[1:] if line.startswith("Reshape your data")]
        message = " ".join([f"{first.rstrip('.')}.", *hint])
        raise ValueError(f"{owner}: {message}") from None


class LayerTable(np.ndarray):
    """A flat table that knows its layer blocks: ``np.ndarray`` plus ``layer_dim``.

    ``HiddenStatesTransformer(output="flat")`` returns one, so that the next
    step of a ``Pipeline`` of numpy arrays reads its ``n_layers`` blocks of
    ``layer_dim`` columns without being told. Row selections (``X[rows]``,
    ``X.take(rows, axis=0)``, as done by scikit-learn's splitters), ufuncs and
    copies keep the marker; anything that changes the number of columns or the
    number of dimensions (column slices, reshapes, reductions) drops it, and
    ``np.asarray`` (hence ``check_array``) returns the plain array. Pickling
    keeps it.

    Parameters
    ----------
    input_array : array-like of shape (n_samples, n_layers * layer_dim)
        The flat table.
    layer_dim : int
        Width of each layer block.
    layers : array-like of int or None, default=None
        The Hugging Face ``hidden_states`` index of each block, if known.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.core._contract import LayerTable
    >>> X = LayerTable(np.zeros((4, 6)), layer_dim=3, layers=[2, 5])
    >>> X[:2].layer_dim, X[:, :3].layer_dim
    (3, None)
    """

    def __new__(cls, input_array, layer_dim, layers=None):
        obj = np.asarray(input_array).view(cls)
        obj._n_columns = obj.shape[1] if obj.ndim == 2 else None
        obj.layer_dim = int(layer_dim)
        obj.layers = None if layers is None else np.asarray(layers, dtype=np.intp)
        return obj

    def __array_finalize__(self, obj):
        width = getattr(obj, "layer_dim", None)
        n_columns = getattr(obj, "_n_columns", None)
        keep = width is not None and self.ndim == 2 and self.shape[1] == n_columns
        self._n_columns = n_columns if keep else None
        self.layer_dim = width if keep else None
        self.layers = getattr(obj, "layers", None) if keep else None

    def transpose(self, *axes):
        """Transpose; the result is a plain array (its columns are the rows)."""
        return np.asarray(self).transpose(*axes)

    @property
    def T(self):  # noqa: N802 - numpy's name
        """The transpose, as a plain array."""
        return self.transpose()

    def __reduce__(self):
        reconstruct, args, state = super().__reduce__()
        return reconstruct, args, (state, self.layer_dim, self.layers)

    def __setstate__(self, state):
        base, width, layers = state
        super().__setstate__(base)
        self.layer_dim, self.layers = width, layers
        self._n_columns = self.shape[1] if width is not None else None


def flat_layer_dim(X):
    """The block width that a 2-D ``X`` declares itself, or None.

    Read from a :class:`LayerTable` marker, else from column names
    ``layer{l}_{j}`` laid out block by block (``j`` running ``0..dim-1`` in
    every block, blocks of one width). Call it before any conversion:
    ``np.asarray`` drops the marker and the names.

    Parameters
    ----------
    X : array-like
        Any input.

    Returns
    -------
    layer_dim : int or None
        None for a plain table (or a 3-D stack).
    """
    if isinstance(X, LayerTable):
        width = X.layer_dim
        if width is not None and X.ndim == 2 and X.shape[1] == X._n_columns:
            return int(width)
        return None
    columns = getattr(X, "columns", None)
    if columns is None or len(columns) == 0:
        return None
    units = []
    for name in columns:
        match = _LAYER_NAME.fullmatch(name) if isinstance(name, str) else None
        if match is None:
            return None
        units.append((int(match.group(1)), int(match.group(2))))
    width = 1 + max(j for _, j in units)
    if len(units) % width:
        return None
    for start in range(0, len(units), width):
        block = units[start : start + width]
        units_ok = [j for _, j in block] == list(range(width))
        if not units_ok or len({l for l, _ in block}) != 1:
            return None
    return width


def mark_layers(flat, layer_dim, layers=None):
    """Return ``flat`` as a :class:`LayerTable` (no copy).

    Parameters
    ----------
    flat : ndarray of shape (n_samples, n_layers * layer_dim)
        A flat table laid out block by block.
    layer_dim : int
        Width of each block.
    layers : array-like of int or None, default=None
        The ``hidden_states`` index of each block.

    Returns
    -------
    table : LayerTable
        A view of ``flat`` carrying ``layer_dim`` and ``layers``.
    """
    return LayerTable(flat, layer_dim, layers)


def validate_layers(
    estimator,
    X,
    y="no_validation",
    *,
    layer_dim=None,
    reset=True,
    dtype=np.float64,
    plain="columns",
    lazy=False,
    **check_params,
):
    """Validate layer data (the one contract) and return it as a stack view.

    A 3-D ``X`` is a stack. A 2-D ``X`` is a flat table whose block width is
    ``layer_dim``, else the width ``X`` declares (:func:`flat_layer_dim`: the
    :class:`LayerTable` marker or ``layer{l}_{j}`` column names); a table
    with neither is a plain feature table, read as ``plain`` says. A layer
    store or a view of one (:class:`~skloes.core._store.StoreView`) is a
    stack on disk: it must be complete, and it is read into memory (its
    layers and rows only) unless ``lazy``.

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
        Block width of a flat table (the estimator's parameter); ignored for a
        stack. It must agree with a width the table declares.
    reset : bool
        Whether this is ``fit`` (record the layout) or a later call (check it).
    dtype : dtype or tuple of dtypes
        Passed to :func:`~sklearn.utils.check_array`.
    plain : {"columns", "one_layer"}, default="columns"
        How a plain feature table is read: every column its own block (the
        selectors: a plain table makes them feature selectors), or the whole
        table as one layer (the heads, whose per-layer adapters need width).
    lazy : bool, default=False
        Return a store view as it is, unread (its values were checked finite
        when written): for callers that read only the rows and layers they
        need through ``stack[l][rows]`` or ``stack[l]``.
    **check_params : dict
        Passed to :func:`~sklearn.utils.validation.validate_data` (2-D input) or
        :func:`~sklearn.utils.check_array` (3-D input).

    Returns
    -------
    stack : ndarray of shape (n_layers, n_samples, dim)
        For a flat table, a strided view of it (no copy); a store view as it
        is when ``lazy``.
    y : ndarray or None
        Only returned when ``y`` is not "no_validation".
    """
    name = _name(estimator)
    if y is not None and not (isinstance(y, str) and y == "no_validation"):
        refuse_mixed_labels(y, name)
    if is_layer_source(X):
        X.store.require_complete(name)
        if lazy:
            return _validate_source(estimator, X, y, reset=reset)
        X = X.read()
    ndim = input_ndim(X)
    if ndim == 3:
        with one_line_input_errors(name):
            out = _validate_stack(
                estimator, X, y, reset=reset, dtype=dtype, **check_params
            )
    elif ndim == 2:
        if reset:
            layer_dim = flat_width(name, X, layer_dim, plain)
        with one_line_input_errors(name):
            out = _validate_flat(
                estimator,
                X,
                y,
                layer_dim=layer_dim,
                reset=reset,
                dtype=dtype,
                **check_params,
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


def input_ndim(X) -> int:
    """Number of dimensions of an array-like, without ``np.ndim`` dispatch."""
    ndim = getattr(X, "ndim", None)
    if ndim is None:  # lists, and array-likes that only implement __array__
        ndim = np.asarray(X).ndim
    return ndim


def _stack_layout(estimator, X, y, *, reset, mismatch):
    """Record the stack's layout (``reset``) or check it against the fitted
    one, and check ``y``'s length (``mismatch(n_y)``: the error message)."""
    n_layers, n_samples, dim = X.shape
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
            raise ValueError(mismatch(y.shape[0]))
    return X, y


def _validate_stack(estimator, X, y, *, reset, dtype, **check_params):
    name = _name(estimator)
    check_params.pop("ensure_min_features", None)
    check_params.pop("ensure_min_samples", None)  # axis 0 holds layers, not samples
    X = check_array(
        X,
        allow_nd=True,
        dtype=dtype,
        input_name="X",
        estimator=estimator,
        ensure_2d=False,
        ensure_min_samples=0,
        **check_params,
    )
    n_layers, n_samples, dim = X.shape
    if n_samples == 0 or n_layers == 0 or dim == 0:
        raise ValueError(
            f"{name}: the layer stack `X` must have at least one layer, sample and "
            f"feature; got shape {X.shape}."
        )
    return _stack_layout(
        estimator,
        X,
        y,
        reset=reset,
        mismatch=lambda n_y: (
            f"{name}: the layer stack `X` of shape {X.shape} is read as "
            f"(n_layers, n_samples, dim), so it has {n_samples} samples, but `y` "
            f"has {n_y}. Pass a stack with the samples on axis 1."
        ),
    )


def _validate_source(estimator, X, y, *, reset):
    """A store view as a lazy stack: its layout recorded or checked, ``y``'s
    length checked; nothing read."""
    n_samples = X.shape[1]
    if n_samples == 0:
        raise ValueError(f"{_name(estimator)}: the store view `X` holds no row.")
    return _stack_layout(
        estimator,
        X,
        y,
        reset=reset,
        mismatch=lambda n_y: (
            f"{_name(estimator)}: the store view `X` has {n_samples} rows, but "
            f"`y` has {n_y}; give one target per row of the view."
        ),
    )


def _validate_flat(estimator, X, y, *, layer_dim, reset, dtype, **check_params):
    name = _name(estimator)
    no_y = isinstance(y, str) and y == "no_validation"
    if no_y or y is None:
        X = validate_data(estimator, X, reset=reset, dtype=dtype, **check_params)
    else:
        X, y = validate_data(estimator, X, y, reset=reset, dtype=dtype, **check_params)
    n_samples, n_features = X.shape
    if reset:
        width = check_layer_dim(name, layer_dim, n_features)
        estimator.input_format_ = "flat"
        estimator.layer_dim_ = width
        estimator.n_layers_in_ = n_features // width
        estimator.dim_in_ = width
    else:
        _check_layout(estimator, n_features // estimator.dim_in_, estimator.dim_in_)
    stack = X.reshape(n_samples, n_features // estimator.dim_in_, estimator.dim_in_)
    stack = stack.transpose(1, 0, 2)
    return stack if no_y else (stack, None if y is None else y)


def flat_width(owner, X, layer_dim, plain):
    """The block width of a 2-D ``X`` by the contract's order.

    ``layer_dim`` if given (it must agree with a width ``X`` declares), else
    the declared width (:func:`flat_layer_dim`), else, for a plain table,
    None (``plain="columns"``: every column its own block) or the number of
    columns (``plain="one_layer"``).
    """
    declared = flat_layer_dim(X)
    if layer_dim is not None and declared is not None and layer_dim != declared:
        raise ValueError(
            f"{owner}: `layer_dim`={layer_dim} contradicts the flat table `X`, "
            f"whose layout declares blocks of {declared} columns (the output of "
            "HiddenStatesTransformer); leave layer_dim=None."
        )
    width = layer_dim if layer_dim is not None else declared
    if width is None and plain == "one_layer":
        shape = X.shape if hasattr(X, "shape") else np.asarray(X).shape
        width = max(int(shape[1]), 1) if len(shape) == 2 else None
    return width


def stack_view(X):
    """A 2-D table that declares its layout as a stack view; anything else as is.

    The metrics' entry point of the contract: a :class:`LayerTable` or a
    DataFrame with ``layer{l}_{j}`` columns becomes its
    ``(n_layers, n_samples, layer_dim)`` stack; a plain table stays one matrix.
    """
    width = flat_layer_dim(X)
    if width is None or input_ndim(X) != 2:
        return X
    flat = np.asarray(X)
    n_samples, n_features = flat.shape
    return flat.reshape(n_samples, n_features // width, width).transpose(1, 0, 2)


def check_layer_dim(owner, layer_dim, n_features):
    """The block width ``layer_dim`` of a flat table of ``n_features``
    columns: a positive int that divides them, or None (one column a block,
    returned as 1)."""
    layer_dim = check_count(layer_dim, owner, "layer_dim", allow_none=True)
    if layer_dim is None:
        return 1
    if n_features % layer_dim:
        raise ValueError(
            f"{owner}: `layer_dim`={layer_dim} does not divide the {n_features} "
            "columns of the flat table `X`; the columns must be n_layers blocks of "
            "layer_dim features each."
        )
    return int(layer_dim)


def _check_layout(estimator, n_layers, dim):
    if n_layers != estimator.n_layers_in_ or dim != estimator.dim_in_:
        raise ValueError(
            f"{_name(estimator)}: `X` has {n_layers} layers of width {dim}, but the "
            f"estimator was fitted on {estimator.n_layers_in_} layers of width "
            f"{estimator.dim_in_}."
        )


def _shown(value):
    """``repr`` on one line (a numpy array's repr wraps)."""
    return repr(value.tolist() if isinstance(value, np.ndarray) else value)


def layer_mask_indices(layers, n_layers, *, param="layers", owner="skloes"):
    """The indices of a boolean layer mask, or None when ``layers`` is not one.

    The one rule for every parameter that takes layers: a sequence of booleans
    (Python or numpy) is a mask over the layers, as ``get_support()`` returns,
    never the indices 0 and 1; it must have one entry per layer and select
    one at least.
    """
    if isinstance(layers, (str, bytes)):
        return None
    try:
        values = np.asarray(layers, dtype=object)
    except ValueError:  # ragged: not a mask, and refused as indices
        return None
    if values.ndim == 0:
        return None
    flags = [isinstance(v, (bool, np.bool_)) for v in values.ravel()]
    if not flags or not any(flags):
        return None
    if not all(flags) or values.ndim != 1:
        what = "mixes booleans and other values" if values.ndim == 1 else "is not 1-D"
        raise TypeError(
            f"{owner}: `{param}` {what}; give layer indices or a boolean mask "
            f"with one entry per layer; got {values.tolist()!r}."
        )
    if len(values) != n_layers:
        raise ValueError(
            f"{owner}: `{param}` is a boolean mask of {len(values)} entries; a mask "
            f"needs one per layer ({n_layers}, 0 being the embedding output)."
        )
    indices = np.flatnonzero(values.astype(bool))
    if not indices.size:
        raise ValueError(f"{owner}: `{param}` is a boolean mask that selects no layer.")
    return indices


def resolve_layer_indices(layers, n_layers, *, param="layers", owner="skloes"):
    """Resolve Hugging Face ``hidden_states`` indices (negatives from the end).

    Layer ``0`` is the embedding output and ``1..n_layers-1`` are the blocks.
    A boolean mask with one entry per layer is read as a mask
    (:func:`layer_mask_indices`). Returns a sorted array of unique
    non-negative indices.
    """
    if isinstance(layers, str) and layers == "all":
        return np.arange(n_layers)
    if isinstance(layers, (bool, np.bool_)):
        raise TypeError(
            f"{owner}: `{param}` must be 'all', an int, a list of ints or a "
            f"boolean mask over the layers; got {_shown(layers)}."
        )
    if isinstance(layers, Integral):
        layers = [layers]
    mask = layer_mask_indices(layers, n_layers, param=param, owner=owner)
    if mask is not None:
        return mask
    try:
        values = [int(v) for v in layers]
        if any(int(v) != v for v in layers):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError(
            f"{owner}: `{param}` must be 'all', an int, a list of ints or a "
            f"boolean mask over the layers; got {_shown(layers)}."
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


def fuse_layers(stack, layers, mean=None, scale=None, dtype=None):
    """Concatenate ``stack[l]`` over ``layers`` (in the given order) by columns.

    Parameters
    ----------
    stack : ndarray of shape (n_layers, n_samples, dim)
        The layer stack.
    layers : array-like of int
        The layers to concatenate.
    mean, scale : ndarray of shape (n_layers, dim) and (n_layers,) or None
        When given, each block ``l`` is centred by ``mean[l]`` and divided by
        ``scale[l]`` (in float64) before concatenation.
    dtype : dtype or None, default=None
        Dtype of the result (None: numpy's promotion of the blocks).

    Returns
    -------
    fused : ndarray of shape (n_samples, len(layers) * dim)
        The fused embedding.
    """
    blocks = []
    for l in layers:
        block = stack[l]
        if mean is not None:
            block = (np.asarray(block, dtype=np.float64) - mean[l]) / scale[l]
        blocks.append(block)
    out = np.concatenate(blocks, axis=1)
    return out if dtype is None else out.astype(dtype, copy=False)


def flat_table(stack, layers):
    """The flat output: blocks of ``dim`` columns, marked with their layout.

    The :class:`LayerTable` marker lets the next
    step of a numpy ``Pipeline`` read the layers without ``layer_dim``
    (see ``doc/user_guide/data_contract.rst``).
    """
    n_layers, n, dim = stack.shape
    flat = np.ascontiguousarray(stack.transpose(1, 0, 2)).reshape(n, n_layers * dim)
    return mark_layers(flat, dim, layers)
