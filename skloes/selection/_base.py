"""Fitted-layer methods shared by the layer selectors and the ScalarMix heads.

``LayerSupportMixin`` reads the fitted ``support_`` mask over layers;
``LayerFeatureNamesMixin`` adds the ``layer{l}_{j}`` names of the fused columns
from ``selected_layers_`` and ``dim_in_``. Mixins go left of ``BaseEstimator``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from skloes.utils._validation import layer_feature_names


class LayerSupportMixin:
    """``get_support`` over layers, from the fitted boolean ``support_``."""

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
        check_is_fitted(self)
        return np.flatnonzero(self.support_) if indices else self.support_.copy()


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
