"""The driver's side of a sharded job: its manifest, resuming, and records.

A job writes one Parquet file per shard into its folder (a layer store, or the
parts of a prediction file) through :func:`~skloes.core._store.write_shard`,
and the driver records each finished shard in the folder's manifest. Run
again, the job skips the shards the manifest records whose file still hashes
as recorded, adopts the shards a killed driver wrote but did not record (when
their Parquet footer names this job, this shard and this input), and hands
the rest to the engine.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import resource
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from skloes.core._atomic import WRITER_NOTE, FolderBusy, WriterLock
from skloes.core._digests import file_sha256
from skloes.core._store import (
    MANIFEST_FILE,
    ROW_ID,
    SHARD_PATTERN,
    STORE_FORMAT,
    StoreError,
    is_temporary,
    read_footer,
    read_manifest,
    shard_file,
    write_manifest,
)

__all__ = ["Progress", "ShardJob", "ShardTask", "loaded", "peak_rss"]

# The manifest is rewritten at most this often (seconds) while a job runs; a
# shard written but not yet recorded is adopted by the next run.
MANIFEST_EVERY = 1.0


# What a worker process keeps between tasks and between jobs: the last model
# (or probe) it loaded, of each kind, with the settings that made it.
_LOADED: dict = {}


def loaded(kind, key, factory):
    """The object ``factory()`` made for ``key`` in this process.

    Kept between tasks, so that a worker loads its model once; one object per
    ``kind``, so that a new job's settings (``key``) replace the old object
    instead of piling up models. A job's own paths (its store) stay out of
    the object: they travel with each task's spec.
    """
    held = _LOADED.get(kind)
    if held is None or held[0] != key:
        _LOADED.pop(kind, None)
        _LOADED[kind] = held = (key, factory())
    return held[1]


@dataclass
class ShardTask:
    """One shard to run: its index, its rows and their texts."""

    index: int
    table: object  # pyarrow.Table: row_id, text, the user's columns
    digest: str


def peak_rss() -> int:
    """Peak resident memory of this process, in bytes (Linux: ru_maxrss KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class Progress:
    """A tqdm bar of the rows (quiet when stderr is no terminal, or verbose=0)."""

    def __init__(self, total, verbose):
        self.bar = None
        if verbose:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc="rows", unit="row", disable=None)

    def update(self, n):
        """Count ``n`` more rows done."""
        if self.bar is not None:
            self.bar.update(n)

    def close(self):
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()


class ShardJob:
    """Manifest, resume and records of one job writing shards into ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The job's folder (created if missing).
    manifest : dict
        The manifest a new folder gets; an existing folder's must have the
        same ``digest`` (:meth:`same_job` says what differs otherwise).
    owner : str
        Named in messages.
    fmt : str
        The manifest's ``format``.
    """

    def __init__(self, path, manifest, owner, fmt=STORE_FORMAT):
        self.path, self.owner = Path(path), owner
        self.path.mkdir(parents=True, exist_ok=True)
        try:  # one writer per folder, told at once
            self.lock = WriterLock(self.path)
        except FolderBusy as busy:
            raise StoreError(
                self.path,
                f"is being written by another job ({busy.holder}); one job writes "
                "a folder at a time: wait for it, or stop it and run this again.",
            ) from None
        try:
            self._open(manifest, fmt)
        except BaseException:
            self.release()
            raise
        self.by_index = {e["index"]: e for e in self.manifest["shards"]}
        self._written = time.monotonic()

    def _open(self, manifest, fmt):
        digest = manifest["digest"]
        if (self.path / MANIFEST_FILE).exists():
            self.manifest = read_manifest(self.path, fmt)
            if self.manifest.get("digest") != digest:
                self.same_job(self.manifest, manifest)
                raise StoreError(self.path, "was written by another job.")
        else:
            stray = [
                p.name
                for p in self.path.iterdir()
                if not is_temporary(p.name, digest) and p.name != WRITER_NOTE
            ]
            if stray:
                raise StoreError(
                    self.path,
                    f"the folder holds {stray[0]!r} but no manifest of this job; "
                    "give an empty or new folder.",
                )
            self.manifest = manifest
            write_manifest(self.path, manifest)
        self._remove_temporaries()

    def release(self):
        """Release the folder's writer lock."""
        self.lock.release()

    def same_job(self, have, want):
        """Raise an error naming how ``have`` (on disk) differs from ``want``."""

    def _remove_temporaries(self):
        """Remove what a killed writer left (hidden files, never read)."""
        digest = self.manifest["digest"]
        for p in self.path.iterdir():
            if is_temporary(p.name, digest):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)  # a killed job's staging
                elif p.is_file():
                    p.unlink(missing_ok=True)

    def done(self, task) -> bool:
        """Whether shard ``task.index`` is already in the folder, whole."""
        entry = self.by_index.get(task.index)
        if entry is not None:
            if entry.get("input") != task.digest:
                raise StoreError(
                    self.path,
                    f"shard {entry['file']} holds other texts than this input's rows "
                    f"{int(task.table.column(ROW_ID)[0])}.. (the input changed since "
                    "it was written); write into a new folder.",
                )
            file = self.path / entry["file"]
            if file.is_file() and file_sha256(file) == entry.get("sha256"):
                return True
            del self.by_index[task.index]  # damaged or gone: write it again
            return False
        return self._adopt(task)

    def _adopt(self, task) -> bool:
        """A shard written by a killed driver but not recorded: checked, kept."""
        file = self.path / shard_file(task.index)
        footer = read_footer(file) if file.is_file() else None
        if (
            footer is None
            or footer.get("digest") != self.manifest["digest"]
            or footer.get("index") != task.index
            or footer.get("input") != task.digest
            or footer["_rows"] != len(task.table)
        ):
            return False
        self.adopted(file)
        self.by_index[task.index] = {
            "file": file.name,
            "index": task.index,
            "rows": len(task.table),
            "bytes": file.stat().st_size,
            "sha256": file_sha256(file),
            "input": task.digest,
            "first_row": footer["first_row"],
        }
        return True

    def adopted(self, file):
        """Hook: a shard file was adopted."""

    def record(self, result, force=False):
        """Record one finished shard (the manifest is written now and then)."""
        entry = result["record"]
        self.by_index[entry["index"]] = entry
        if force or time.monotonic() - self._written >= MANIFEST_EVERY:
            self.flush()

    def flush(self, complete=False, n_rows=None):
        """Write the manifest with every shard recorded so far."""
        self.manifest["shards"] = [self.by_index[i] for i in sorted(self.by_index)]
        if complete:
            self.manifest["complete"], self.manifest["n_rows"] = True, int(n_rows)
        write_manifest(self.path, self.manifest)
        self._written = time.monotonic()

    def finish(self, n_rows):
        """Mark the job complete once its shards hold every input row."""
        held = sum(e["rows"] for e in self.by_index.values())
        if held != n_rows:
            raise StoreError(
                self.path,
                f"holds {held} rows after the job, not the {n_rows} of the input.",
            )
        stray = sorted(
            p.name
            for p in self.path.iterdir()
            if SHARD_PATTERN.fullmatch(p.name)
            and int(SHARD_PATTERN.fullmatch(p.name).group(1)) not in self.by_index
        )
        if stray:
            raise StoreError(
                self.path,
                f"holds shard file {stray[0]} beyond this input's shards (from a "
                "larger earlier input?); move it away and re-run.",
            )
        self.flush(complete=True, n_rows=n_rows)
