"""A selector's ``memory``: joblib's disk cache, robust to what it may find there.

joblib reads a cached result back with pickle. A result it cannot read
(truncated by a full disk, garbage, written by another joblib or numpy) or
that is not what the selector stored is removed with a warning naming
``memory`` and computed again; an OS error of the folder itself (a file, a
folder that cannot be written) is an error naming ``memory``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings

from sklearn.utils.validation import check_memory


def cached_call(func, expected, name, *args, compute=True):
    """``func(*args)`` through a :class:`joblib.Memory` cached function.

    Parameters
    ----------
    func : joblib.memory.MemorizedFunc
        From ``memory.cache(...)``.
    expected : type
        What a valid cached result is an instance of.
    name : str
        The estimator's name, for the warning.
    *args
        The call's arguments.
    compute : bool, default=True
        False: return None instead of computing a result that is not cached
        (or not readable).

    Returns
    -------
    result : object or None
    """
    if func.check_call_in_cache(*args):
        shelved = func.call_and_shelve(*args)  # a reference: nothing read yet
        try:
            value = shelved.get()
            why = (
                None
                if isinstance(value, expected)
                else f"a {type(value).__name__}, not a {expected.__name__}"
            )
        except Exception as exc:  # anything unpickling garbage may raise
            why = f"{type(exc).__name__}: {exc}"
        if why is None:
            return value
        warnings.warn(
            f"{name}: a result cached in `memory` ({func.store_backend.location}) "
            f"could not be read ({why[:200]}); it is removed and computed again.",
            UserWarning,
            stacklevel=3,
        )
        shelved.clear()
    if not compute:
        return None
    return func(*args)


def memory_error(exc: OSError, memory, name: str) -> ValueError:
    """The error of a ``memory`` folder that failed with ``exc``."""
    location = getattr(memory, "location", memory)
    path = exc.filename or location
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        why = f"{path} is a file, not a folder"
    elif isinstance(exc, PermissionError):
        why = f"permission denied on {path}"
    else:
        why = f"{exc.strerror or type(exc).__name__} on {path}"
    return ValueError(
        f"{name}: `memory` folder {str(location)!r} cannot cache the selection "
        f"path: {why}; pass a folder you can write, or memory=None."
    )


def check_selector_memory(memory, name: str):
    """:func:`sklearn.utils.validation.check_memory`, whose OS errors (joblib
    creates the folder) name ``memory``."""
    try:
        return check_memory(memory)
    except OSError as exc:
        raise memory_error(exc, memory, name) from None
