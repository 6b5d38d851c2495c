"""The methods a report compares, by name, and the selector each one is.

LOES and the baselines (last layer, best single layer, last k, all layers,
the top-k layers by dataset entropy) are each a layer selector of
:mod:`skloes.selection`; :func:`method_selector` builds the one a name
stands for, as :class:`~skloes.report.LayerReport` scores it and as
``skloes probe --save`` refits the recommended one.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from sklearn.base import clone

import skloes.selection as selection

__all__ = ["BASELINES", "DEFAULT_BASELINES", "FIXED", "method_selector"]

BASELINES = ("last_layer", "best_single_layer", "last_k", "all_layers", "entropy_top_k")
DEFAULT_BASELINES = ("last_layer", "best_single_layer", "last_k", "all_layers")
# Methods whose layers do not depend on the rows: nested selection picks the
# same layers in every fold, so they are scored as fixed layers (same numbers).
FIXED = ("last_layer", "last_k", "all_layers")


def method_selector(method, k, random_state, selector=None, inner_cv=5, task="auto"):
    """The unfitted selector of a method (``"loes"`` or a baseline).

    Every selector reads the layout from the marked flat table it is fitted on
    (see :ref:`data_contract`), so none needs ``layer_dim``.

    Parameters
    ----------
    method : str
        ``"loes"`` or one of :data:`BASELINES`.
    k : int or "auto"
        The LOES budget and the last-k baseline's k; ``"auto"`` makes LOES a
        ``LOESSelectorCV``.
    random_state : int, RandomState instance or None
        Seeds the selector.
    selector : estimator or None, default=None
        The report's own LOES selector, cloned for ``"loes"``.
    inner_cv : int or cross-validation splitter, default=5
        The best single layer's own folds.
    task : {"auto", "classification", "regression"}, default="auto"
        Given to the selectors that take a ``task`` and were left at
        ``"auto"``.

    Returns
    -------
    selector : estimator
        Unfitted.
    """
    return _with_task(_make(method, k, random_state, selector, inner_cv), task)


def _with_task(est, task):
    params = est.get_params(deep=False)
    if task != "auto" and params.get("task", None) == "auto":
        est.set_params(task=task)
    return est


def _make(method, k, random_state, selector, inner_cv):
    if method == "loes":
        if selector is not None:
            return clone(selector)
        if k == "auto":
            return selection.LOESSelectorCV(
                selector=selection.LOESSelector(random_state=random_state)
            )
        return selection.LOESSelector(n_layers_to_select=k, random_state=random_state)
    make = {
        "last_layer": lambda: selection.LastLayerSelector(),
        "best_single_layer": lambda: selection.BestSingleLayerSelector(
            cv=inner_cv, random_state=random_state
        ),
        "last_k": lambda: selection.LastKSelector(n_layers_to_select=k),
        "all_layers": lambda: selection.AllLayersSelector(),
        "entropy_top_k": lambda: selection.MetricTopKSelector(
            metric="dataset_entropy", n_layers_to_select=k
        ),
    }
    return make[method]()
