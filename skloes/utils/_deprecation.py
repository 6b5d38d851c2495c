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


def warn_renamed(
    owner: str, old: str, new: str, *, what: str = "parameter", stacklevel: int = 3
) -> None:
    """The one FutureWarning of a renamed parameter, attribute or option."""
    warnings.warn(
        f"{owner}: the {what} `{old}` was renamed `{new}` in {RENAMED_IN} and will "
        f"be removed in {REMOVED_IN}; use `{new}` instead.",
        FutureWarning,
        stacklevel=stacklevel,
    )


def _renames(estimator):
    for old, spec in getattr(type(estimator), "_renamed_params", {}).items():
        new, convert = spec if isinstance(spec, tuple) else (spec, None)
        yield old, new, convert


def _is_set(value) -> bool:
    return not (isinstance(value, str) and value == DEPRECATED)


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
        saved = {}
        for old, new, convert in _renames(self):
            value = getattr(self, old)
            if not _is_set(value):
                continue
            value = convert(value) if convert else value
            default = type(self)().get_params(deep=False)[new]
            if getattr(self, new) != default:
                raise ValueError(
                    f"{type(self).__name__}: set `{new}` only; `{old}` is its "
                    f"former name (got {old}={getattr(self, old)!r} and {new}="
                    f"{getattr(self, new)!r})."
                )
            if method.__name__.startswith("fit"):  # once per fit, not per call
                warn_renamed(type(self).__name__, old, new)
            saved[new] = getattr(self, new)
            setattr(self, new, value)
        if not saved:
            return method(self, *args, **kwargs)
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
        new = spec[0] if isinstance(spec, tuple) else spec
        out[old] = [*cls_constraints[new], Hidden(StrOptions({DEPRECATED}))]
    return out


def _doc(renamed: dict) -> str:
    lines = []
    for old, spec in renamed.items():
        new = spec[0] if isinstance(spec, tuple) else spec
        lines += [
            f"    {old} : object, default={DEPRECATED!r}",
            f"        Former name of ``{new}``.",
            "",
            f"        .. deprecated:: {RENAMED_IN}",
            f"           ``{old}`` was renamed ``{new}`` in {RENAMED_IN} and will be",
            f"           removed in {REMOVED_IN}.",
            "",
        ]
    return "\n".join(lines)


def renamed_params(**renamed):
    """Class decorator: the parameters renamed in the last release.

    ``renamed`` maps each former name to its new name (or to ``(new,
    convert)``). The class's ``__init__`` must keep each former name with the
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
