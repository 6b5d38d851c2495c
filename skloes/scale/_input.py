"""The input of a job at scale, read in bounded chunks of rows.

A job reads its texts (and the user's columns) from a list of texts, a pandas
or polars DataFrame, a CSV/TSV/JSONL/Parquet file or a folder of such files
(read in the order of their sorted names), in chunks of a fixed number of
rows, so that the driver never holds the whole input. Each chunk is an Arrow
table whose first column is ``row_id``, the row's position in the input.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from skloes.core._store import ROW_ID
from skloes.utils._optional import import_optional

__all__ = ["InputSource", "chunk_digest", "open_input"]

SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet", ".pq")
# Rows a file reader hands over at a time (the chunks are cut from these).
READ_BATCH = 8192


def _pa():
    return import_optional("pyarrow", extra="store")


def chunk_digest(texts, ids=None) -> str:
    """Hash of a chunk's texts (and ids): what a resumed job compares."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    if ids is not None:
        digest.update(repr(list(ids)).encode())
    return digest.hexdigest()[:32]


class InputSource:
    """Where a job's rows come from, read in chunks.

    Parameters
    ----------
    data : list of str, DataFrame, str or os.PathLike
        The input.
    text_column : str
        The text column of a table or file.
    id_column : str or None
        The user's id column, kept beside each row (None: none).
    columns : list of str
        Further user columns to keep.
    owner : str
        Named in error messages.
    """

    def __init__(self, data, text_column, id_column, columns, owner):
        self.data, self.text_column, self.owner = data, text_column, owner
        self.id_column = id_column
        self.columns = list(columns)
        self.kept = ([id_column] if id_column is not None else []) + [
            c for c in self.columns if c != id_column
        ]
        if text_column in self.kept:
            raise ValueError(
                f"{owner}: the text column {text_column!r} is also in `columns`; "
                "texts are not stored (keep them in your own table, joined by "
                "row_id)."
            )
        self.files = None
        self._check()

    # ---------------------------------------------------------- checking
    def _check(self):
        data = self.data
        if isinstance(data, (str, os.PathLike)):
            self.files = _data_files(Path(data), self.owner)
            self.name = str(data)
            return
        if _is_frame(data):
            self.name = f"the {type(data).__name__}"
            self._check_frame_columns(list(map(str, data.columns)))
            return
        if isinstance(data, (list, tuple, np.ndarray)):
            if self.kept:
                raise ValueError(
                    f"{self.owner}: `id_column` and `columns` need a table or a "
                    "file; a list of texts has no columns."
                )
            self.name = "the list of texts"
            return
        raise TypeError(
            f"{self.owner}: `data` must be a list of texts, a pandas or polars "
            "DataFrame, or a CSV/TSV/JSONL/Parquet file or folder; got "
            f"{type(data).__name__}."
        )

    def _check_frame_columns(self, columns, where=None):
        where = where or self.name
        for column, param in [(self.text_column, "text_column")] + [
            (c, "id_column" if c == self.id_column else "columns") for c in self.kept
        ]:
            if column not in columns:
                raise ValueError(
                    f"{self.owner}: `{param}` {column!r} is not a column of "
                    f"{where}; its columns: {columns[:20]}."
                )

    # -------------------------------------------------------------- size
    def n_rows(self):
        """Number of input rows, when known without reading the texts."""
        if self.files is None:
            return len(self.data)
        if all(f.suffix.lower() in (".parquet", ".pq") for f in self.files):
            pq = import_optional("pyarrow.parquet", extra="store")
            return sum(pq.read_metadata(f).num_rows for f in self.files)
        return None

    # ------------------------------------------------------------ reading
    def _tables(self, columns):
        """Arrow tables of the input (``columns`` of it) in row order."""
        pa = _pa()
        if self.files is not None:
            for file in self.files:
                yield from _read_file(file, columns, self)
            return
        if _is_frame(self.data):
            frame = self.data
            if hasattr(frame, "to_arrow"):  # polars
                table = frame.select(columns).to_arrow()
            else:
                table = pa.Table.from_pandas(frame[columns], preserve_index=False)
            yield from table.to_batches(max_chunksize=READ_BATCH)
            return
        texts = self.data
        for start in range(0, len(texts), READ_BATCH):
            part = [
                str(t) if isinstance(t, np.str_) else t
                for t in texts[start : start + READ_BATCH]
            ]
            yield pa.table({self.text_column: _text_array(part, start, self)})

    def chunks(self, size, rows=None):
        """Yield ``(first_position, table)`` chunks of ``size`` kept rows.

        Parameters
        ----------
        size : int
            Rows per chunk (the last may be shorter).
        rows : ndarray of int or None
            Input positions to keep, sorted (None: every row).

        Yields
        ------
        start : int
            Index of the chunk's first row among the kept rows.
        table : pyarrow.Table
            ``row_id`` (the input position), the texts as ``text`` and the
            kept columns.
        """
        pa = _pa()
        columns = [self.text_column] + self.kept
        pending, n_pending, position, start = [], 0, 0, 0
        for batch in self._tables(columns):
            table = (
                pa.Table.from_batches([batch])
                if not isinstance(batch, pa.Table)
                else batch
            )
            ids = np.arange(position, position + len(table), dtype=np.int64)
            position += len(table)
            if rows is not None:
                keep = np.flatnonzero(np.isin(ids, rows, assume_unique=True))
                table, ids = table.take(keep), ids[keep]
            if not len(table):
                continue
            table = _normalised(table, ids, self)
            pending.append(table)
            n_pending += len(table)
            while n_pending >= size:
                whole = pa.concat_tables(pending)
                yield start, whole.slice(0, size)
                start += size
                rest = whole.slice(size)
                pending, n_pending = [rest], len(rest)
        if n_pending:
            yield start, pa.concat_tables(pending)
        self.total_ = position

    def column(self, name):
        """One column of the whole input, in row order (labels: small).

        Parameters
        ----------
        name : str
            The column.

        Returns
        -------
        values : ndarray
            One value per input row.
        missing : ndarray of bool
            Where the value is missing (null, NaN or an empty cell).
        """
        pa = _pa()
        values, missing = [], []
        for batch in self._tables([name]):
            column = batch.column(0)
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            missing.append(
                column.is_null(nan_is_null=True).to_numpy(zero_copy_only=False)
            )
            values.append(column.to_numpy(zero_copy_only=False))
        if not values:
            return np.empty(0, dtype=object), np.empty(0, dtype=bool)
        return np.concatenate(values), np.concatenate(missing)


def _normalised(table, ids, source):
    """``row_id``, ``text`` and the kept columns, the texts checked."""
    pa = _pa()
    texts = table.column(source.text_column)
    if not pa.types.is_string(texts.type) and not pa.types.is_large_string(texts.type):
        if texts.null_count != len(texts):  # all-null columns fall to the check
            raise ValueError(
                f"{source.owner}: `text_column` {source.text_column!r} of "
                f"{source.name} holds {texts.type} values, not text."
            )
    if texts.null_count:
        first = int(np.flatnonzero(texts.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(
            f"{source.owner}: row {int(ids[first])} of {source.name} has no text in "
            f"`text_column` {source.text_column!r}; fill or drop it."
        )
    data = {ROW_ID: pa.array(ids), "text": texts.cast(pa.string())}
    for column in source.kept:
        data[column] = table.column(column)
    return pa.table(data)


def _text_array(texts, start, source):
    pa = _pa()
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"{source.owner}: `data` must hold strings; item {start + i} is "
                f"{text!r} ({type(text).__name__})."
            )
    return pa.array(texts, type=pa.string())


def _is_frame(data) -> bool:
    module = type(data).__module__.split(".")[0]
    return module in ("pandas", "polars") and hasattr(data, "columns")


def _data_files(path, owner):
    if not path.exists():
        raise ValueError(f"{owner}: `data` {str(path)!r} does not exist.")
    if path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise ValueError(
                f"{owner}: `data` {str(path)!r} has an unknown extension "
                f"{path.suffix!r}; use {', '.join(SUFFIXES)}."
            )
        return [path]
    files = sorted(
        p
        for p in path.iterdir()
        if p.is_file()
        and p.suffix.lower() in SUFFIXES
        and not p.name.startswith((".", "_"))
    )
    if not files:
        raise ValueError(
            f"{owner}: the folder `data` {str(path)!r} holds no "
            f"{'/'.join(SUFFIXES)} file."
        )
    return files


def _read_file(file, columns, source):
    """Arrow record batches of ``columns`` of one data file, in order."""
    suffix = file.suffix.lower()
    if suffix in (".parquet", ".pq"):
        pq = import_optional("pyarrow.parquet", extra="store")
        handle = pq.ParquetFile(file)
        source._check_frame_columns(handle.schema_arrow.names, str(file))
        yield from handle.iter_batches(batch_size=READ_BATCH, columns=columns)
        return
    pd = import_optional("pandas", extra="store")
    pa = _pa()
    if suffix == ".jsonl":
        reader = pd.read_json(file, lines=True, dtype=False, chunksize=READ_BATCH)
    else:
        strings = {c: str for c in columns if c == source.text_column}
        reader = pd.read_csv(
            file,
            sep="\t" if suffix == ".tsv" else ",",
            dtype=strings,
            keep_default_na=True,
            chunksize=READ_BATCH,
        )
    with reader:
        for frame in reader:
            source._check_frame_columns(list(map(str, frame.columns)), str(file))
            frame = frame[columns]
            texts = frame[source.text_column]
            frame[source.text_column] = texts.where(texts.notna(), None)
            yield from pa.Table.from_pandas(frame, preserve_index=False).to_batches()


def open_input(data, *, text_column="text", id_column=None, columns=(), owner="skloes"):
    """An :class:`InputSource` for ``data``, its columns checked."""
    if isinstance(columns, str):
        columns = [columns]
    return InputSource(data, text_column, id_column, columns or (), owner)
