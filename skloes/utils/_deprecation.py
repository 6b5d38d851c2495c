"""Renamed parameters keep working for two releases, with a FutureWarning.

scikit-learn's convention: the former name stays in ``__init__`` with the
default ``"deprecated"``; when a user sets it, the estimator warns (naming the
new name and the release that removes the old one) and uses its value as the
new parameter's. An estimator keeps the former names in its ``__init__`` (default
``"deprecated"``) and declares the renames with the class decorator
:func:`renamed_params`, which records them, gives the former names the new
names' constraints, documents them and wraps the methods that read them.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
import warnings

from skloes.utils._param_validation import Hidden, StrOptions

__all__ = [
    "DEPRECATED",
    "resolved_params",
    "honours_renamed_params",
    "renamed_constraints",
    "renamed_params",
    "warn_renamed",
]

# The methods that read parameters (the others read fitted attributes only),
# wrapped where skloes defines them; scikit-learn's inherited ones call these.
_READERS = ("fit", "fit_transform", "transform")

DEPRECATED = "deprecated"
RENAMED_IN, REMOVED_IN = "0.2", "0.4"

#: Release that removes a name deprecated in each release (two releases later).
_REMOVAL = {"0.2": "0.4", "0.3": "0.5"}


def removed_in(renamed_in: str) -> str:
    """The release that removes a name deprecated in ``renamed_in``."""
    return _REMOVAL[renamed_in]


def warn_renamed(
    owner: str,
    old: str,
    new: str,
    *,
    what: str = "parameter",
    renamed_in: str = RENAMED_IN,
    stacklevel: int = 3,
    note: str = "",
) -> None:
    """The one FutureWarning of a renamed parameter, attribute or option
    (``note`` ends it: what happened to the value)."""
    warnings.warn(
        f"{owner}: the {what} `{old}` was renamed `{new}` in {renamed_in} and will "
        f"be removed in {removed_in(renamed_in)}; use `{new}` instead.{note}",
        FutureWarning,
        stacklevel=stacklevel,
    )


def _spec(spec):
    """``(new, convert, renamed_in)`` of a rename that :func:`renamed_params`
    stores."""
    if not isinstance(spec, tuple):
        return spec, None, RENAMED_IN
    if len(spec) == 2:
        return (*spec, RENAMED_IN)
    return spec


def _renames(estimator):
    for old, spec in getattr(type(estimator), "_renamed_params", {}).items():
        yield (old, *_spec(spec))


def _is_set(value) -> bool:
    return not (isinstance(value, str) and value == DEPRECATED)


def _renamed_values(estimator, *, warn):
    """``{new: value}`` of each renamed parameter set under its former name.

    Setting a former name together with a non-default new name is an error;
    with ``warn``, each one set gives its FutureWarning.
    """
    values = {}
    for old, new, convert, renamed_in in _renames(estimator):
        value = getattr(estimator, old)
        if not _is_set(value):
            continue
        default = type(estimator)().get_params(deep=False)[new]
        if getattr(estimator, new) != default:
            raise ValueError(
                f"{type(estimator).__name__}: set `{new}` only; `{old}` is its "
                f"former name (got {old}={value!r} and {new}="
                f"{getattr(estimator, new)!r})."
            )
        if warn:
            warn_renamed(
                type(estimator).__name__,
                old,
                new,
                renamed_in=renamed_in,
                stacklevel=4,
                note=(
                    f" Its value {value!r} is used as `{new}`, whose own value "
                    f"(the default {default!r}) is ignored."
                ),
            )
        values[new] = _converted(estimator, old, new, value, convert)
    return values


def _converted(estimator, old, new, value, convert):
    """The former name's value as the new parameter takes it; a value the
    conversion cannot take is an error naming the former name."""
    if convert is None:
        return value
    try:
        return convert(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{type(estimator).__name__}: `{old}` (the former name of `{new}`) "
            f"must be a value `{new}` takes; got {old}={value!r}."
        ) from None


def resolved_params(estimator, *, warn=True):
    """``get_params(deep=False)`` with each former name's value under its new
    name, and without the former names."""
    params = estimator.get_params(deep=False)
    params.update(_renamed_values(estimator, warn=warn))
    for old, *_ in _renames(estimator):
        params.pop(old)
    return params


def honours_renamed_params(method):
    """Run ``method`` with each renamed parameter the user set under its old name.

    For the duration of the call the new parameter holds the old one's value
    (converted when the rename says how); ``fit`` and ``fit_*`` warn once per
    name, other methods honour the old name silently. Both are restored
    afterwards, so ``get_params`` never changes. Setting a
    former name together with a non-default new name is an error.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if "_renames_applied" in vars(self):  # inside an outer wrapped call
            return method(self, *args, **kwargs)
        # once per fit, not per call
        values = _renamed_values(self, warn=method.__name__.startswith("fit"))
        if not values:
            return method(self, *args, **kwargs)
        saved = {new: getattr(self, new) for new in values}
        for new, value in values.items():
            setattr(self, new, value)
        vars(self)["_renames_applied"] = True
        try:
            return method(self, *args, **kwargs)
        finally:
            del vars(self)["_renames_applied"]
            for new, value in saved.items():
                setattr(self, new, value)

    wrapper._honours_renames = True
    return wrapper


def renamed_constraints(cls_constraints: dict, renamed: dict) -> dict:
    """``cls_constraints`` plus each former name, constrained as its new name."""
    out = dict(cls_constraints)
    for old, spec in renamed.items():
        new = _spec(spec)[0]
        out[old] = [*cls_constraints[new], Hidden(StrOptions({DEPRECATED}))]
    return out


def _doc(renamed: dict) -> str:
    lines = []
    for old, spec in renamed.items():
        new, _, since = _spec(spec)
        lines += [
            f"    {old} : object, default={DEPRECATED!r}",
            f"        Former name of ``{new}``.",
            "",
            f"        .. deprecated:: {since}",
            f"           ``{old}`` was renamed ``{new}`` in {since} and will be",
            f"           removed in {removed_in(since)}.",
            "",
        ]
    return "\n".join(lines)


def renamed_params(**renamed):
    """Class decorator: the parameters renamed in the last release.

    ``renamed`` maps each former name to its new name (or to ``(new,
    convert)``, or ``(new, convert, renamed_in)`` for a rename of a later
    release than 0.2). The class's ``__init__`` must keep each former name with the
    default ``"deprecated"``. The decorator records the renames, adds the
    former names to ``_parameter_constraints``, documents them at the end of
    the Parameters section, and wraps skloes' ``fit``, ``fit_transform`` and
    ``transform`` with :func:`honours_renamed_params`.
    """

    def decorate(cls):
        cls._renamed_params = {**getattr(cls, "_renamed_params", {}), **renamed}
        cls._parameter_constraints = renamed_constraints(
            cls._parameter_constraints, renamed
        )
        for name in _READERS:
            method = getattr(cls, name, None)
            if (
                method is not None
                and method.__module__.startswith("skloes")
                and not getattr(method, "_honours_renames", False)
            ):
                setattr(cls, name, honours_renamed_params(method))
        if cls.__doc__ and "\n    Attributes\n" in cls.__doc__:
            head, tail = cls.__doc__.split("\n    Attributes\n", 1)
            cls.__doc__ = (
                head.rstrip("\n") + "\n\n" + _doc(renamed) + "\n    Attributes\n" + tail
            )
        return cls

    return decorate
