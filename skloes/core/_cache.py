"""Content-addressed on-disk cache of pooled hidden states, one ``.npy`` per sample.

Layout: ``<folder>/<settings digest>/<key[:2]>/<key>.npy``. The settings digest
covers the model identity (a hash of its weights, config and processor files),
pooling, ``max_length``, the resolved layers and the output dtype; the key is a
hash of one input's content. Entries are ``.npy`` files (no pickle) followed
by a 20-byte trailer, ``SKLC`` and a BLAKE2b digest of the settings digest, the
entry's key, header and payload (numpy's readers ignore it), written to a
temporary name and renamed, so a half-written entry is never read. An entry is
served only when its header states this cache's dtype and shape and its digest
matches: anything else (a foreign ``.npy``, finite garbage behind a valid
header, an entry of an older skloes, another input's entry, an entry copied by
hand from the folder of other settings) is a miss, recomputed and rewritten.
The digest guards against accidents and mix-ups, not against a forger: anyone
who can write to the folder can compute it (see :ref:`trust`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import time
import warnings
from pathlib import Path

import numpy as np

from skloes.core._atomic import (
    ForeignFile,
    foreign_problem,
    put_in_place,
    temporary_beside,
    write_bytes_whole,
)
from skloes.core._digests import file_sha256, setting_digest

_FORMAT = 1
# An entry's trailer: this magic, then the BLAKE2b-128 digest of its settings
# digest, its key and everything before it (the .npy header, which holds the
# dtype and shape, and the payload): an entry copied under another key, or
# into the folder of other settings, is a miss too.
_TRAILER_MAGIC = b"SKLC"
_TRAILER_SIZE = len(_TRAILER_MAGIC) + 16
_HASHED_SUFFIXES = (".json", ".safetensors", ".txt", ".model", ".tiktoken", ".py")
_CHUNK = 1 << 24


def model_fingerprint(path: str) -> str:
    """Hash of the weights, config and processor files of a model folder.

    Each file's hash is memoised on its path, device, inode, size,
    modification and change times, per process and across processes (a
    record in the user's own store, :func:`skloes.core._digests.file_sha256`),
    so clones of an estimator and later processes pay for hashing the
    weights once, and a file replaced or rewritten is hashed again.
    """
    digest = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith(_HASHED_SUFFIXES) and os.path.isfile(full):
            digest.update(name.encode())
            digest.update(file_sha256(full).encode())
    return digest.hexdigest()


def content_key(item) -> str:
    """Hash of one raw input: a string, or an array's dtype, shape and bytes."""
    if isinstance(item, str):
        return hashlib.sha256(b"s" + item.encode("utf-8", "surrogatepass")).hexdigest()
    array = np.ascontiguousarray(np.asarray(item))
    head = f"a{array.dtype.str}{array.shape}".encode()
    return hashlib.sha256(head + array.tobytes()).hexdigest()


def _checksum(*chunks) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for chunk in chunks:
        digest.update(chunk)
    return digest.digest()


def _trailer(key: str, *chunks) -> bytes:
    """The trailer of the entry of ``key`` whose bytes are ``chunks``; ``key``
    is :func:`sealed_key` of the settings digest and the content key."""
    return _TRAILER_MAGIC + _checksum(key.encode(), *chunks)


def sealed_key(digest: str, key: str) -> str:
    """What an entry's checksum binds it to: its settings and its content key."""
    return f"{digest}/{key}"


def _atomic_save(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole (:func:`~skloes.core._atomic.write_whole`
    to a ``.tmp-*.part`` that :func:`prune_cache` recognises; not flushed to
    disk: an entry a crash loses is a miss)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_whole(path, data, prefix=".tmp-", suffix=".part", durable=False)


class HiddenStatesCache:
    """Per-sample store of ``(n_layers, dim)`` arrays under one settings digest.

    Parameters
    ----------
    folder : str or os.PathLike
        Root folder, created on demand.
    settings : dict
        JSON-serialisable description of everything that changes the output
        except the input itself.
    shape : tuple of int
        Shape of one entry, ``(n_layers, dim)``.
    dtype : str
        ``"float32"`` or ``"float16"``.
    """

    def __init__(self, folder, settings: dict, shape, dtype):
        blob = json.dumps({"format": _FORMAT, **settings}, sort_keys=True)
        self.digest = setting_digest({"format": _FORMAT, **settings}, 32, spaced=True)
        self.folder = Path(folder)
        self.root = self.folder / self.digest
        self.write_error = None
        self.settings = blob
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._header = _npy_header(self.shape, self.dtype)
        self._nbytes = int(np.prod(self.shape)) * self.dtype.itemsize

    def path(self, key: str) -> Path:
        """Where the entry of content key ``key`` lives."""
        return self.root / key[:2] / f"{key}.npy"

    def read(self, key: str):
        """The entry of ``key``, or None when absent, unreadable or invalid.

        An entry is valid when its ``.npy`` header states this cache's dtype
        and shape, its trailer's digest matches ``key``, the header and the
        payload, and
        its values are all finite (the transformer never stores NaN or inf).
        Anything else (0 bytes, truncated, a foreign ``.npy`` even of the
        right shape, garbage behind a valid header, an entry without a
        trailer, another key's entry) is a miss, recomputed and overwritten
        by the caller.
        """
        if foreign_problem(self.path(key)):  # a link or a pipe: never opened
            return None
        try:
            with open(self.path(key), "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        head, end = len(self._header), len(self._header) + self._nbytes
        if (
            len(data) != end + _TRAILER_SIZE
            or data[:head] != self._header
            or data[end:]
            != _trailer(sealed_key(self.digest, key), memoryview(data)[:end])
        ):
            return None
        array = np.frombuffer(
            data, self.dtype, offset=head, count=self._nbytes // self.dtype.itemsize
        )
        array = array.reshape(self.shape)
        return array if np.isfinite(array).all() else None

    def write(self, key: str, array: np.ndarray) -> None:
        """Store one entry atomically (temporary file, then rename).

        A failure to write (read-only or full disk, folder removed by another
        process) never raises: the first one warns, and later writes through
        this object are skipped. The cache is an optimisation; the caller's
        result stands.
        """
        if self.write_error is not None:
            return
        try:
            self._write(key, array)
        except (OSError, ForeignFile) as exc:
            self.write_error = exc
            warnings.warn(
                f"skloes: cannot write to the hidden-states cache {str(self.folder)!r} "
                f"({exc}); results are computed but not cached for the rest of "
                "this transform.",
                UserWarning,
                stacklevel=3,
            )

    def _write(self, key, array):
        if not self.root.exists():
            self.root.mkdir(parents=True, exist_ok=True)
        settings = self.root / "settings.json"
        if not settings.exists():
            _atomic_save(settings, self.settings.encode())
        payload = np.ascontiguousarray(array, dtype=self.dtype)
        if payload.shape != self.shape:
            raise ValueError(
                f"cache entry of shape {payload.shape}, expected {self.shape}"
            )
        payload = payload.tobytes()
        _atomic_save(
            self.path(key),
            self._header
            + payload
            + _trailer(sealed_key(self.digest, key), self._header, payload),
        )

    def output_path(self, keys) -> Path:
        """File for a memory-mapped output assembling ``keys`` in order."""
        digest = hashlib.sha256("".join(keys).encode()).hexdigest()[:32]
        return self.root / "outputs" / f"{digest}.npy"


def _npy_header(shape, dtype) -> bytes:
    """The ``.npy`` header numpy writes for an array of ``shape`` and ``dtype``."""
    buffer = io.BytesIO()
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": False,
        "shape": tuple(int(s) for s in shape),
    }
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def _file_checksum(key: str, path, size) -> bytes:
    """BLAKE2b digest of ``key`` and the first ``size`` bytes of a file."""
    digest = hashlib.blake2b(key.encode(), digest_size=16)
    with open(path, "rb") as handle:
        left = size
        while left > 0:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.digest()


def _output_key(path: Path) -> str:
    """An output's checksum key: its settings folder and its name, so a file
    copied into the ``outputs`` of other settings is a miss."""
    return sealed_key(path.parent.parent.name, path.stem)


def read_output(path: Path, shape, dtype):
    """A published memory-mapped output of ``shape`` and ``dtype``, or None
    when absent or invalid (its header, size or trailer digest differs)."""
    header = _npy_header(shape, dtype)
    size = len(header) + int(np.prod(shape)) * np.dtype(dtype).itemsize
    if foreign_problem(path):  # a link or a pipe: never opened
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(header))
            handle.seek(size)
            trailer = handle.read()
        digest = _file_checksum(_output_key(path), path, size)
        if head != header or trailer != _TRAILER_MAGIC + digest:
            return None
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None


def open_output(path: Path, shape, dtype):
    """A writable memory-mapped ``.npy`` at a temporary name next to ``path``.

    Returns ``(tmp, array)``; when the folder cannot be written, warns and
    returns ``(None, array in memory)``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temporary_beside(path, prefix=".tmp-", suffix=".part")
        return tmp, np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
    except OSError as exc:
        _warn_output(path, exc)
        return None, np.empty(shape, dtype=dtype)


def publish_output(tmp, array, path: Path):
    """Flush a memory-mapped output, seal it with its trailer, rename it into
    place (:func:`~skloes.core._atomic.put_in_place`) and reopen it read-only.

    With ``tmp=None`` (no memory map) the array is returned as is; a failure to
    flush or rename warns and returns the values in memory.
    """
    if tmp is None:
        return array
    try:
        array.flush()
        size = os.path.getsize(tmp)
        with open(tmp, "ab") as handle:
            handle.write(_TRAILER_MAGIC + _file_checksum(_output_key(path), tmp, size))
        put_in_place(tmp, path, durable=False)
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ForeignFile) as exc:
        _warn_output(path, exc)
        values = np.array(array)
        del array
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return values


def _warn_output(path, exc):
    warnings.warn(
        f"skloes: cannot write the memory-mapped output {str(path)!r} ({exc}); "
        "the result is returned in memory.",
        UserWarning,
        stacklevel=4,
    )


# --------------------------------------------------------------------------
# Size and pruning
# --------------------------------------------------------------------------
_DIGEST = re.compile(r"^[0-9a-f]{32}$")
_ENTRY = re.compile(r"^[0-9a-f]{64}\.npy$")
_STALE_PART_SECONDS = 3600  # a temporary file this old belongs to a dead run


def _cache_files(folder: Path):
    """``(settings folder, file, kind)`` for every file of the cache layout.

    Only files the cache itself writes are listed (entries, memory-mapped
    outputs, ``settings.json`` and temporary ``.part`` files), so pruning a
    folder that holds anything else never touches it.
    """
    if not folder.is_dir():
        return
    for root in sorted(folder.iterdir()):
        if not (root.is_dir() and _DIGEST.match(root.name)):
            continue
        for path in root.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            if path.name.startswith(".tmp-"):
                yield root, path, "part"
            elif path.parent.name == "outputs" and path.suffix == ".npy":
                yield root, path, "output"
            elif _ENTRY.match(path.name) and path.parent.name == path.name[:2]:
                yield root, path, "entry"
            elif path.name == "settings.json" and path.parent == root:
                yield root, path, "settings"


def _check_cache_folder(path, owner):
    folder = Path(os.fspath(path)).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(
            f"{owner}: `path` {os.fspath(path)!r} is a file, not a skloes cache folder."
        )
    return folder


def _read_settings(root: Path):
    try:
        return json.loads((root / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def cache_info(path):
    """Size of a hidden-states cache folder, per settings.

    Every change of model, pooling, ``max_length``, layers or dtype stores a
    full copy of the pooled states under its own settings folder; this says
    how much each one holds, so that :func:`prune_cache` can reclaim space.

    Parameters
    ----------
    path : str or os.PathLike
        The folder passed as ``cache`` to
        :class:`~skloes.extraction.HiddenStatesTransformer`. A folder that does
        not exist is an empty cache.

    Returns
    -------
    info : dict
        ``path``; ``n_entries`` (cached inputs, all settings); ``n_bytes``
        (every file of the cache: entries, memory-mapped outputs, settings and
        leftover temporary files); ``settings``, a list with one dict per
        settings folder: ``digest``, ``settings`` (the model fingerprint,
        pooling, ``max_length``, layers, dtype; None if unreadable),
        ``n_entries``, ``n_bytes``, ``newest`` and ``oldest`` (POSIX
        modification times, None when empty).

    See Also
    --------
    prune_cache : Remove old entries or bound the cache's size.

    Examples
    --------
    >>> import tempfile
    >>> from skloes import cache_info
    >>> cache_info(tempfile.mkdtemp())["n_entries"]
    0
    """
    folder = _check_cache_folder(path, "cache_info")
    groups = {}
    for root, file, kind in _cache_files(folder):
        try:
            stat = file.stat()
        except OSError:  # removed meanwhile by another process
            continue
        group = groups.setdefault(
            root, {"digest": root.name, "n_entries": 0, "n_bytes": 0, "times": []}
        )
        group["n_bytes"] += stat.st_size
        if kind == "entry":
            group["n_entries"] += 1
            group["times"].append(stat.st_mtime)
    settings = []
    for root, group in groups.items():
        times = group.pop("times")
        settings.append(
            {
                **group,
                "settings": _read_settings(root),
                "newest": max(times, default=None),
                "oldest": min(times, default=None),
            }
        )
    return {
        "path": os.fspath(folder),
        "n_entries": sum(s["n_entries"] for s in settings),
        "n_bytes": sum(s["n_bytes"] for s in settings),
        "settings": settings,
    }


def prune_cache(path, *, max_bytes=None, older_than=None):
    """Remove cache entries: those older than ``older_than``, then the oldest.

    Entries are removed oldest first (by the time they were written) until the
    cache holds at most ``max_bytes``. Temporary files that an interrupted run
    left behind are removed once an hour old, and empty folders go too. Only
    files of the cache's own layout are touched; a concurrent transform that
    finds an entry gone recomputes it.

    Parameters
    ----------
    path : str or os.PathLike
        The cache folder.
    max_bytes : int or None, default=None
        Upper bound on the cache's size after pruning; None for no bound.
    older_than : float, datetime.timedelta or None, default=None
        Remove entries written more than this many seconds ago; None keeps
        entries of any age.

    Returns
    -------
    removed : dict
        ``n_entries`` and ``n_bytes`` removed (``n_bytes`` counts every file:
        entries, outputs and temporary files).

    See Also
    --------
    cache_info : How much the cache holds, per settings.

    Examples
    --------
    >>> import tempfile
    >>> from skloes import prune_cache
    >>> prune_cache(tempfile.mkdtemp(), max_bytes=10**9)
    {'n_entries': 0, 'n_bytes': 0}
    """
    folder = _check_cache_folder(path, "prune_cache")
    max_bytes = _check_bound(max_bytes, "max_bytes")
    if hasattr(older_than, "total_seconds"):
        older_than = older_than.total_seconds()
    older_than = _check_bound(older_than, "older_than")
    now = time.time()
    files, removed = [], {"n_entries": 0, "n_bytes": 0}
    for _, file, kind in _cache_files(folder):
        try:
            stat = file.stat()
        except OSError:
            continue
        stale_part = kind == "part" and now - stat.st_mtime > _STALE_PART_SECONDS
        too_old = older_than is not None and now - stat.st_mtime > older_than
        if stale_part or (too_old and kind in ("entry", "output")):
            _remove(file, kind, stat.st_size, removed)
        elif kind != "settings":
            files.append((stat.st_mtime, file, kind, stat.st_size))
    if max_bytes is not None:
        total = cache_info(folder)["n_bytes"]
        for _, file, kind, size in sorted(files, key=lambda f: f[0]):
            if total <= max_bytes:
                break
            if kind != "part":
                total -= _remove(file, kind, size, removed)
    _remove_empty(folder)
    return removed


def _check_bound(value, name):
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.number))
        or not np.isfinite(value)
        or value < 0
    ):
        raise ValueError(
            f"prune_cache: `{name}` must be a non-negative number or None; got "
            f"{value!r}."
        )
    return value


def _remove(file, kind, size, removed):
    try:
        file.unlink()
    except FileNotFoundError:  # another process pruned it first
        return 0
    removed["n_bytes"] += size
    removed["n_entries"] += kind == "entry"
    return size


def _remove_empty(folder):
    """Drop empty shard folders, then settings folders left with no entries."""
    if not folder.is_dir():
        return
    for root in folder.iterdir():
        if not (root.is_dir() and _DIGEST.match(root.name)):
            continue
        for sub in sorted(root.iterdir(), reverse=True):
            if sub.is_dir():
                with contextlib.suppress(OSError):
                    sub.rmdir()  # only when empty
        left = [p for p in root.iterdir() if p.name != "settings.json"]
        if not left:
            with contextlib.suppress(OSError):
                (root / "settings.json").unlink(missing_ok=True)
                root.rmdir()
