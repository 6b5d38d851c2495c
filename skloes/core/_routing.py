"""Metadata routing: ``groups`` (and ``sample_weight``) to every inner splitter.

scikit-learn's metadata routing (``sklearn.set_config(enable_metadata_routing=
True)``) is how ``groups`` reach the splitters inside an estimator. The
estimators of skloes that cross-validate inside ``fit`` (the CV selectors, the
probes' selector, the report) build their routing here: :func:`router_of`
states what ``fit`` routes to whom, :func:`route_fit` routes it (scikit-learn's
:func:`~sklearn.utils.metadata_routing.process_routing` with routing on; by
hand, ``groups`` only, with it off, as ``RFECV`` does), and
:func:`check_groups` makes a grouped splitter without groups a clear error.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import inspect
from numbers import Integral

import numpy as np
import sklearn
from sklearn.model_selection import (
    GroupKFold,
    StratifiedGroupKFold,
    check_cv,
)
from sklearn.utils import Bunch
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    get_routing_for_object,
    process_routing,
)

__all__ = [
    "check_groups",
    "check_groups_array",
    "fit_takes",
    "grouped_splitter",
    "refuse_sample_weight",
    "route_fit",
    "router_of",
    "routing_enabled",
    "routing_splitter",
    "splitter_wants_groups",
]

_METHODS = ("fit", "split", "score", "predict", "transform", "partial_fit")


def routing_enabled() -> bool:
    """Whether ``sklearn.set_config(enable_metadata_routing=True)`` is on."""
    return bool(sklearn.get_config().get("enable_metadata_routing", False))


def _name(owner) -> str:
    return owner if isinstance(owner, str) else type(owner).__name__


def router_of(owner, children, splitter=None, scorer=None, callers=("fit",)):
    """The routing of ``owner.fit``: to each child's ``fit``, the splitter's
    ``split`` and the scorer's ``score``.

    Parameters
    ----------
    owner : estimator instance
        The router.
    children : dict of str to estimator
        Fitted inside ``owner.fit`` with its metadata (``fit`` to ``fit``).
    splitter : cross-validation splitter or None, default=None
        Split inside ``owner.fit`` (``fit`` to ``split``).
    scorer : scorer or None, default=None
        Scores inside ``owner.fit`` (``fit`` to ``score``).
    callers : tuple of str, default=("fit",)
        The methods of ``owner`` that fit the children (a transformer's
        ``fit_transform`` too, which a ``ColumnTransformer`` calls).

    Returns
    -------
    router : sklearn.utils.metadata_routing.MetadataRouter
    """
    router = MetadataRouter(owner=owner)
    for name, child in children.items():
        router.add(**{name: child}, method_mapping=_mapping(callers, "fit"))
    if splitter is not None:
        router.add(splitter=splitter, method_mapping=_mapping(callers, "split"))
    if scorer is not None:
        router.add(scorer=scorer, method_mapping=_mapping(callers, "score"))
    return router


def _mapping(callers, callee):
    mapping = MethodMapping()
    for caller in callers:
        mapping.add(caller=caller, callee=callee)
    return mapping


def fit_takes(child, name: str = "groups") -> bool:
    """Whether ``child.fit`` uses the metadata ``name``.

    With routing on, whether ``child`` requests it (a router asks for what
    its children and splitter request); with routing off, whether its
    ``fit`` accepts it (by name, or ``**params``).
    """
    if routing_enabled():
        return bool(get_routing_for_object(child).consumes("fit", [name]))
    fit = getattr(child, "fit", None)
    if fit is None:
        return False
    params = inspect.signature(fit).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def check_groups_array(groups, n_samples, owner):
    """``groups`` as an array of one group per sample, or None.

    Parameters
    ----------
    groups : array-like of shape (n_samples,) or None
        The group of each sample.
    n_samples : int
        Number of samples.
    owner : str
        Named in the errors.

    Returns
    -------
    groups : ndarray of shape (n_samples,) or None
    """
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.ndim != 1 or groups.shape[0] != n_samples:
        raise ValueError(
            f"{owner}: `groups` must hold one group per sample ({n_samples}); got "
            f"shape {groups.shape}."
        )
    missing = [i for i, g in enumerate(groups) if g is None or g != g]  # NaN
    if missing:
        raise ValueError(
            f"{owner}: `groups` must name a group for every sample; sample "
            f"{missing[0]} has none ({_plain(groups[missing[0]])!r})."
        )
    if len(np.unique(groups.astype(str) if groups.dtype == object else groups)) < 2:
        raise ValueError(
            f"{owner}: `groups` must hold at least 2 groups to split by them; "
            f"got only {_plain(groups[0])!r}."
        )
    return groups


def _plain(value):
    """A numpy scalar as the Python value it holds (``0.0``, not
    ``np.float64(0.0)``), for messages."""
    return value.item() if isinstance(value, np.generic) else value


def route_fit(owner, params, children=None, splitter=False, method="fit"):
    """Route the metadata ``params`` of ``owner.fit``.

    With routing enabled, scikit-learn validates and routes them
    (:func:`~sklearn.utils.metadata_routing.process_routing`): a value no
    child requested is an error there. With routing off, only ``groups`` is
    accepted, as scikit-learn's own CV estimators accept it: it goes to the
    splitter (when ``splitter``) and to each child whose ``fit`` takes it;
    any other metadata is an error that names it.

    Parameters
    ----------
    owner : estimator instance
        The router (it implements ``get_metadata_routing``).
    params : dict
        The metadata ``fit`` was given (None values dropped).
    children : dict of str to estimator or None, default=None
        The children, named as in ``owner.get_metadata_routing()``; without
        routing, ``groups`` goes to those whose ``fit`` takes it.
    splitter : bool, default=False
        Whether ``owner`` splits rows itself (a ``splitter`` entry).
    method : str, default="fit"
        The method of ``owner`` routing them (``"fit_transform"`` too).

    Returns
    -------
    routed : Bunch
        ``routed[name][method]`` is the dict of metadata of that call (empty
        when none), for every child, ``"splitter"`` and ``"scorer"``.
    """
    params = {k: v for k, v in params.items() if v is not None}
    if routing_enabled():
        return process_routing(owner, method, **params)
    extra = sorted(set(params) - {"groups"})
    if extra:
        raise TypeError(
            f"{_name(owner)}.fit: `{extra[0]}` reaches the inner estimators only "
            "with scikit-learn's metadata routing: call "
            "sklearn.set_config(enable_metadata_routing=True) and request it "
            f"(set_fit_request({extra[0]}=True) on the estimator that uses it)."
        )
    return _manual(owner, params.get("groups"), dict(children or {}), splitter)


def _manual(owner, groups, children, splitter):
    empty = {m: {} for m in _METHODS}
    routed = Bunch(**{name: Bunch(**empty) for name in [*children, "splitter"]})
    routed["scorer"] = Bunch(**empty)
    if groups is None:
        return routed
    takers = [name for name, child in children.items() if fit_takes(child)]
    if not takers and not splitter:
        raise TypeError(
            f"{_name(owner)}.fit: `groups` is used by no inner splitter here "
            f"(the {', '.join(children) or 'estimator'} takes none); group "
            "the rows with a selector that cross-validates (LOESSelectorCV, "
            "BestSingleLayerSelector...), or drop `groups`."
        )
    for name in takers:
        routed[name]["fit"] = {"groups": groups}
    if splitter:
        routed["splitter"]["split"] = {"groups": groups}
    return routed


def grouped_splitter(cv, y, classifier, groups, owner, param="cv"):
    """The splitter of a ``cv`` parameter, grouped when ``groups`` are given.

    With ``groups``, a number of folds (an int, or None for 5) becomes that
    many grouped folds (``StratifiedGroupKFold`` for a classifier, else
    ``GroupKFold``), so that no group is on both sides of a split; a splitter
    object is kept as given. A splitter that splits by groups and gets none is
    an error naming ``groups`` (:func:`check_groups`).

    Parameters
    ----------
    cv : int, cross-validation generator, iterable or None
        The estimator's ``cv``.
    y : array-like
        The targets (stratification).
    classifier : bool
        Whether the folds are stratified by class.
    groups : array-like or None
        The group of each sample.
    owner : estimator instance or str
        Named in the errors.
    param : str, default="cv"
        The parameter's name.

    Returns
    -------
    splitter : cross-validation generator
    """
    if groups is not None and (cv is None or isinstance(cv, Integral)):
        n_splits = 5 if cv is None else int(cv)
        values = np.asarray(groups)
        n_groups = len(
            np.unique(values.astype(str) if values.dtype == object else values)
        )
        if n_splits > n_groups:
            raise ValueError(
                f"{_name(owner)}: `{param}`={n_splits} grouped folds need at least "
                f"{n_splits} groups; `groups` holds {n_groups}. Lower `{param}` "
                "or pass more groups."
            )
        return (StratifiedGroupKFold if classifier else GroupKFold)(n_splits)
    splitter = check_cv(cv, y, classifier=classifier)
    check_groups(splitter, groups, owner, param)
    return splitter


def routing_splitter(cv):
    """The splitter a router declares for ``cv``: a number of folds asks for
    ``groups`` (it becomes grouped when they come, see :func:`grouped_splitter`).
    """
    if cv is None or isinstance(cv, Integral):
        return GroupKFold(5 if cv is None else int(cv))
    return check_cv(cv)


def refuse_sample_weight(params, owner, why):
    """A one-line error when ``sample_weight`` reached an estimator that cannot
    weigh rows (``why`` says what)."""
    if params.get("sample_weight") is not None:
        raise ValueError(
            f"{_name(owner)}: `sample_weight` cannot be honoured: {why}; request "
            "it on the estimator after this one instead."
        )


def splitter_wants_groups(cv) -> bool:
    """Whether a splitter's ``split`` needs ``groups`` (GroupKFold and kin)."""
    request = getattr(cv, "_get_metadata_request", None)
    if request is None:
        return False
    wanted = request().split.requests.get("groups")
    return wanted is True


def check_groups(cv, groups, owner, param="cv"):
    """A grouped splitter that gets no ``groups`` is an error naming it.

    Parameters
    ----------
    cv : cross-validation splitter
        The splitter (after :func:`~sklearn.model_selection.check_cv`).
    groups : array-like or None
        The groups that reached it.
    owner : estimator instance or str
        Named in the message.
    param : str, default="cv"
        The parameter that holds the splitter.
    """
    if groups is None and splitter_wants_groups(cv):
        raise ValueError(
            f"{_name(owner)}: `{param}`={type(cv).__name__} splits by groups, but no "
            "`groups` reached it; pass fit(X, y, groups=groups) (inside another "
            "estimator, with sklearn.set_config(enable_metadata_routing=True))."
        )
