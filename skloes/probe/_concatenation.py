"""The concatenated layers of a fitted selector, from a stack of those layers only.

:class:`SelectedLayerConcatenation` is what a pruned pipeline puts after an
extractor that returns only the selected layers: it concatenates them exactly
as the selector's ``transform`` does on the full stack (same order, same
per-layer scaling), so a pruned pipeline predicts what the full one predicts.
It was named ``SelectedLayerFusion`` before 0.3 (:mod:`skloes.probe._fusion`
keeps that name until 0.5); "fusion" is the probes' choice of how layers are
combined, of which concatenation is one.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import (
    FLOAT_DTYPES,
    fuse_layers,
    layer_feature_names,
    stack_view,
)
from skloes.selection._base import LayerSelectorMixin

__all__ = ["SelectedLayerConcatenation"]


class SelectedLayerConcatenation(TransformerMixin, BaseEstimator):
    """Concatenate a fitted selector's layers, from a stack of those layers only.

    A pruned pipeline (:func:`prune_layers`) extracts only the layers its
    selector kept; this step then concatenates them as the selector's
    ``transform`` concatenates them from every layer: the same layers, in the
    same order, with the same per-layer centring and scaling when the selector
    fuses with ``fusion_scaling="layer"``. It also accepts the full stack the
    selector was fitted on, and picks the layers from it.

    Read more in the :ref:`User Guide <probe>`.

    .. versionchanged:: 0.3
       Renamed from ``SelectedLayerFusion``, which keeps working until 0.5
       with a FutureWarning.

    Parameters
    ----------
    selector : fitted layer selector
        Any fitted skloes selector (:mod:`skloes.selection`); only its
        selected layers and fusion statistics are kept.

    Attributes
    ----------
    layers_ : ndarray of int
        The selected layers (Hugging Face ``hidden_states`` indices, 0 is the
        embedding output), in the order they are concatenated.
    n_layers_in_ : int
        Number of layers the selector was fitted on.
    dim_in_ : int
        Width of each layer.
    mean_ : ndarray of shape (n_layers, dim) or None
        Per-layer centring of the selected layers (None: none).
    scale_ : ndarray of shape (n_layers,) or None
        Per-layer scale of the selected layers (None: none).

    See Also
    --------
    prune_layers : Build the pipeline this step belongs to.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.probe import SelectedLayerConcatenation
    >>> from skloes.selection import LastKSelector
    >>> H = np.random.RandomState(0).normal(size=(5, 20, 3))
    >>> sel = LastKSelector(n_layers_to_select=2).fit(H)
    >>> concat = SelectedLayerConcatenation(sel).fit(H[sel.selected_layers_])
    >>> np.array_equal(concat.transform(H[[3, 4]]), sel.transform(H))
    True
    """

    _parameter_constraints = {"selector": [LayerSelectorMixin]}

    def __init__(self, selector=None):
        self.selector = selector

    def fit(self, X=None, y=None):
        """Read the selected layers and statistics from the fitted selector.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or None, default=None
            Ignored; the selector was fitted already.
        y : None
            Ignored.

        Returns
        -------
        self : object
            This step, fitted.
        """
        name = type(self).__name__
        selector = self.selector
        if not isinstance(selector, LayerSelectorMixin):
            raise TypeError(
                f"{name}: `selector` must be a fitted skloes layer selector; got "
                f"{type(selector).__name__}."
            )
        check_is_fitted(selector)
        layers = np.asarray(selector.selected_layers_, dtype=np.intp)
        self.layers_ = layers
        self.n_layers_in_ = int(selector.n_layers_in_)
        self.dim_in_ = int(selector.dim_in_)
        self.mean_ = self.scale_ = None
        statistics = selector._fusion_statistics()
        if statistics is not None:
            self.mean_ = np.asarray(statistics[0])[layers]
            self.scale_ = np.asarray(statistics[1])[layers]
        return self

    def transform(self, X):
        """Concatenate the selected layers.

        Parameters
        ----------
        X : array-like of shape (n_selected, n_samples, dim) or \
(n_layers_in_, n_samples, dim)
            A stack of the selected layers only (in layer-index order), or the
            full stack the selector was fitted on (or their flat tables).

        Returns
        -------
        X_fused : ndarray of shape (n_samples, n_selected * dim)
            The selector's fused embedding.
        """
        check_is_fitted(self)
        stack = check_array(
            stack_view(X),
            allow_nd=True,
            ensure_2d=False,
            dtype=FLOAT_DTYPES,
            input_name="X",
        )
        k = len(self.layers_)
        if stack.ndim != 3:
            raise ValueError(
                f"{type(self).__name__}: `X` must be a layer stack (n_layers, "
                "n_samples, dim) or the flat output of HiddenStatesTransformer; "
                f"got an array of shape {stack.shape}."
            )
        if stack.shape[0] == self.n_layers_in_ and stack.shape[0] != k:
            stack = stack[self.layers_]
        if stack.shape[0] != k or stack.shape[2] != self.dim_in_:
            raise ValueError(
                f"{type(self).__name__}: `X` must hold the {k} selected layers "
                f"{self.layers_.tolist()} (or all {self.n_layers_in_}) of width "
                f"{self.dim_in_}; got {stack.shape[0]} layers of width "
                f"{stack.shape[2]}."
            )
        positions = np.arange(k)
        if self.mean_ is None:
            return fuse_layers(stack, positions)
        return fuse_layers(stack, positions, self.mean_, self.scale_, dtype=stack.dtype)

    def get_feature_names_out(self, input_features=None):
        """Return the names ``layer{l}_{j}`` of the fused columns.

        Parameters
        ----------
        input_features : None
            Ignored.

        Returns
        -------
        feature_names_out : ndarray of str objects
            ``layer{l}_{j}`` for each fused layer ``l`` and unit ``j``.
        """
        check_is_fitted(self)
        return layer_feature_names(self.layers_, self.dim_in_)
