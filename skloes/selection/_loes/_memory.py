"""A LOES path cached on disk (the selector's ``memory``).

With a :class:`joblib.Memory` the prepared layers and each run are cached
under a hash of the inputs: a budget within a cached path is a slice of it, a
larger one extends the longest cached path from its last step (paths are
nested), to at least twice its length, so that a search over budgets ``1..K``
extends a path about ``log2(K)`` times. joblib reads a cached result back with
pickle; a result it cannot read (truncated by a full disk, garbage, written by
another joblib or numpy) or that is not what the selector stored is removed
with a warning naming ``memory`` and computed again; an OS error of the folder
itself (a file, a folder that cannot be written) is an error naming
``memory``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings

import joblib
import numpy as np
from sklearn.utils.validation import check_memory

from skloes.selection._base import resolve_n_layers
from skloes.selection._loes._path import LOESPath, PreparedPath, loes_path


def memory_path(stack, y, n_select, cfg, random_state, owner, memory, clip=False):
    """:func:`~skloes.selection._loes._path.loes_path` through ``memory``.

    ``memory`` is what :func:`check_selector_memory` returned; without a
    location the path is computed as without memory.
    """
    if memory is None or getattr(memory, "location", None) is None:
        return loes_path(stack, y, n_select, cfg, random_state, owner, clip)
    try:
        return _cached_path(stack, y, n_select, cfg, random_state, owner, clip, memory)
    except OSError as exc:  # the folder, not the numbers
        raise memory_error(exc, memory, owner) from None


def _cached_path(stack, y, n_select, cfg, random_state, owner, clip, memory):
    # SHA-1 runs on the CPU's hashing unit: twice MD5's speed on large stacks
    key = joblib.hash((np.asarray(stack), y, cfg, random_state), hash_name="sha1")
    run = memory.cache(_cached_run, ignore=["path", "start"])
    hit = None
    for k in range(stack.shape[0], 0, -1):
        hit = cached_call(run, LOESPath, owner, key, k, None, None, compute=False)
        if hit is not None:
            break
    if hit is not None:
        n = _budget(n_select, hit.candidates, hit.degenerate_layers, stack, owner, clip)
        if hit.selection_order.size >= n or hit.complete:
            return hit.truncate(n)
    prepare = memory.cache(_cached_prepare, ignore=["stack", "y", "owner"])
    path = cached_call(
        prepare, PreparedPath, owner, key, stack, y, cfg, random_state, owner
    )
    n = path.budget(n_select, stack.shape, clip)
    if hit is not None:  # extend ahead (doubling): a budget search asks for more
        n_run = min(len(path.candidates), max(n, 2 * hit.selection_order.size))
        return cached_call(run, LOESPath, owner, key, n_run, path, hit).truncate(n)
    return cached_call(run, LOESPath, owner, key, n, path, None)


def _budget(n_select, candidates, degenerate, stack, owner, clip):
    """The budget of a cached result (its candidates and degenerate layers)."""
    return resolve_n_layers(
        n_select,
        len(candidates),
        owner,
        clip=clip,
        shape=stack.shape,
        degenerate=degenerate,
    )


def _cached_prepare(key, stack, y, cfg, random_state, owner):
    """A :class:`PreparedPath` keyed by ``key`` (the hash of the inputs)."""
    return PreparedPath(stack, y, cfg, random_state, owner)


def _cached_run(key, n_select, path, start):
    """``path.run`` keyed by ``(key, n_select)``; extends ``start``."""
    return path.run(n_select, start)


def cached_call(func, expected, owner, *args, compute=True):
    """``func(*args)`` through a :class:`joblib.Memory` cached function.

    Parameters
    ----------
    func : joblib.memory.MemorizedFunc
        From ``memory.cache(...)``.
    expected : type
        What a valid cached result is an instance of.
    owner : str
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
            f"{owner}: a result cached in `memory` ({func.store_backend.location}) "
            f"could not be read ({why[:200]}); it is removed and computed again.",
            UserWarning,
            stacklevel=3,
        )
        shelved.clear()
    if not compute:
        return None
    return func(*args)


def memory_error(exc: OSError, memory, owner: str) -> ValueError:
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
        f"{owner}: `memory` folder {str(location)!r} cannot cache the selection "
        f"path: {why}; pass a folder you can write, or memory=None."
    )


def check_selector_memory(memory, owner: str):
    """:func:`sklearn.utils.validation.check_memory`, whose OS errors (joblib
    creates the folder) name ``memory``."""
    try:
        return check_memory(memory)
    except OSError as exc:
        raise memory_error(exc, memory, owner) from None
