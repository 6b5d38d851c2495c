"""What every layer selector shares: budget, calibration rows, candidates, masks.

``resolve_n_layers`` turns a budget (an int or ``"auto"``) into a number of
layers; ``calibration_rows`` draws the rows a selector looks at (stratified
for classification); ``layer_spread`` finds the layers that are constant by
their own numbers, and ``candidate_layers`` states the one candidate-layer
policy (and its errors). ``LayerSupportMixin`` reads the fitted ``support_`` mask over
layers; ``LayerFeatureNamesMixin`` adds the ``layer{l}_{j}`` names of the fused
columns from ``selected_layers_`` and ``dim_in_``. Mixins go left of
``BaseEstimator``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from math import floor
from numbers import Integral

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import (
    FLOAT_DTYPES,
    fuse_layers,
    layer_feature_names,
    validate_layers,
)
from skloes.utils._param_validation import Interval, StrOptions

#: Budget that ``n_layers_to_select="auto"`` asks for (clipped to the candidates).
AUTO_N_LAYERS = 4

#: ``_parameter_constraints`` entry of a budget: a positive int or "auto".
N_LAYERS_CONSTRAINT = [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})]

#: A feature is constant when its standard deviation over the calibration
#: rows is at most this many units of rounding (the input dtype's epsilon) of
#: its largest absolute value; a layer whose features are all constant is
#: degenerate. A layer is judged by its own numbers only, never against
#: another layer: a layer a million times larger than the others leaves them
#: candidates.
ROUNDING_UNITS = 64


def resolve_n_layers(
    n_layers_to_select, n_candidates, owner, *, clip=False, shape=None, degenerate=()
):
    """The number of layers a selector picks, from its budget parameter.

    The one budget rule and error of every selector.

    Parameters
    ----------
    n_layers_to_select : int or "auto"
        The budget; ``"auto"`` is ``min(4, n_candidates)``, valid on any input
        (as ``RFE``'s default), an int must not exceed ``n_candidates``.
    n_candidates : int
        Number of candidate layers (at least 1).
    owner : str
        The estimator name that prefixes the error message.
    clip : bool, default=False
        Lower an int above ``n_candidates`` to it instead of raising (the
        largest budget a search tries).
    shape : tuple of int or None, default=None
        ``(n_layers, n_samples, dim)`` of the input, named in the error.
    degenerate : sequence of int, default=()
        The layers left out as degenerate, named in the error.

    Returns
    -------
    n_select : int

    Examples
    --------
    >>> from skloes.selection._base import resolve_n_layers
    >>> resolve_n_layers("auto", 3, "X"), resolve_n_layers(2, 3, "X")
    (3, 2)
    """
    if isinstance(n_layers_to_select, str) and n_layers_to_select == "auto":
        return min(AUTO_N_LAYERS, n_candidates)
    n_select = int(n_layers_to_select)
    if clip:
        n_select = min(n_select, n_candidates)
    if n_select > n_candidates:
        of = ""
        if shape is not None:
            of = f" of {shape[0]} ({shape[0] * shape[2]} feature(s))"
        degenerate = [int(l) for l in degenerate]
        left_out = f"; layers {degenerate} are degenerate" if degenerate else ""
        raise ValueError(
            f"{owner}: `n_layers_to_select` must be at most the number of candidate "
            f"layers; got {n_select} for {n_candidates} candidate layer(s){of}"
            f"{left_out}."
        )
    return n_select


def calibration_rows(max_samples, n, codes, rng):
    """Sorted indices of the calibration rows, stratified for classification.

    Parameters
    ----------
    max_samples : int, float in (0, 1] or None
        A count, a fraction of ``n`` (floored), or None for all rows.
    n : int
        Number of rows.
    codes : ndarray of shape (n,) or None
        Integer class codes to stratify by; plain uniform draw when None or
        when a class is too small to stratify.
    rng : numpy.random.RandomState
        The estimator's random state.

    Returns
    -------
    rows : ndarray of int
        Sorted row indices.
    """
    if max_samples is None:
        count = n
    elif isinstance(max_samples, Integral):
        count = min(int(max_samples), n)
    else:
        count = min(n, floor(max_samples * n))
    if count >= n:
        return np.arange(n)
    if codes is not None:
        try:
            rows, _ = train_test_split(
                np.arange(n), train_size=count, stratify=codes, random_state=rng
            )
            return np.sort(rows)
        except ValueError:
            pass
    return np.sort(rng.choice(n, size=count, replace=False))


def input_epsilon(dtype) -> float:
    """Rounding unit of the values a selector was given (float64 for ints)."""
    dtype = np.dtype(dtype)
    return float(np.finfo(dtype if dtype.kind == "f" else np.float64).eps)


def layer_spread(X, eps, owner, layer):
    """Mean, scale and degeneracy of one layer on the calibration rows.

    The layer is divided by its largest absolute value first, so that neither
    a huge nor a tiny layer overflows or underflows on the way.

    Parameters
    ----------
    X : ndarray of shape (n_rows, dim), float64
        The layer's calibration rows.
    eps : float
        Rounding unit of the input (:func:`input_epsilon`).
    owner : str
        Estimator name for the error message.
    layer : int
        The layer's index, named in the error message.

    Returns
    -------
    mean : ndarray of shape (dim,)
    scale : float
        Root of the total variance (sum over features).
    degenerate : bool
        Whether every feature is constant to the precision of its own values
        (numerical rank 0 once centred; see :data:`ROUNDING_UNITS`).

    Raises
    ------
    ValueError
        When the layer's total variance overflows float64, naming the layer.
    """
    peak = np.abs(X).max(axis=0)
    top = float(peak.max()) if peak.size else 0.0
    if top == 0.0:
        return np.zeros(X.shape[1]), 0.0, True
    unit = X / top
    mean = unit.mean(axis=0)
    centred = unit - mean
    spread = np.sqrt(np.einsum("ij,ij->j", centred, centred) / X.shape[0])
    with np.errstate(over="ignore"):
        scale = top * float(np.sqrt(np.sum(spread**2)))
        overflow = not np.isfinite(scale * scale)
    if overflow:
        raise ValueError(
            f"{owner}: layer {layer} of `X` overflows float64 arithmetic (values "
            f"up to {top:.3g}: its variance exceeds {np.finfo(np.float64).max:.3g}"
            "); divide that layer by its scale."
        )
    degenerate = bool(np.all(spread <= ROUNDING_UNITS * eps * (peak / top)))
    return mean * top, scale, degenerate


def layer_statistics(stack, eps, owner):
    """Scale and degeneracy of every layer of a float64 stack.

    Returns
    -------
    scales : ndarray of shape (n_layers,)
        Root total variance of each layer.
    degenerate : ndarray of bool of shape (n_layers,)
        See :func:`layer_spread`.
    """
    spreads = [layer_spread(layer, eps, owner, l)[1:] for l, layer in enumerate(stack)]
    return (
        np.array([v for v, _ in spreads], dtype=np.float64),
        np.array([d for _, d in spreads], dtype=bool),
    )


def candidate_layers(degenerate, include_embedding, owner, stacklevel=4):
    """The candidate-layer policy every selector follows, its warning and error.

    Layer 0 is a candidate only with ``include_embedding``; a degenerate layer
    (:func:`layer_spread`) never is, and a warning names it. No candidate
    left is an error that says why.

    Parameters
    ----------
    degenerate : ndarray of bool of shape (n_layers,)
        Whether each layer is degenerate on the calibration rows.
    include_embedding : bool
        Whether layer 0 (the embedding output) may be selected.
    owner : str
        Estimator name for the warning and the error.
    stacklevel : int, default=4
        Passed to :func:`warnings.warn` (the user's ``fit`` call).

    Returns
    -------
    candidates : ndarray of int
        Candidate layers, ascending.
    degenerate : ndarray of int
        The degenerate layers.
    """
    mask = np.asarray(degenerate, dtype=bool)
    degenerate = np.flatnonzero(mask)
    if degenerate.size:
        warnings.warn(
            f"{owner}: layers {degenerate.tolist()} are degenerate (constant on the "
            "calibration rows, to the precision of their own values) and are not "
            "candidates.",
            UserWarning,
            stacklevel=stacklevel,
        )
    layers = np.arange(0 if include_embedding else 1, mask.size)
    candidates = np.setdiff1d(layers, degenerate)
    if not candidates.size:
        raise ValueError(
            no_candidates_message(owner, mask.size, include_embedding, degenerate)
        )
    return candidates, degenerate


def no_candidates_message(owner, n_layers, include_embedding, degenerate=()):
    """Why no layer is a candidate (the error of :func:`candidate_layers`)."""
    degenerate = [int(l) for l in degenerate]
    if n_layers == 1 and not include_embedding:
        return (
            f"{owner}: `include_embedding`=False leaves no candidate layer: `X` "
            "has one layer, layer 0 (the embedding output); pass "
            "include_embedding=True or a stack of more layers."
        )
    why = (
        " with `include_embedding`=False (layer 0 left out)"
        if not include_embedding
        else ""
    )
    return (
        f"{owner}: no candidate layers: every layer{why} is degenerate, "
        f"constant on the calibration rows (layers {degenerate}); do the "
        "samples differ? (For texts: a `max_length` or a vocabulary that "
        "gives every text the same tokens.)"
    )


class LayerSupportMixin:
    """The layers a fitted estimator uses, derived from one boolean mask.

    A subclass implements ``_support_mask()`` (a boolean mask over the
    ``n_layers_in_`` layers, from its fitted state); ``support_``,
    ``selected_layers_`` and :meth:`get_support` derive from it, as
    scikit-learn's ``SelectorMixin`` derives its methods from
    ``_get_support_mask``.
    """

    def _support_mask(self):
        raise NotImplementedError

    @property
    def support_(self):
        """Boolean mask over the ``n_layers_in_`` layers of the selected ones."""
        check_is_fitted(self)
        return self._support_mask()

    @property
    def selected_layers_(self):
        """The selected layers, ascending (Hugging Face indices: 0 is the
        embedding output)."""
        return np.flatnonzero(self.support_)

    def get_support(self, indices=False):
        """Mask (or indices) of the selected layers.

        Parameters
        ----------
        indices : bool, default=False
            Return layer indices instead of a boolean mask over layers.

        Returns
        -------
        support : ndarray
            Boolean mask of shape (n_layers_in_,), or the sorted indices.
        """
        return self.selected_layers_ if indices else self.support_


class LayerFeatureNamesMixin(LayerSupportMixin):
    """``get_support`` and the ``layer{l}_{j}`` names of the fused columns.

    Set ``_check_input_features = True`` to reject an ``input_features`` that
    does not match the columns seen in fit; otherwise it is ignored.
    """

    _check_input_features = False

    def get_feature_names_out(self, input_features=None):
        """Return the names ``layer{l}_{j}`` of the fused columns.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Not used for the names, which derive from the layer indices; the
            baseline selectors check it against the columns seen in fit.

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column.
        """
        check_is_fitted(self)
        if self._check_input_features and input_features is not None:
            names_in = getattr(self, "feature_names_in_", None)
            n_in = getattr(self, "n_features_in_", None)
            if (n_in is not None and len(input_features) != n_in) or (
                names_in is not None and not np.array_equal(input_features, names_in)
            ):
                raise ValueError(
                    f"{type(self).__name__}: `input_features` must match the "
                    "columns seen in fit."
                )
        return layer_feature_names(self.selected_layers_, self.dim_in_)


class LayerSelectorMixin(LayerFeatureNamesMixin, TransformerMixin):
    """The contract of a fitted layer selector, from its ``selection_order_``.

    A selector's ``fit`` records ``selection_order_`` (the layers in the order
    they were picked) with the layout of its input (``n_layers_in_``,
    ``dim_in_``: :func:`~skloes.core._contract.validate_layers`); the mask
    (``support_``, ``get_support``), ``selected_layers_``, ``n_selected_``,
    the column names and :meth:`transform` all derive from it. A selector
    whose fused blocks are standardised overrides :meth:`_fusion_statistics`.
    A ``TransformerMixin`` itself, so that ``set_output`` wraps this
    ``transform`` (scikit-learn wraps only methods a class defines).
    """

    def _support_mask(self):
        mask = np.zeros(self.n_layers_in_, dtype=bool)
        mask[self.selection_order_] = True
        return mask

    @property
    def n_selected_(self):
        """Number of layers selected."""
        check_is_fitted(self)
        return int(len(self.selection_order_))

    def _fusion_statistics(self):
        """``(mean, scale)`` of every layer when the fused blocks are centred
        and scaled (``layer_mean_``, ``layer_scale_``), else None."""
        return None

    def transform(self, X):
        """Concatenate the selected layers in layer-index order.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack or a flat table with the layout seen in fit, or a
            layer store view (only the selected layers are read).

        Returns
        -------
        X_fused : ndarray of shape (n_samples, n_selected_ * dim)
            The fused embedding (columns ``layer{l}_{j}``).
        """
        check_is_fitted(self)
        stack = validate_layers(self, X, reset=False, dtype=FLOAT_DTYPES, lazy=True)
        statistics = self._fusion_statistics()
        if statistics is None:
            return fuse_layers(stack, self.selected_layers_)
        mean, scale = statistics
        return fuse_layers(stack, self.selected_layers_, mean, scale, dtype=stack.dtype)
