"""What the text-in estimators share: extract every layer, select, prune, route.

:class:`LayerPipelineBase` holds the parameters and the fit of every estimator
of this floor that runs a model over raw inputs and keeps the layers a
selector chose (the probes and :class:`~skloes.probe.LayerTextEncoder`): the
every-layer extractor, the selector's default, the nested defaults of
``set_params``, the pruned pipeline ``predict``/``transform`` runs, and the
metadata routing of ``fit``'s ``groups`` and ``sample_weight`` to the selector
(and the final estimator).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import re
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import first_line
from skloes.core._pooling import POOLINGS
from skloes.core._routing import route_fit, router_of
from skloes.core._targets import target_seed
from skloes.core._torch import DEVICE_CONSTRAINT
from skloes.extraction import HiddenStatesTransformer
from skloes.extraction._hidden_states import (
    FIXED_AT_FIT,
    SettingChangedError,
    same_setting,
)
from skloes.probe._pruning import prune_layers
from skloes.selection import LOESSelector
from skloes.selection._base import LayerSelectorMixin
from skloes.utils._param_validation import Interval, StrOptions

__all__ = ["LayerPipelineBase", "check_extractor_params"]

#: The ``pooling`` parameter of every estimator here, for their docstrings.
POOLING_DOC = """
    pooling : {"mean", "auto", "cls", "first", "last", "max"}, default="mean"
        Token pooling of the extractor. ``"auto"`` is the model family's
        choice (the class token of a ViT, DeiT or DINOv2, the mean of the
        patch tokens of CLIP, SigLIP, ViT-MAE and BEiT, ``"mean"`` for text;
        see :ref:`vision-families`); ``"mean"`` of an image model averages
        its patch tokens only.

        .. versionchanged:: 0.3
           ``"auto"`` accepted.
""".lstrip("\n")

# HiddenStatesTransformer parameters that are parameters of the estimator
# too: ``extractor_params`` may not set them (nor ``layers`` and ``output``,
# which it sets: it extracts every layer as a stack, then prunes).
_OWN_EXTRACTOR_PARAMS = (
    "model",
    "pooling",
    "max_length",
    "batch_size",
    "cache",
    "device",
    "verbose",
)
_SET_BY_THE_PROBE = ("layers", "output")


def check_extractor_params(extractor_params, owner):
    """``extractor_params`` as a new dict, refusing keys the estimator owns.

    A key that is one of the estimator's own parameters, one it sets itself,
    or no parameter of the extractor at all is an error naming it: a silent
    precedence would run another setting than the one written.
    """
    params = dict(extractor_params or {})
    valid = set(HiddenStatesTransformer._get_param_names())
    for key in params:
        if key in _OWN_EXTRACTOR_PARAMS:
            raise ValueError(
                f"{owner}: `extractor_params` sets {key!r}, which is the "
                f"estimator's own parameter `{key}`; set it there "
                f"({key}={params[key]!r}) and drop it from `extractor_params`."
            )
        if key in _SET_BY_THE_PROBE:
            raise ValueError(
                f"{owner}: `extractor_params` sets {key!r}, which the estimator "
                "sets itself (it extracts every layer as a stack, then keeps the "
                "selected ones); drop it, and choose layers with `selector`."
            )
        if key not in valid:
            raise ValueError(
                f"{owner}: `extractor_params` key {key!r} is not a "
                "HiddenStatesTransformer parameter; valid keys: "
                f"{sorted(valid - set(_OWN_EXTRACTOR_PARAMS + _SET_BY_THE_PROBE))}."
            )
    return params


def check_every_layer(stack, extractor, n_samples, owner):
    """``stack``, checked to be every layer of ``n_samples`` inputs as the
    fitted ``extractor`` computes them: float, finite, of shape
    ``(n_model_layers_, n_samples, dim_)``."""
    try:
        stack = np.asarray(stack, dtype=extractor.dtype)
    except (TypeError, ValueError) as exc:
        detail = re.sub(r"np\.\w+\((.*?)\)", r"\1", first_line(exc))
        raise ValueError(
            f"{owner}: `stack` must be a numeric array of shape (n_layers, "
            f"n_samples, dim); {detail}."
        ) from None
    expected = (extractor.n_model_layers_, n_samples, extractor.dim_)
    if stack.ndim == 3 and stack.shape[1] != n_samples:
        raise ValueError(
            f"{owner}: `stack` has {stack.shape[1]} rows (axis 1) but `X` and `y` "
            f"have {n_samples}; pass every layer of the rows of `X`, of shape "
            f"{expected}."
        )
    if stack.shape != expected and not (
        extractor.dim_ is None and stack.shape[:2] == expected[:2]
    ):
        raise ValueError(
            f"{owner}: `stack` must hold every layer of `X` as the model gives "
            f"them, of shape {expected} (hidden states, rows of `X`, width); "
            f"got shape {stack.shape}."
        )
    if not np.isfinite(stack).all():
        raise ValueError(f"{owner}: `stack` holds NaN or infinite values.")
    return stack


class LayerPipelineBase(BaseEstimator):
    """Shared fit: extract every layer, select, prune the forward pass."""

    _parameter_constraints = {
        "model": [str, os.PathLike, None],  # resolved by the extractor
        "selector": [LayerSelectorMixin, None],
        "pooling": [StrOptions({"auto", *POOLINGS})],
        "max_length": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "cache": [str, os.PathLike, None],
        "device": DEVICE_CONSTRAINT,
        "extractor_params": [dict, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }
    # Parameters whose None means a default object (nested ``name__param``).
    _nested_defaults = ("selector",)

    # ----------------------------------------------------- nested defaults
    def _default(self, name):
        if name == "selector":
            return LOESSelector(random_state=self.random_state)
        raise KeyError(name)

    def _nested(self, name):
        """The parameter ``name``, or its default object when None."""
        value = getattr(self, name)
        return value if value is not None else self._default(name)

    def set_params(self, **params):
        """Set parameters; nested ones of a None ``selector`` (``estimator``)
        set the default's.

        Parameters
        ----------
        **params : dict
            Estimator parameters, nested ``selector__*`` (and
            ``estimator__*``) included.

        Returns
        -------
        self : object
            This estimator.
        """
        for name in self._nested_defaults:
            nested = any(key.startswith(f"{name}__") for key in params)
            if nested and params.get(name, getattr(self, name)) is None:
                params[name] = self._default(name)
        return super().set_params(**params)

    # ---------------------------------------------------------------- fit
    def _extractor_settings(self):
        """The extractor parameters this estimator decides (every layer, as a
        stack, is added by :meth:`_extractor`)."""
        params = check_extractor_params(self.extractor_params, type(self).__name__)
        params.update({name: getattr(self, name) for name in _OWN_EXTRACTOR_PARAMS})
        return params

    def _extractor(self):
        return HiddenStatesTransformer(
            **self._extractor_settings(), output="stack", layers="all"
        )

    def _extract(self, X, y):
        """The fitted every-layer extractor and the stack of ``X``."""
        from skloes.models._loading import RemoteCodeError

        extractor = self._extractor()
        try:
            stack = extractor.fit_transform(X, y)
        except RemoteCodeError as exc:  # the option lives in extractor_params
            raise ValueError(
                exc.message(
                    type(self).__name__,
                    "pass extractor_params={'trust_remote_code': "
                    "True} only if you trust it",
                )
            ) from None
        return extractor, stack

    def _fit_selector(self, extractor, stack, y, routed):
        """Fit the selector on the every-layer ``stack``; record the layers
        and the pruned pipeline of the extractor and the fusion."""
        selector = clone(self._nested("selector"))
        if (
            self.random_state is None
            and selector.get_params().get("random_state", False) is None
        ):  # the same rows, the same layers (target_seed)
            selector.set_params(random_state=target_seed(y))
        selector.fit(stack, y, **routed.selector.fit)
        self.selector_ = selector
        self.selected_layers_ = extractor.layers_[selector.selected_layers_]
        self.n_model_layers_ = extractor.n_model_layers_
        self.n_samples_fit_ = int(stack.shape[1])
        return selector

    _fit_methods = ("fit",)  # the methods that fit (and route to) the children

    def _routed_fit_params(self, params, method="fit"):
        """``fit``'s metadata, routed to the selector (and the estimator)."""
        return route_fit(self, params, self._routing_children(), method=method)

    def _routing_children(self):
        return {"selector": self._nested("selector")}

    def get_metadata_routing(self):
        """Get the metadata routing of this estimator.

        ``fit`` routes ``groups`` (and ``sample_weight``) to the selector's
        ``fit``, whose cross-validation splits by them, when
        ``sklearn.set_config(enable_metadata_routing=True)``; see
        scikit-learn's `metadata routing
        <https://scikit-learn.org/stable/metadata_routing.html>`_.

        Returns
        -------
        routing : sklearn.utils.metadata_routing.MetadataRouter
            The routing of ``fit`` to the selector (and the estimator).
        """
        return router_of(self, self._routing_children(), callers=self._fit_methods)

    # ------------------------------------------------------------ predict
    def _prune(self, extractor, steps):
        """``pipeline_``: the extractor, the selector and ``steps``, pruned to
        the selected layers (the forward pass stops at the deepest)."""
        full = Pipeline([("extractor", extractor), ("fusion", self.selector_), *steps])
        self.pipeline_ = prune_layers(full)

    def _sync_extractor(self):
        """Give the fitted extractor the current settings: those fixed at fit
        (``model``, ``pooling``, ``max_length``...) changed since are an error
        naming them; the others (``device``, ``precision``, ``cache``,
        ``batch_size``...) take effect, the model being loaded again when
        needed, so that nothing is computed under one setting and cached
        under another's key."""
        extractor = self.pipeline_[0]
        current = extractor.get_params(deep=False)
        changed = {
            key: value
            for key, value in self._extractor_settings().items()
            if key in current and not same_setting(current[key], value)
        }
        for key in FIXED_AT_FIT:
            if key in changed:
                own = key in _OWN_EXTRACTOR_PARAMS
                param = key if own else f"extractor_params[{key!r}]"
                raise SettingChangedError(
                    type(self).__name__, param, current[key], changed[key]
                )
        if changed:
            extractor.set_params(**changed)

    def _predictor(self):
        """``pipeline_``, or with a ``cache`` its every-layer twin, which reads
        and fills the entries a search's fits reuse (one forward pass per
        input in all)."""
        check_is_fitted(self)
        self._sync_extractor()
        if self.cache is None:
            return self.pipeline_
        extractor = self.pipeline_[0]
        every = extractor._with_layers(np.arange(extractor.n_model_layers_))
        return Pipeline([("extractor", every), *self.pipeline_.steps[1:]])
