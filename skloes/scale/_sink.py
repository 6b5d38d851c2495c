"""The output folder of a sharded job: one owner, from start to seal.

A sharded job (extraction to a layer store, batch prediction) writes one
Parquet file per shard of its input into one folder. A :class:`ShardSink`
owns that folder through three steps, the shape of Ray Data's
``FileDatasink``: :meth:`~ShardSink.start` (on the driver) takes the folder's
writer lock, checks the manifest of a folder it resumes or writes the
manifest of a new one, and removes what a killed writer left;
:meth:`~ShardSink.write` (on a worker) writes one shard whole, its Parquet
footer binding it to the job, and returns its manifest record;
:meth:`~ShardSink.complete` (on the driver) checks that the shards hold every
input row and seals the manifest. Between them, :meth:`~ShardSink.done` and
:meth:`~ShardSink.record` make a killed job resume: recorded shards are
verified by their sha256, shards written but not yet recorded are adopted
once their footer names this job, this shard and this input.

:class:`StoreSink` writes a layer store's shards (the format of
:mod:`skloes.core._store`); :class:`PartsSink` the parts of a prediction
file, joined into the one output file when the job completes. Each only
makes its block's table.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np

import skloes.core._sealed as sealed
from skloes.core._atomic import (
    WRITER_NOTE,
    FolderBusy,
    FolderLock,
    ForeignFile,
    write_whole,
)
from skloes.core._digests import file_sha256
from skloes.core._store import (
    FOOTER_KEY,
    MANIFEST_FILE,
    ROW_ID,
    SHARD_PATTERN,
    STORE_FORMAT,
    TMP_PREFIX,
    StoreError,
    check_schema,
    job_token,
    read_footer,
    read_manifest,
    settings_digest,
    shard_dtypes,
    shard_file,
    shard_table,
    temporary_prefix,
    write_manifest,
)
from skloes.utils._optional import import_optional

__all__ = [
    "PARTS_FORMAT",
    "PREDICTION_COLUMNS",
    "PartsSink",
    "ShardSink",
    "StoreSink",
    "is_temporary",
    "parts_manifest",
    "work_folder",
    "write_shard",
]

# The manifest ``format`` of a prediction job's hidden parts folder.
PARTS_FORMAT = "skloes-prediction-parts"
# The columns a prediction file writes itself (beside ``row_id``): no user
# column may take these names (``proba_`` is the prefix of one per class).
PREDICTION_COLUMNS = ("prediction", "proba_")
# The manifest is rewritten at most this often (seconds) while a job runs; a
# shard written but not yet recorded is adopted by the next run.
MANIFEST_EVERY = 1.0


# ------------------------------------------------------------------- names
def work_folder(folder, digest) -> Path:
    """The hidden folder of a job's staged inputs (Ray), removed at its end."""
    return Path(folder) / f"{TMP_PREFIX}{job_token(digest)}-work"


def parts_manifest(identity: dict) -> dict:
    """The manifest of a new parts folder: ``identity`` (what makes the
    predictions; its digest is the job's), no part yet."""
    identity = {"format": PARTS_FORMAT, **identity}
    manifest = {**identity, "digest": settings_digest(identity), "version": 1}
    manifest.update(shards=[], complete=False, n_rows=None)
    return manifest


def is_temporary(name: str, digest) -> bool:
    """Whether ``name`` is what a killed writer of this job left in its
    folder: the hidden sibling :func:`~skloes.core._atomic.write_whole`
    writes a shard or the manifest into before renaming it, or its staging
    folder (never read; removed when the job runs again)."""
    token = re.escape(job_token(digest))
    return bool(
        re.fullmatch(
            rf"\.skloes-{token}-(?:(?:part-\d{{5,}}\.parquet|_manifest\.json)-"
            r"[A-Za-z0-9_]+|work)",
            name,
        )
    )


def write_shard(folder, index, table, footer: dict) -> dict:
    """Write one shard whole: to a hidden temporary file, then renamed.

    The bytes are written, flushed to disk and hashed before the rename, so the
    shard's name only ever holds a complete file. ``footer`` (JSON) goes into
    the Parquet key-value metadata, binding the file to its store's settings
    and its place in the store.

    Returns
    -------
    record : dict
        ``file``, ``index``, ``rows``, ``bytes`` and ``sha256``, for the
        manifest.
    """
    pa = import_optional("pyarrow", extra="store")
    pq = import_optional("pyarrow.parquet", extra="store")
    folder = Path(folder)
    meta = dict(table.schema.metadata or {})
    meta[FOOTER_KEY] = json.dumps(footer, sort_keys=True).encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    layer_cols = [c for c in table.column_names if c.startswith("layer")]
    pq.write_table(
        table,
        sink,
        compression="none",
        use_dictionary=[c for c in table.column_names if c not in layer_cols],
        write_statistics=[ROW_ID],
        row_group_size=max(len(table), 1),
    )
    data = sink.getvalue().to_pybytes()
    name = shard_file(index)
    write_whole(
        folder / name,
        lambda tmp: tmp.write_bytes(data),
        prefix=temporary_prefix(footer.get("digest"), name),
    )
    return {
        "file": name,
        "index": int(index),
        "rows": len(table),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


# -------------------------------------------------------------- the sink
class ShardSink:
    """The one owner of a sharded job's output folder.

    Made on the driver, then :meth:`start`, :meth:`done` / :meth:`record` per
    shard, :meth:`complete` and :meth:`release`; made again on each worker
    from plain data (the folder, the job's digest) to :meth:`write` shards.
    A subclass makes a block's table (:meth:`block`) and may react to
    :meth:`same_job` and :meth:`adopted`.

    Parameters
    ----------
    path : str or os.PathLike
        The job's folder (created by :meth:`start` if missing).
    digest : str
        The job's settings digest (its manifest's ``digest``).
    owner : str, default="skloes"
        Named in messages.
    """

    #: The manifest's ``format``.
    fmt = STORE_FORMAT

    def __init__(self, path, digest, owner="skloes"):
        self.path, self.digest, self.owner = Path(path), digest, owner
        self.lock = None

    # ------------------------------------------------------- the worker
    def block(self, task, *values):
        """The Arrow table of one shard of ``task``'s rows (a subclass's)."""
        raise NotImplementedError

    def write(self, task, *values) -> dict:
        """Write shard ``task.index`` whole; return its manifest record."""
        table = self.block(task, *values)
        first_row = int(task.table.column(ROW_ID).to_numpy()[0])
        footer = {
            "digest": self.digest,
            "index": task.index,
            "input": task.digest,
            "first_row": first_row,
        }
        record = write_shard(self.path, task.index, table, footer)
        record.update(input=task.digest, first_row=first_row)
        return record

    # ------------------------------------------------------- the driver
    def start(self, manifest):
        """Take the folder (one writer at a time) and open its manifest:
        ``manifest`` for a new folder; an existing folder's must have the
        same ``digest`` (:meth:`same_job` says what differs otherwise).

        Returns
        -------
        self : ShardSink
            The started sink.
        """
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(self.path, "is a file; give a folder.")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.lock = FolderLock(self.path, note=True)  # one writer, told at once
        except FolderBusy as busy:
            raise StoreError(
                self.path,
                f"is being written by another job ({busy.holder}); one job writes "
                "a folder at a time: wait for it, or stop it and run this again.",
            ) from None
        except ForeignFile as exc:
            raise StoreError(self.path, _foreign_text(exc)) from None
        except OSError as exc:
            raise StoreError(self.path, _unwritable_text(exc)) from None
        try:
            self._open(manifest)
        except ForeignFile as exc:
            self.release()
            raise StoreError(self.path, _foreign_text(exc)) from None
        except OSError as exc:
            self.release()
            raise StoreError(self.path, _unwritable_text(exc)) from None
        except BaseException:
            self.release()
            raise
        self.by_index = {e["index"]: e for e in self.manifest["shards"]}
        self._written = time.monotonic()
        return self

    def _open(self, manifest):
        digest = manifest["digest"]
        if (self.path / MANIFEST_FILE).exists():
            self.manifest = read_manifest(self.path, self.fmt)
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
        """Release the folder's writer lock (again: nothing happens)."""
        if self.lock is not None:
            self.lock.release()

    def same_job(self, have, want):
        """Raise an error naming how ``have`` (on disk) differs from ``want``."""

    def unplanned(self) -> bool:
        """Whether the first shard must run alone, to plan what the others
        are told (a subclass's: a float16 store's layer dtypes)."""
        return False

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
            if sealed.as_recorded(self.path, entry["file"], entry.get("sha256")):
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

    def complete(self, n_rows):
        """Seal the folder once its shards hold every input row: the manifest
        is marked complete."""
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


class StoreSink(ShardSink):
    """The sink of a layer store: a shard is the pooled states of its rows;
    the dtype plan of the first shard travels with the records.

    Parameters
    ----------
    path, digest, owner
        As :class:`ShardSink`'s.
    layers : sequence of int, default=()
        The layers a shard holds, in order.
    columns : sequence of str, default=()
        The user's columns a shard keeps.
    """

    def __init__(self, path, digest, owner="skloes", layers=(), columns=()):
        super().__init__(path, digest, owner)
        self.layers, self.columns = list(layers), list(columns)

    def block(self, task, stack, dtypes):
        """One shard: ``row_id``, the user's columns, one column per layer."""
        row_ids = task.table.column(ROW_ID).to_numpy()
        columns = {c: task.table.column(c) for c in self.columns}
        return shard_table(row_ids, stack, self.layers, dtypes, columns)

    def same_job(self, have, want):
        _check_same_job(self.path, have, want)

    @property
    def layer_dtypes(self):
        """The layers' dtypes, once the first shard planned them."""
        return self.manifest.get("layer_dtypes")

    def unplanned(self) -> bool:
        """Whether the layers' dtypes wait for the first shard (float16)."""
        return self.layer_dtypes is None

    def adopted(self, file):
        if self.manifest.get("layer_dtypes") is None:
            self.manifest["layer_dtypes"] = shard_dtypes(file, self.manifest["layers"])

    def record(self, result, force=False):
        """Record one shard; the first shard's dtype plan forces a write."""
        if result.get("layer_dtypes") is not None and self.layer_dtypes is None:
            self.manifest["layer_dtypes"] = result["layer_dtypes"]
            force = True
        super().record(result, force=force)


def _check_same_job(path, have, want):
    """A store resumed by another job's settings is refused, naming the first
    difference."""
    if have.get("digest") == want["digest"]:
        return
    if have.get("model", {}).get("fingerprint") != want["model"]["fingerprint"]:
        raise StoreError(
            path,
            f"holds states of model {have.get('model', {}).get('reference')!r} "
            f"(fingerprint {str(have.get('model', {}).get('fingerprint'))[:12]}); "
            f"this job's model is {want['model']['reference']!r} (fingerprint "
            f"{want['model']['fingerprint'][:12]}); use another store folder.",
        )
    for key in (
        "layers",
        "extraction",
        "dim",
        "dtype",
        "columns",
        "id_column",
        "shard_size",
    ):
        if have.get(key) != want[key]:
            raise StoreError(
                path,
                f"was written with {key}={have.get(key)!r}; this job asks for "
                f"{key}={want[key]!r}; use another store folder (or the same "
                "settings to resume it).",
            )
    raise StoreError(path, "was written by another job (its settings digest differs).")


class PartsSink(ShardSink):
    """The sink of a prediction file: a shard is a part of predictions in a
    hidden folder beside ``out``; complete, the parts are joined into ``out``
    (written aside, then renamed) and the folder goes.

    Parameters
    ----------
    out : str or os.PathLike
        The ``.parquet`` file the parts make.
    digest, owner
        As :class:`ShardSink`'s.
    id_column : str or None, default=None
        The user's id column, kept beside each prediction.
    footer : dict or None, default=None
        Key-value metadata of ``out`` (None: none), such as the mark of the
        job that wrote it.
    """

    fmt = PARTS_FORMAT

    def __init__(self, out, digest, owner="skloes", id_column=None, footer=None):
        self.out = Path(out)
        super().__init__(self.parts_folder(out), digest, owner)
        self.id_column = id_column
        self.footer = footer

    @staticmethod
    def parts_folder(out) -> Path:
        """The hidden folder of the parts of ``out``."""
        out = Path(out)
        return out.parent / f".{out.name}.parts"

    def block(self, task, prediction, proba, classes):
        """``row_id``, the user's id column, ``prediction`` and ``proba_<class>``."""
        pa = import_optional("pyarrow", extra="store")
        chunk = task.table
        data = {ROW_ID: chunk.column(ROW_ID)}
        if self.id_column is not None:
            data[self.id_column] = chunk.column(self.id_column)
        data["prediction"] = pa.array(np.asarray(prediction).tolist())
        if proba is not None:
            for j, label in enumerate(np.asarray(classes).tolist()):
                data[f"proba_{label}"] = pa.array(
                    np.asarray(proba[:, j], dtype=np.float64)
                )
        return pa.table(data)

    def complete(self, n_rows):
        """Seal the parts, join them into ``out``, then remove the folder."""
        super().complete(n_rows)
        self._join()
        self.release()
        try:
            self.path.rmdir()  # only when nothing but this job's files was there
        except OSError:
            pass

    def _join(self):
        """Every part, in order, into ``out`` (written aside, then renamed);
        then the parts go."""
        pq = import_optional("pyarrow.parquet", extra="store")
        if not self.manifest["shards"]:
            raise StoreError(self.path, "no part to join (the input had no row).")

        def write(tmp):
            writer = None
            try:
                for entry in self.manifest["shards"]:
                    path = self.path / entry["file"]
                    handle = pq.ParquetFile(path)
                    check_schema(handle.schema_arrow, path, owner=self.owner)
                    table = handle.read()
                    table = table.replace_schema_metadata(self.footer)
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, table.schema)
                    writer.write_table(table)
            finally:
                if writer is not None:
                    writer.close()

        write_whole(
            self.out,
            write,
            prefix=temporary_prefix(self.manifest["digest"], self.out.name),
        )
        for entry in self.manifest["shards"]:
            (self.path / entry["file"]).unlink(missing_ok=True)
        (self.path / MANIFEST_FILE).unlink(missing_ok=True)


def _foreign_text(exc):
    """A store's :class:`~skloes.core._atomic.ForeignFile`, as a sentence."""
    return (
        f"holds {exc.path.name!r}, which {exc.problem}: a job writes only "
        "regular files of its own, never through a link or into a special file; "
        "move it away, or give an empty or new folder."
    )


def _unwritable_text(exc):
    """A folder the system will not let the job write, as a sentence."""
    return (
        f"cannot be written ({exc.strerror or type(exc).__name__}"
        f"{' on ' + repr(exc.filename) if exc.filename else ''}): give a folder "
        "you can write to."
    )
