"""Content-addressed on-disk cache of pooled hidden states, one ``.npy`` per sample.

Layout: ``<folder>/<settings digest>/<key[:2]>/<key>.npy``. The settings digest
covers the model identity (a hash of its weights, config and processor files),
pooling, ``max_length``, the resolved layers and the output dtype; the key is a
hash of one input's content. Entries are plain ``.npy`` files (no pickle),
written to a temporary name and renamed, so a half-written entry is never read.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

_FORMAT = 1
_HASHED_SUFFIXES = (".json", ".safetensors", ".txt", ".model", ".tiktoken", ".py")
_FILE_DIGESTS: dict = {}  # (path, size, mtime_ns) -> sha256 hex, per process
_CHUNK = 1 << 24


def _file_digest(path: str) -> str:
    stat = os.stat(path)
    memo = (path, stat.st_size, stat.st_mtime_ns)
    if memo not in _FILE_DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
        _FILE_DIGESTS[memo] = digest.hexdigest()
    return _FILE_DIGESTS[memo]


def model_fingerprint(path: str) -> str:
    """Hash of the weights, config and processor files of a model folder.

    Each file's hash is memoised per process on (path, size, mtime), so clones
    of an estimator pay for hashing the weights once.
    """
    digest = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith(_HASHED_SUFFIXES) and os.path.isfile(full):
            digest.update(name.encode())
            digest.update(_file_digest(full).encode())
    return digest.hexdigest()


def content_key(item) -> str:
    """Hash of one raw input: a string, or an array's dtype, shape and bytes."""
    if isinstance(item, str):
        return hashlib.sha256(b"s" + item.encode("utf-8", "surrogatepass")).hexdigest()
    array = np.ascontiguousarray(np.asarray(item))
    head = f"a{array.dtype.str}{array.shape}".encode()
    return hashlib.sha256(head + array.tobytes()).hexdigest()


def _atomic_save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.lib.format.write_array(handle, array, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        self.digest = hashlib.sha256(blob.encode()).hexdigest()[:32]
        self.root = Path(folder) / self.digest
        self.settings = blob
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.zeros(self.shape, self.dtype))
        self._header = buffer.getvalue()[: -np.zeros(self.shape, self.dtype).nbytes]
        self._nbytes = int(np.prod(self.shape)) * self.dtype.itemsize

    def path(self, key: str) -> Path:
        """Where the entry of content key ``key`` lives."""
        return self.root / key[:2] / f"{key}.npy"

    def read(self, key: str):
        """The entry of ``key``, or None when absent or unreadable."""
        try:
            with open(self.path(key), "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        head = len(self._header)
        if len(data) == head + self._nbytes and data[:head] == self._header:
            return np.frombuffer(data, self.dtype, offset=head).reshape(self.shape)
        try:  # a valid .npy written differently (other numpy version)
            array = np.load(self.path(key), allow_pickle=False)
        except (OSError, ValueError):
            return None
        return array if array.shape == self.shape else None

    def write(self, key: str, array: np.ndarray) -> None:
        """Store one entry atomically (temporary file, then rename)."""
        if not self.root.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            settings = self.root / "settings.json"
            if not settings.exists():
                fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
                with os.fdopen(fd, "w") as handle:
                    handle.write(self.settings)
                os.replace(tmp, settings)
        _atomic_save(self.path(key), np.ascontiguousarray(array, dtype=self.dtype))

    def output_path(self, keys) -> Path:
        """File for a memory-mapped output assembling ``keys`` in order."""
        digest = hashlib.sha256("".join(keys).encode()).hexdigest()[:32]
        return self.root / "outputs" / f"{digest}.npy"


def open_output(path: Path, shape, dtype):
    """A writable memory-mapped ``.npy`` at a temporary name next to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    os.close(fd)
    return tmp, np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)


def publish_output(tmp: str, array, path: Path):
    """Flush a memory-mapped output, rename it into place and reopen read-only."""
    array.flush()
    del array
    os.replace(tmp, path)
    return np.load(path, mmap_mode="r", allow_pickle=False)
