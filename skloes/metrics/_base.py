"""Input validation, subsampling, preprocessing and normalisation for the metrics."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils import check_random_state

from skloes.core._contract import stack_view
from skloes.utils._docstrings import fill_doc

NORMALIZATIONS = ("maxEntropy", "logN", "logD", "logNlogD", "raw")

#: Fills a metric's ``{PROMPTS}`` or ``{ROWS}`` line: its subsample parameters.
add_subsample_doc = fill_doc(
    PROMPTS="""
    max_prompts : int or None, default=1000
        At most this many prompts, drawn uniformly from ``random_state``.
    random_state : int, RandomState instance or None, default=None
        Seeds the prompt subsample.""",
    ROWS="""
    max_prompts : int or None, default=1000
        At most this many rows are used, drawn uniformly from ``random_state``.
    random_state : int, RandomState instance or None, default=None
        Seeds the row subsample.""",
)


def check_option(owner, param, value, options):
    """Raise ValueError unless ``value`` is one of ``options``."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(
            f"{owner}: `{param}` must be one of {list(options)}; got {value!r}."
        )
    return value


def check_alpha(owner, alpha):
    """Rényi order: a finite real > 0."""
    if (
        not isinstance(alpha, Real)
        or isinstance(alpha, bool)
        or not np.isfinite(alpha)
        or alpha <= 0
    ):
        raise ValueError(f"{owner}: `alpha` must be a finite real > 0; got {alpha!r}.")
    return float(alpha)


def _check_finite(owner, param, A):
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{owner}: `{param}` contains NaN or infinity.")


def as_layers(owner, X, *, param="X", min_samples=2, min_dim=1):
    """Validate a matrix (n, d) or a stack (n_layers, n, d) of float data.

    The layer data contract (``doc/user_guide/data_contract.rst``): a flat
    table that declares its layers (the output of ``HiddenStatesTransformer``)
    is read as its stack; a plain 2-D table is one matrix.

    Returns ``(stack, single)``: a float64 stack and whether the input was
    one matrix (the metric then returns a float, not an array).
    """
    X = stack_view(X)  # a flat table that declares its layers is a stack
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{owner}: `{param}` must be a numeric array of shape (n_samples, dim) "
            f"or (n_layers, n_samples, dim); got {type(X).__name__}."
        ) from None
    if A.ndim not in (2, 3):
        raise ValueError(
            f"{owner}: `{param}` must have shape (n_samples, dim) or (n_layers, "
            f"n_samples, dim); got an array with {A.ndim} dimension(s)."
        )
    single = A.ndim == 2
    stack = A[None] if single else A
    _, n, d = stack.shape
    if stack.shape[0] == 0 or n < min_samples or d < min_dim:
        raise ValueError(
            f"{owner}: `{param}` needs at least {min_samples} samples and {min_dim} "
            f"feature(s) per layer; got shape {A.shape}."
        )
    _check_finite(owner, param, stack)
    return stack, single


def as_prompts(owner, tokens, *, param="tokens"):
    """Validate token input: a sequence of per-prompt arrays.

    Each prompt is ``(N_i, D)`` (one layer) or ``(n_layers, N_i, D)`` (all
    layers). Returns ``(prompts, single)`` with every prompt as a float64
    ``(n_layers, N_i, D)`` array.
    """
    if isinstance(tokens, np.ndarray) and tokens.ndim in (3, 4):
        tokens = list(tokens)
    if not hasattr(tokens, "__len__") or isinstance(tokens, str) or len(tokens) == 0:
        raise ValueError(
            f"{owner}: `{param}` must be a non-empty sequence of per-prompt token "
            "arrays of shape (n_tokens, dim) or (n_layers, n_tokens, dim)."
        )
    prompts, ndim, shape = [], None, None
    for i, Z in enumerate(tokens):
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim not in (2, 3) or (ndim is not None and Z.ndim != ndim):
            raise ValueError(
                f"{owner}: every prompt in `{param}` must have shape (n_tokens, dim) "
                f"or (n_layers, n_tokens, dim), all alike; prompt {i} has shape "
                f"{Z.shape}."
            )
        ndim = Z.ndim
        Z = Z[None] if Z.ndim == 2 else Z
        if shape is not None and (Z.shape[0], Z.shape[2]) != shape:
            raise ValueError(
                f"{owner}: prompt {i} in `{param}` has {Z.shape[0]} layer(s) of "
                f"width {Z.shape[2]}; the first prompt has {shape[0]} of width "
                f"{shape[1]}."
            )
        shape = (Z.shape[0], Z.shape[2])
        _check_finite(owner, f"{param}[{i}]", Z)
        prompts.append(Z)
    return prompts, ndim == 2


def subsample_index(n, max_prompts, random_state):
    """Sorted indices of at most ``max_prompts`` of ``n`` rows, uniform."""
    if max_prompts is None or n <= max_prompts:
        return np.arange(n)
    rng = check_random_state(random_state)
    return np.sort(rng.choice(n, size=max_prompts, replace=False))


def normalizer(owner, normalization, n, d):
    """The divisor of an entropy for ``normalization`` with N = n, D = d."""
    check_option(owner, "normalization", normalization, NORMALIZATIONS)
    if normalization == "raw":
        return 1.0
    if n < 2 or d < 2:
        raise ValueError(
            f"{owner}: normalization {normalization!r} needs N >= 2 and D >= 2; got "
            f"N={n}, D={d}."
        )
    return {
        "maxEntropy": min(np.log(n), np.log(d)),
        "logN": np.log(n),
        "logD": np.log(d),
        "logNlogD": np.log(n) * np.log(d),
    }[normalization]


def prep(Z):
    """Centre the tokens, then L2-normalise each row (rows of norm < 1e-12 stay 0).

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics._base import prep
    >>> Z = prep(np.array([[1.0, 0.0], [3.0, 0.0]]))
    >>> Z.tolist()
    [[-1.0, 0.0], [1.0, 0.0]]
    """
    Z = np.asarray(Z, dtype=np.float64)
    Z = Z - Z.mean(axis=0)
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return np.divide(Z, norms, out=np.zeros_like(Z), where=norms >= 1e-12)


def per_layer(values, single):
    """A float for one matrix, else a float64 array with one value per layer."""
    values = np.asarray(values, dtype=np.float64) + 0.0  # no -0.0
    return float(values[0]) if single else values
