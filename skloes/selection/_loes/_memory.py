"""A LOES path cached on disk (the selector's ``memory``), in a format that
cannot run code.

With a ``memory`` folder (a path, or a :class:`joblib.Memory`'s location)
the prepared layers and each run are cached under a hash of the inputs: a
budget within a cached path is a slice of it, a larger one extends the
longest cached path from its last step (paths are nested), to at least twice
its length, so that a search over budgets ``1..K`` extends a path about
``log2(K)`` times.

The results are stored as ``.npz`` archives of their arrays and a JSON
structure (:mod:`skloes.core._safe_state`, under
``<memory>/skloes_loes/<hash>/``) and read back with pickling off,
constructing only the classes of :data:`RESULT_CLASSES` (and numpy arrays and
builtins): nothing is unpickled, so a result planted in a shared folder
cannot run code (joblib's own cache reads its results with pickle). Each
result records the hash and the budget it was stored under: one copied into
the folder of other inputs is not served. A result that cannot be
read (truncated, garbage, another type, a type not on the list, an array
not of the dtype, shape or finiteness it was written with, or not of the
shapes and indices this stack asks for: :func:`path_problem`) is removed
with a warning naming ``memory`` and computed again; an OS error of the
folder itself (a file, a folder that cannot be written) is an error naming
``memory``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import warnings
from pathlib import Path

import joblib
import numpy as np
from sklearn.utils.validation import check_memory

from skloes.core._atomic import write_bytes_whole
from skloes.core._safe_state import dumps_state, loads_state
from skloes.selection._base import resolve_n_layers
from skloes.selection._loes._config import LOESConfig
from skloes.selection._loes._fused import FusedObjective, FusedRidge
from skloes.selection._loes._path import LOESPath, PreparedPath, loes_path
from skloes.selection._loes._prepare import PreparedLayers, _Layer
from skloes.selection._loes._residual import ResidualObjective
from skloes.selection._loes._span import RidgeSpan, Span
from skloes.selection._loes._terms import ScoreTerms

# The classes a cached result is made of: reading one back constructs these
# (and numpy arrays and builtins), nothing else.
RESULT_CLASSES = (
    LOESConfig,
    LOESPath,
    PreparedPath,
    PreparedLayers,
    _Layer,
    ScoreTerms,
    FusedObjective,
    FusedRidge,
    ResidualObjective,
    Span,
    RidgeSpan,
)
STORE_FOLDER = "skloes_loes"


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
    store = ResultStore(memory.location, owner)
    hit = None
    for k in range(stack.shape[0], 0, -1):
        hit = store.get(key, f"run-{k}", LOESPath, lambda p: path_problem(p, stack))
        if hit is not None:
            break
    if hit is not None:
        n = _budget(n_select, hit.candidates, hit.degenerate_layers, stack, owner, clip)
        if hit.selection_order.size >= n or hit.complete:
            return hit.truncate(n)
    path = store.fetch(
        key,
        "prepared",
        PreparedPath,
        lambda: PreparedPath(stack, y, cfg, random_state, owner),
        lambda p: prepared_problem(p, stack),
    )
    n = path.budget(n_select, stack.shape, clip)
    if hit is not None:  # extend ahead (doubling): a budget search asks for more
        n_run = min(len(path.candidates), max(n, 2 * hit.selection_order.size))
        run = store.fetch(key, f"run-{n_run}", LOESPath, lambda: path.run(n_run, hit))
        return run.truncate(n)
    return store.fetch(key, f"run-{n}", LOESPath, lambda: path.run(n, None))


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


class ResultStore:
    """The cached results of the LOES path in a ``memory`` folder.

    Parameters
    ----------
    location : str or os.PathLike
        The ``memory`` folder.
    owner : str
        The estimator's name, for the warnings.
    """

    def __init__(self, location, owner):
        self.root = Path(location) / STORE_FOLDER
        self.owner = owner

    def file(self, key, name):
        """Where the result ``name`` of the inputs hashed to ``key`` lives."""
        return self.root / key / f"{name}.npz"

    def get(self, key, name, expected, check=None):
        """The result, or None when absent; an unreadable one (or not an
        ``expected``, or one ``check(result)`` finds a problem with) is
        removed with a warning and is None too."""
        file = self.file(key, name)
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            return None
        try:
            stored = loads_state(data, RESULT_CLASSES)
            value = stored["result"]
            why = (
                "it belongs to other inputs or another budget"
                if (stored["key"], stored["name"]) != (key, name)
                else f"a {type(value).__name__}, not a {expected.__name__}"
                if not isinstance(value, expected)
                else None
                if check is None
                else check(value)
            )
        except Exception as exc:  # garbage, a class not on the list, a pickle
            why = f"{type(exc).__name__}: {exc}"
        if why is None:
            return value
        warnings.warn(
            f"{self.owner}: a result cached in `memory` ({file}) could not be read "
            f"({why[:200]}); it is removed and computed again.",
            UserWarning,
            stacklevel=4,
        )
        file.unlink(missing_ok=True)
        return None

    def put(self, key, name, value):
        """Store ``value`` whole (:func:`~skloes.core._atomic.write_whole`;
        not flushed to disk: a result a crash loses is computed again)."""
        file = self.file(key, name)
        file.parent.mkdir(parents=True, exist_ok=True)
        data = {"key": key, "name": name, "result": value}
        stored = dumps_state(data, RESULT_CLASSES)
        write_bytes_whole(file, stored, prefix=".tmp-", suffix=".part", durable=False)
        return value

    def fetch(self, key, name, expected, compute, check=None):
        """The cached result, else ``compute()`` stored."""
        value = self.get(key, name, expected, check)
        return value if value is not None else self.put(key, name, compute())


def _index_problem(name, array, high, ndim=1):
    """Why ``array`` is not an ``ndim``-D integer array of indices below
    ``high``, or None."""
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "iu":
        return f"{name} is not an integer array"
    if array.ndim != ndim:
        return f"{name} has {array.ndim} dimension(s), not {ndim}"
    if array.size and (array.min() < 0 or array.max() >= high):
        return f"{name} holds indices outside 0..{high - 1}"
    return None


def _float_problem(name, array, shape, finite=True):
    """Why ``array`` is not a float array of ``shape`` (None: any size on that
    axis), finite where ``finite``, or None."""
    if not isinstance(array, np.ndarray) or array.dtype.kind != "f":
        return f"{name} is not a float array"
    if len(shape) != array.ndim or any(
        n is not None and n != m for n, m in zip(shape, array.shape, strict=True)
    ):
        return f"{name} has shape {array.shape}"
    if finite and not np.isfinite(array).all():
        return f"{name} holds NaN or inf"
    return None


def path_problem(path, stack):
    """Why a cached :class:`LOESPath` is not a path over ``stack`` (its
    indices, dtypes and shapes), or None."""
    n_layers, n_samples, dim = stack.shape
    order, k = path.selection_order, np.size(path.selection_order)
    rows = np.size(path.calibration_indices)
    problems = [
        _index_problem("selection_order", order, n_layers),
        _index_problem("candidates", path.candidates, n_layers),
        _index_problem("degenerate_layers", path.degenerate_layers, n_layers),
        _index_problem("calibration_indices", path.calibration_indices, n_samples),
        _float_problem("layer_mean", path.layer_mean, (n_layers, dim)),
        _float_problem("layer_scale", path.layer_scale, (n_layers,), finite=False),
        _float_problem("isotropy", path.isotropy, (n_layers,), finite=False),
    ]
    if path.triplets is not None:
        problems.append(_index_problem("triplets", path.triplets, rows, ndim=2))
    if path.step_fits is not None or path.residual is not None:
        problems += [
            _float_problem("step_fits", path.step_fits, (k, rows, None)),
            _float_problem("residual", path.residual, (rows, None)),
        ]
    if not isinstance(path.scores, dict):
        problems.append("scores is not a table")
    else:
        problems += [
            f"scores[{key!r}] has shape {np.shape(value)}, not ({k}, {n_layers})"
            for key, value in path.scores.items()
            if not isinstance(value, np.ndarray) or value.shape != (k, n_layers)
        ]
    if not problems[0] and (
        len(set(order.tolist())) != k or not np.isin(order, path.candidates).all()
    ):
        problems.append("selection_order repeats a layer or picks no candidate")
    return next((p for p in problems if p), None)


def prepared_problem(path, stack):
    """Why a cached :class:`PreparedPath` is not prepared from ``stack``, or
    None (its arrays are checked against their record on reading)."""
    prep = getattr(path, "prep", None)
    if not isinstance(prep, PreparedLayers):
        return "it holds no prepared layers"
    n_layers, n_samples, dim = stack.shape
    problems = [
        _index_problem("rows", prep.rows, n_samples),
        _index_problem("candidates", np.asarray(prep.candidates), n_layers),
        _float_problem("layer_mean", prep.layer_mean, (n_layers, dim)),
        None if len(prep.layers) == n_layers else "layers is not one per layer",
    ]
    if getattr(prep, "Y", None) is not None:
        problems.append(_float_problem("Y", prep.Y, (np.size(prep.rows), None)))
    return next((p for p in problems if p), None)


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
    if isinstance(memory, os.PathLike):  # a pathlib.Path, as every folder here
        memory = os.fspath(memory)
    try:
        return check_memory(memory)
    except OSError as exc:
        raise memory_error(exc, memory, owner) from None
