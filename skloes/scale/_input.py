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

from skloes.core._store import ROW_ID, check_schema, reserved_column
from skloes.scale._jobs import first_line
from skloes.utils._optional import import_optional

__all__ = ["TEXT", "InputSource", "chunk_digest", "open_input"]

# The texts' column in a job's chunks: a name of skloes's own, so that no user
# column (kept beside the texts) can take its place.
TEXT = "__skloes_text__"

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

    def __init__(self, data, text_column, id_column, columns, owner, reserved=()):
        self.data, self.text_column, self.owner = data, text_column, owner
        self.id_column = id_column
        self.columns = list(columns)
        seen = set()
        for column in self.columns:
            if column in seen:
                raise ValueError(f"{owner}: `columns` lists {column!r} twice.")
            seen.add(column)
        self.kept = ([id_column] if id_column is not None else []) + [
            c for c in self.columns if c != id_column
        ]
        if text_column in self.kept:
            param = "id_column" if text_column == id_column else "columns"
            raise ValueError(
                f"{owner}: the text column {text_column!r} is also `{param}`; "
                "texts are not stored (keep them in your own table, joined by "
                "row_id)."
            )
        for column in self.kept:
            if reserved_column(column, reserved) or str(column) == TEXT:
                param = "id_column" if column == id_column else "columns"
                names = ["row_id", "layer<l>"] + [
                    r + "<class>" if r.endswith("_") else r for r in reserved
                ]
                raise ValueError(
                    f"{owner}: `{param}` {column!r} is a reserved column name (the "
                    f"output's own columns are {', '.join(names)}); rename that "
                    "column in your table."
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
            return sum(_parquet(f, self).metadata.num_rows for f in self.files)
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
                table = _from_pandas(frame, columns, self.name, self)
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
            if pending:
                table = _same_types(table, pending[0].schema, self)
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
            array = column.to_numpy(zero_copy_only=False)
            missing.append(
                column.is_null(nan_is_null=True).to_numpy(zero_copy_only=False)
                | is_empty(array)
            )
            values.append(array)
        if not values:
            return np.empty(0, dtype=object), np.empty(0, dtype=bool)
        return np.concatenate(values), np.concatenate(missing)


def _normalised(table, ids, source):
    """``row_id``, ``text`` and the kept columns, the texts checked."""
    pa = _pa()
    texts = table.column(source.text_column)
    if pa.types.is_dictionary(texts.type) and _is_text_type(texts.type.value_type):
        texts = texts.cast(texts.type.value_type)  # a categorical column: its texts
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
    data = {ROW_ID: pa.array(ids), TEXT: texts.cast(pa.string())}
    for column in source.kept:
        data[column] = table.column(column)
    return pa.table(data)


def _is_text_type(kind):
    pa = _pa()
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _same_types(table, schema, source):
    """``table`` in the column types of the first part read (``schema``):
    text of either Arrow width is one type; other types that differ between
    the files of a folder (ids as text in a CSV, as numbers in a JSONL) are
    one error naming the column and both types."""
    if table.schema.equals(schema):
        return table
    for i, field in enumerate(schema):
        got = table.schema.field(i).type
        if got == field.type:
            continue
        if _is_text_type(got) and _is_text_type(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(field.type))
            continue
        if table.column(i).null_count == len(table):  # an all-empty column
            table = table.set_column(i, field.name, table.column(i).cast(field.type))
            continue
        raise ValueError(
            f"{source.owner}: column {field.name!r} holds {field.type} values in "
            f"one part of {source.name} and {got} values in another (the files of "
            "a folder must agree: e.g. ids written as text in every file, or as "
            "numbers in every file)."
        )
    return table


def _text_array(texts, start, source):
    pa = _pa()
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"{source.owner}: `data` must hold strings; item {start + i} is "
                f"{text!r} ({type(text).__name__})."
            )
    try:
        return pa.array(texts, type=pa.string())
    except UnicodeEncodeError:
        first = next(i for i, t in enumerate(texts) if not _encodable(t))
        raise ValueError(
            f"{source.owner}: item {start + first} of `data` is not valid Unicode "
            "(it holds a lone surrogate, as a broken decode leaves); fix or drop "
            "it."
        ) from None


def _encodable(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_empty(values):
    """Where an array of cells holds the empty string (a missing cell)."""
    values = np.asarray(values)
    if values.dtype.kind in "US":
        return values == ""
    if values.dtype.kind == "O":
        return np.asarray([isinstance(v, str) and v == "" for v in values], dtype=bool)
    return np.zeros(values.shape, dtype=bool)


def _from_pandas(frame, columns, where, source):
    """Arrow table of ``columns`` of a pandas frame; a column Arrow cannot
    take (mixed types, broken Unicode) is a one-line error naming it."""
    pa = _pa()
    try:
        return pa.Table.from_pandas(frame[columns], preserve_index=False)
    except (pa.ArrowException, UnicodeEncodeError, ValueError, TypeError):
        pass
    for column in columns:
        values = frame[column]
        try:
            pa.Array.from_pandas(values)
        except UnicodeEncodeError:
            row = next(
                i
                for i, v in enumerate(values)
                if isinstance(v, str) and not _encodable(v)
            )
            raise ValueError(
                f"{source.owner}: row {row} of column {column!r} of {where} is not "
                "valid Unicode (a lone surrogate); fix or drop it."
            ) from None
        except (pa.ArrowException, ValueError, TypeError):
            kinds = sorted({type(v).__name__ for v in values if v is not None})
            raise ValueError(
                f"{source.owner}: column {column!r} of {where} mixes value types "
                f"({', '.join(kinds[:4])}); give it one type (e.g. all strings)."
            ) from None
    raise ValueError(f"{source.owner}: {where} could not be read as a table.")


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
        handle = _parquet(file, source)
        schema = handle.schema_arrow
        source._check_frame_columns(schema.names, str(file))
        check_schema(schema, file, columns, source.owner)  # before any data
        yield from handle.iter_batches(batch_size=READ_BATCH, columns=columns)
        return
    yield from _read_text_file(file, suffix, columns, source)


def _parquet(file, source):
    """An open Parquet file, or a one-line error naming it."""
    pq = import_optional("pyarrow.parquet", extra="store")
    pa = _pa()
    try:
        handle = pq.ParquetFile(file)
        handle.schema_arrow  # noqa: B018 - the schema is parsed here
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(
            f"{source.owner}: {str(file)!r} is not a readable Parquet file "
            f"({first_line(exc)})."
        ) from None
    return handle


def _read_text_file(file, suffix, columns, source):
    """CSV/TSV/JSONL: every cell as written. CSV and TSV cells are strings
    (``"007"`` stays ``"007"``; ``"NA"``, ``"null"`` and ``"None"`` are
    texts); only an empty cell is missing. JSONL values keep their JSON
    type."""
    pd = import_optional("pandas", extra="store")
    try:
        if suffix == ".jsonl":
            reader = pd.read_json(
                file, lines=True, dtype=False, chunksize=READ_BATCH, encoding="utf-8"
            )
        else:
            reader = pd.read_csv(
                file,
                sep="\t" if suffix == ".tsv" else ",",
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                chunksize=READ_BATCH,
                encoding="utf-8",
            )
        with reader:
            for frame in reader:
                source._check_frame_columns(list(map(str, frame.columns)), str(file))
                frame = frame[columns]
                for column in columns:
                    values = frame[column]
                    if values.dtype == object:
                        frame[column] = values.where(values.notna(), None)
                table = _from_pandas(frame, columns, repr(str(file)), source)
                yield from table.to_batches()
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{source.owner}: {str(file)!r} is not UTF-8 text (byte {exc.start}: "
            f"{exc.object[exc.start : exc.start + 1]!r}); save it as UTF-8."
        ) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(
            f"{source.owner}: {str(file)!r} is not a readable "
            f"{suffix[1:].upper()} file ({first_line(exc)})."
        ) from None
    except ValueError as exc:
        if str(exc).startswith(f"{source.owner}:"):
            raise
        raise ValueError(
            f"{source.owner}: {str(file)!r} is not a readable "
            f"{suffix[1:].upper()} file ({first_line(exc)})."
        ) from None


def open_input(
    data, *, text_column="text", id_column=None, columns=(), owner="skloes", reserved=()
):
    """An :class:`InputSource` for ``data``, its columns checked (``reserved``:
    names, or prefixes ending in ``_``, the output writes itself beside
    ``row_id`` and ``layer<l>``)."""
    if isinstance(columns, str):
        columns = [columns]
    return InputSource(data, text_column, id_column, columns or (), owner, reserved)


def check_output(out, source, owner, param="out"):
    """Refuse an output that is, or is inside, the input (file or folder)."""
    if source.files is None:
        return
    target = Path(out).resolve()
    given = Path(source.data).resolve()
    inputs = {given, *(Path(f).resolve() for f in source.files)}
    if target in inputs or given in target.parents:
        raise ValueError(
            f"{owner}: `{param}` {str(out)!r} is, or is inside, the input "
            f"{str(source.data)!r}; write the output elsewhere."
        )
