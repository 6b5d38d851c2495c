"""A sealed folder: files named and hashed in one JSON manifest, written whole.

A layer store (``_manifest.json``) and a saved probe (``manifest.json``) are
both folders whose manifest records what the writer put there, each file
with its SHA-256. This module holds what the two share: reading the manifest
(:func:`read_manifest`, failing in the caller's words), writing it whole
(:func:`write_manifest`), hashing the recorded files (:func:`file_hashes`)
and telling which no longer hash as recorded (:func:`changed_files`,
:func:`as_recorded`). What a manifest must hold, and how its errors read,
stay with the folder's owner (:mod:`skloes.core._store._format`,
:mod:`skloes.probe_folder`).

One JSON style is written: indented by two, keys in the writer's order, a
final newline. Reading takes any JSON: stores written before this module
are indented by one with sorted keys. A saved probe's manifest keeps the
bytes it always had, which matters: a prediction job's digest hashes every
file of its probe folder, the manifest included.

May import: utils, core._atomic, core._digests.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
from pathlib import Path

from skloes.core._atomic import foreign_problem, write_whole
from skloes.core._digests import file_sha256

__all__ = [
    "as_recorded",
    "changed_files",
    "file_hashes",
    "manifest_text",
    "read_manifest",
    "write_manifest",
]


def read_manifest(folder, name, fail=None):
    """The JSON manifest ``name`` of ``folder``, as parsed.

    Parameters
    ----------
    folder : str or os.PathLike
        The sealed folder.
    name : str
        Its manifest's file name.
    fail : callable or None, default=None
        ``fail(problem, exc)`` returns the exception to raise, in the
        caller's words: ``problem`` is ``"no folder"``, ``"no manifest"``
        (no such regular file) or ``"unreadable"`` (``exc``: the
        ``OSError`` or ``ValueError`` met; else None). None: return None.

    Returns
    -------
    manifest : object
        Whatever the JSON holds; its shape is the caller's to check.
    """
    folder = Path(folder)
    file = folder / name
    problem, detail = "unreadable", None
    if not folder.is_dir():
        problem = "no folder"
    elif not file.is_file():
        problem = "no manifest"
    else:
        try:
            return json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
            detail = exc
    if fail is None:
        return None
    raise fail(problem, detail)


def manifest_text(manifest) -> str:
    """The manifest as written: the one JSON style of a sealed folder."""
    return json.dumps(manifest, indent=2) + "\n"


def write_manifest(folder, name, manifest, prefix=None) -> None:
    """Write ``manifest`` as ``folder/name`` whole (written aside, flushed to
    disk, renamed: :func:`~skloes.core._atomic.write_whole`, whose
    ``prefix`` names the hidden sibling)."""
    text = manifest_text(manifest)
    write_whole(
        Path(folder) / name,
        lambda tmp: tmp.write_text(text, encoding="utf-8"),
        prefix=prefix,
    )


def file_hashes(folder, names) -> dict:
    """``{name: sha256}`` of the files ``names`` in ``folder``, by name."""
    return {name: file_sha256(Path(folder) / name) for name in sorted(names)}


def as_recorded(folder, name, sha256) -> bool:
    """Whether ``folder/name`` is a regular file (not a link) whose bytes hash
    as ``sha256``."""
    path = Path(folder) / name
    return (
        foreign_problem(path) is None
        and path.is_file()
        and (isinstance(sha256, str) and file_sha256(path) == sha256)
    )


def changed_files(folder, hashes, names) -> list:
    """The ``names`` in ``folder`` that cannot be told to be as the writer
    recorded them, sorted: a file whose bytes no longer hash as recorded,
    one recorded without a hash (a manifest edited to list a user's file),
    a symbolic link or a special file. Only a name without its file is not
    changed. A writer replaces or removes none of these."""
    folder = Path(folder)
    return sorted(
        name
        for name in names
        if os.path.lexists(folder / name)
        and not as_recorded(folder, name, hashes.get(name))
    )
