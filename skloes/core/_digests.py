"""Hashes: a setting as canonical JSON, and file hashes that survive the process.

A setting (a store's settings, a cache's, an exported head's entry) is hashed
as its canonical JSON (:func:`canonical_json`: sorted keys, no spaces) by
:func:`setting_digest`, the one digest of a setting.

A file's hash, without trusting what a file claims. Hashing a model's
weights (540 MB for SmolLM2-135M in float32) is most of the time a fresh
process spends before it can check a saved probe against its model.
:func:`file_sha256` hashes a file once per process and, across processes,
keeps a record of each hash in a store that only the user can write; a
record is used only while the file's identity and change time are those it
was hashed under:
``(device, inode, size, mtime_ns, ctime_ns)``.

Why this stays sound (the user guide states it, :ref:`probe-fingerprint`): a
file's content cannot change without its inode's change time (ctime) moving
to the current time. Writing to a file, truncating it, or renaming another
file over its name (a new inode) all set a ctime the record does not hold,
and no system call sets ctime back: ``os.utime`` (``touch -d``, ``cp -p``)
sets the access and modification times only, so a same-size copy with the
old mtime, the hole a (size, mtime) key opened, does not match. A record
written within :data:`RACY_SECONDS` of the file's ctime is not stored (a
write in the same clock tick could share the ctime: git's "racily clean"
index entries), and a record is read only from a store file owned by the
user and writable by nobody else, in a folder likewise, so another account
cannot plant a hash. What it does not guard against: someone who can set
the system clock or write the disk's blocks directly (root), who can replace
any check on the machine anyway.

May import: utils, core._atomic.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from skloes.core._atomic import ForeignFile, write_bytes_whole

__all__ = [
    "RACY_SECONDS",
    "canonical_json",
    "digest_store",
    "file_sha256",
    "setting_digest",
]

_CHUNK = 1 << 24
# A hash taken this close to the file's last change is not recorded on disk.
RACY_SECONDS = 2.0
# (path, device, inode, size, mtime_ns, ctime_ns) -> sha256 hex, per process.
_MEMO: dict = {}


def canonical_json(value, default=None) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces (``default`` as
    :func:`json.dumps` takes it)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=default)


def setting_digest(value, length=64, *, spaced=False) -> str:
    """The SHA-256 (hex, its first ``length`` digits) of ``value`` as
    :func:`canonical_json`.

    ``spaced``: hash the JSON with :func:`json.dumps`'s default separators
    (``", "`` and ``": "``) instead, as the hidden-states cache names its
    settings folders since its first version, so that a cache written before
    keeps its entries.
    """
    text = json.dumps(value, sort_keys=True) if spaced else canonical_json(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def digest_store() -> Path:
    """The folder of the hash records: ``$SKLOES_HOME/digests`` (see
    :func:`skloes.models._registry.skloes_home`), or None when
    ``SKLOES_DIGESTS=0`` turns the records off."""
    if os.environ.get("SKLOES_DIGESTS", "1") == "0":
        return None
    if os.environ.get("SKLOES_HOME"):
        home = Path(os.environ["SKLOES_HOME"]).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = Path(base).expanduser() / "skloes"
    return home / "digests"


def file_identity(st) -> list:
    """What a hash record is keyed on: a file's ``os.stat`` identity and
    times ``(device, inode, size, mtime_ns, ctime_ns)``."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _private(st) -> bool:
    """Owned by this user and writable by no one else."""
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return mine and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _record_path(store: Path, path: str) -> Path:
    return store / f"{hashlib.sha256(path.encode()).hexdigest()[:32]}.json"


def _read_record(store, path, identity):
    """The recorded hash of ``path`` for this ``identity``, or None."""
    if store is None:
        return None
    record = _record_path(store, path)
    try:
        if not (_private(os.stat(store)) and _private(os.stat(record))):
            return None
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("path") != path:
        return None
    if data.get("identity") != identity:
        return None
    digest = data.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None


def _write_record(store, path, identity, digest, ctime_ns) -> None:
    """Record a hash (atomically); quietly skipped when the store is not
    writable or the hash may be racy."""
    if store is None or time.time_ns() - ctime_ns < RACY_SECONDS * 1e9:
        return
    try:
        store.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private(os.stat(store)):
            return
        record = {"path": path, "identity": identity, "sha256": digest}
        write_bytes_whole(
            _record_path(store, path),
            json.dumps(record).encode("utf-8"),
            prefix=".tmp-",
            suffix=".json",
            mode=0o600,  # read only from a file writable by no one else
        )
    except (OSError, ForeignFile):
        return


def file_sha256(path) -> str:
    """sha256 (hex) of a file's bytes, hashed once per file version.

    Memoised per process on the file's path, device, inode, size,
    modification and change times, and across processes through a record in
    :func:`digest_store` that is trusted under the same key (see the module
    docstring for why that is sound).

    Parameters
    ----------
    path : str or os.PathLike
        A file.

    Returns
    -------
    digest : str
        64 hex digits.
    """
    path = os.path.abspath(os.fspath(path))
    st = os.stat(path)
    identity = file_identity(st)
    memo = (path, *identity)
    if memo in _MEMO:
        return _MEMO[memo]
    store = digest_store()
    digest = _read_record(store, path, identity)
    if digest is None:
        hasher = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                hasher.update(chunk)
        digest = hasher.hexdigest()
        if file_identity(os.stat(path)) == identity:  # not changed while hashing
            _write_record(store, path, identity, digest, st.st_ctime_ns)
    _MEMO[memo] = digest
    return digest
