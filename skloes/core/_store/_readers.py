"""The layer store's readers: a store on disk and views of its layers and rows.

:class:`LayerStore` opens a store (its manifest, the size of every shard, the
layout of the first) and :meth:`~LayerStore.verify` checks every byte;
:class:`StoreView` is some of its layers and rows, read only when asked, one
shard at a time, so memory does not grow with the number of rows. Nothing in
a store is pickled and reading it runs no code: the manifest is JSON, the
shards are Parquet. Parquet readers skip names that start with ``_`` or
``.``, so ``pandas.read_parquet(folder)``, ``polars``, ``pyarrow.dataset``,
Dask and Ray read the shards directly (see :ref:`layer_store`). The format
itself is :mod:`skloes.core._store._format`'s.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from skloes.core._digests import file_identity, file_sha256
from skloes.core._store._format import (
    MANIFEST_FILE,
    ROW_ID,
    SHARD_PATTERN,
    StoreError,
    _footer,
    _metadata,
    _pyarrow,
    check_positions,
    check_schema,
    layer_column,
    read_manifest,
)
from skloes.utils._optional import import_optional

__all__ = [
    "READ_ROWS",
    "LayerStore",
    "StoreBatch",
    "StoreView",
    "is_layer_source",
]

# Shards whose footer and layout were checked against their manifest, by file
# identity and what the manifest expects (see LayerStore._check_shard).
_CHECKED: set = set()
# Rows a reader converts at a time within one shard (memory: this many rows of
# the layers read).
READ_ROWS = 4096


def is_layer_source(X) -> bool:
    """Whether ``X`` is a layer store or a view of one (read lazily)."""
    return isinstance(X, StoreView)


class StoreView:
    """Some layers and rows of a :class:`LayerStore`, read only when asked.

    A view behaves as a layer stack ``(n_layers, n_rows, dim)`` that lives on
    disk: ``shape``, ``dtype``, ``len``, ``np.asarray(view)`` (which reads
    it all), ``view[i]`` (one layer, lazily), ``view[i, rows]`` and
    ``view[:, rows]`` (read). Every skloes estimator that takes a stack
    takes a view, reading only what it needs (see :ref:`layer_store`).
    Make one with :meth:`LayerStore.select`.

    Parameters
    ----------
    store : LayerStore
        The store.
    layers : array-like of int or None
        Hugging Face ``hidden_states`` indices the view holds (None: all the
        store holds).
    rows : array-like of int or None
        Positions of the store's rows the view holds, in order (None: all).

    Examples
    --------
    >>> from skloes.scale import LayerStore
    >>> store = LayerStore("my_store")  # doctest: +SKIP
    >>> view = store.select(layers=[2, 4], rows=[0, 5, 9])  # doctest: +SKIP
    >>> view.shape, view.read().shape  # doctest: +SKIP
    ((2, 3, 384), (2, 3, 384))
    """

    def __init__(self, store, layers=None, rows=None):
        self._store = store
        self.layers = store._check_layers(layers)
        self.rows = None if rows is None else store._check_rows(rows)

    # ------------------------------------------------------------ the stack
    @property
    def store(self):
        """The :class:`LayerStore` this view reads."""
        return self._store

    @property
    def n_rows(self) -> int:
        """Number of rows of the view."""
        return self._store.n_rows if self.rows is None else len(self.rows)

    @property
    def shape(self) -> tuple:
        """``(n_layers, n_rows, dim)``."""
        return (len(self.layers), self.n_rows, self._store.dim)

    ndim = 3

    @property
    def dtype(self):
        """The dtype reads return: float16 when every layer is, else float32."""
        kinds = {self._store.layer_dtype(l) for l in self.layers}
        return np.dtype("float16" if kinds == {"float16"} else "float32")

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        return (
            f"StoreView({str(self._store.path)!r}, layers={self.layers.tolist()}, "
            f"n_rows={self.n_rows})"
        )

    def __array__(self, dtype=None, copy=None):
        out = self.read()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > 2 or any(k is Ellipsis for k in key):
            raise IndexError(
                f"StoreView: index as view[layers] or view[layers, rows]; got {key!r}."
            )
        layer_key = key[0]
        positions = np.arange(len(self.layers))[layer_key]
        layers = self.layers[positions]
        if len(key) == 1:
            return self._sub(
                np.atleast_1d(layers), None, scalar=np.ndim(positions) == 0
            )
        rows = np.arange(self.n_rows)[key[1]]
        out = self._sub(np.atleast_1d(layers), np.atleast_1d(rows)).read()
        if np.ndim(rows) == 0:
            out = out[:, 0]
        return out[0] if np.ndim(positions) == 0 else out

    def _sub(self, layers, rows, scalar=False):
        """The view of ``layers`` and local ``rows`` of this view."""
        if rows is not None and self.rows is not None:
            rows = self.rows[rows]
        elif rows is None:
            rows = self.rows
        view = StoreView(self._store, layers, rows)
        return _LayerView(view) if scalar else view

    def select(self, layers=None, rows=None):
        """A narrower view.

        Parameters
        ----------
        layers : array-like of int or None, default=None
            Hugging Face ``hidden_states`` indices (among this view's); None
            keeps them all.
        rows : array-like of int or bool, or None, default=None
            Positions among this view's rows, or a boolean mask of one value
            per row (it selects, as in numpy); None keeps them all.

        Returns
        -------
        view : StoreView
            The narrower view; nothing is read.
        """
        if layers is None:
            layers = self.layers
        else:
            layers = self._store._check_layers(layers)
            missing = sorted(set(layers.tolist()) - set(self.layers.tolist()))
            if missing:
                raise StoreError(
                    self._store.path,
                    f"this view holds layers {self.layers.tolist()}, not layer "
                    f"{missing[0]}.",
                )
        if rows is not None:
            try:
                rows = check_positions(rows, self.n_rows, "select")
            except ValueError as exc:
                raise StoreError(self._store.path, str(exc)) from None
            if self.rows is not None:
                rows = self.rows[rows]
        else:
            rows = self.rows
        return StoreView(self._store, layers, rows)

    # ------------------------------------------------------------- reading
    def read(self, dtype=None):
        """Every value of the view, in memory.

        Parameters
        ----------
        dtype : dtype or None, default=None
            Of the result (None: :attr:`dtype`).

        Returns
        -------
        stack : ndarray of shape (n_layers, n_rows, dim)
            Layers in the view's order, rows in its order.
        """
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        out = np.empty(self.shape, dtype=dtype)
        for batch in self.iter_batches():
            out[:, batch.positions] = batch.stack
        return out

    def iter_batches(self, batch_size=READ_ROWS, columns=()):
        """Yield the view in batches of at most ``batch_size`` rows.

        Reads one shard at a time and only the view's layers (and
        ``columns``), so memory is bounded by ``batch_size`` rows whatever
        the size of the store.

        Parameters
        ----------
        batch_size : int, default=4096
            Most rows per batch.
        columns : sequence of str, default=()
            User columns (or ``"row_id"``) to read along.

        Yields
        ------
        batch : StoreBatch
            ``positions`` (in the view), ``row_ids``, ``stack`` of shape
            ``(n_layers, n, dim)`` and ``columns`` (a dict of arrays).
        """
        yield from self._store._iter(self.layers, self.rows, batch_size, columns)

    def column(self, name):
        """One user column (or ``"row_id"``) over the view's rows.

        Parameters
        ----------
        name : str
            The column.

        Returns
        -------
        values : ndarray
            In the view's row order.
        """
        parts, positions = [], []
        for batch in self._store._iter(self.layers[:0], self.rows, READ_ROWS, (name,)):
            parts.append(batch.columns[name])
            positions.append(batch.positions)
        if not parts:
            return np.empty(0)
        values, order = np.concatenate(parts), np.concatenate(positions)
        out = np.empty_like(values)
        out[order] = values
        return out

    def row_ids(self):
        """The ``row_id`` of each row of the view (its position in the input).

        Returns
        -------
        row_ids : ndarray of int64
            In the view's row order.
        """
        return self.column(ROW_ID).astype(np.int64)


class _LayerView:
    """One layer of a view, read when indexed by rows or converted."""

    def __init__(self, view):
        self._view = view
        self.shape = view.shape[1:]
        self.dtype = view.dtype
        self.ndim = 2

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows):
        return self._view[0, rows]

    def __array__(self, dtype=None, copy=None):
        out = self._view.read()[0]
        return out if dtype is None else out.astype(dtype, copy=False)


class StoreBatch:
    """One batch of rows read from a store (see :meth:`StoreView.iter_batches`)."""

    def __init__(self, positions, row_ids, stack, columns):
        self.positions, self.row_ids = positions, row_ids
        self.stack, self.columns = stack, columns

    def fused(self, dtype=np.float64):
        """The batch as a flat table ``(n, n_layers * dim)``, layers side by side."""
        k, n, d = self.stack.shape
        out = np.empty((n, k * d), dtype=dtype)
        for i in range(k):
            out[:, i * d : (i + 1) * d] = self.stack[i]
        return out


class LayerStore(StoreView):
    """A layer store on disk: Parquet shards of pooled hidden states.

    Opening a store reads its manifest and checks that every shard it lists
    is there with its recorded size; :meth:`verify` checks every byte.
    A store is a :class:`StoreView` of all its layers and rows, so it goes
    wherever a layer stack does (selectors, heads, :class:`~skloes.report.
    LayerReport`), and :meth:`select` narrows it to layers and rows without
    reading. Write one with :func:`skloes.scale.extract_to_store`.

    Read more in the :ref:`User Guide <layer_store>`.

    Parameters
    ----------
    path : str or os.PathLike
        The store folder.

    Attributes
    ----------
    path : pathlib.Path
        The folder.
    manifest : dict
        The manifest as read (a copy is returned).
    layers : ndarray of int
        The hidden states it holds (Hugging Face indices, 0 = embeddings).
    dim : int
        Width of each pooled vector.
    columns : list of str
        The user's columns (``row_id`` aside).
    complete : bool
        Whether the extraction that writes it finished.

    See Also
    --------
    skloes.scale.extract_to_store : Write a store.

    Examples
    --------
    >>> from skloes.scale import LayerStore
    >>> store = LayerStore("my_store")  # doctest: +SKIP
    >>> store.shape, store.layers  # doctest: +SKIP
    ((7, 100000, 384), array([0, 1, 2, 3, 4, 5, 6]))
    >>> import pandas as pd
    >>> pd.read_parquet("my_store", columns=["row_id", "layer3"])  # doctest: +SKIP
    """

    def __init__(self, path):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                "LayerStore: `path` must be a store folder (a str or "
                f"os.PathLike); got {type(path).__name__}."
            )
        self.path = Path(path)
        self._manifest = read_manifest(self.path)
        m = self._manifest
        try:
            self._all_layers = np.asarray(m["layers"], dtype=np.intp)
            self.dim = int(m["dim"])
            self.columns = [str(c) for c in m["columns"]]
            dtypes = m.get("layer_dtypes")
            self._dtypes = (
                None if dtypes is None else dict(zip(m["layers"], dtypes, strict=True))
            )
        except (KeyError, TypeError, ValueError):
            raise StoreError(
                self.path, f"{MANIFEST_FILE} lacks its layers, dim or columns."
            ) from None
        self._shards = sorted(m.get("shards", []), key=lambda s: s["index"])
        self._offsets = np.cumsum([0] + [int(s["rows"]) for s in self._shards])
        if self.complete and m.get("n_rows") != int(self._offsets[-1]):
            raise StoreError(
                self.path,
                f"its manifest records n_rows={m.get('n_rows')!r} but its shards hold "
                f"{int(self._offsets[-1])} rows (edited by hand?).",
            )
        self._check_files()
        if self._shards:  # the layout of one shard, at open (each read: its own)
            self._check_shard(self._shards[0])
        super().__init__(self, None, None)
        self._store = self

    def _check_files(self):
        for entry in self._shards:
            file = self.path / entry["file"]
            try:
                size = file.stat().st_size
            except OSError:
                raise StoreError(
                    self.path,
                    f"shard {entry['file']}, listed in its manifest, is missing "
                    "(re-run the extraction to write it again).",
                ) from None
            if size != entry.get("bytes"):
                raise StoreError(
                    self.path,
                    f"shard {entry['file']} has {size} bytes, not the "
                    f"{entry.get('bytes')} its manifest records (changed since it "
                    "was written).",
                )

    def __repr__(self) -> str:
        return (
            f"LayerStore({str(self.path)!r}, layers={self._all_layers.tolist()}, "
            f"n_rows={self.n_rows}, dim={self.dim}"
            + ("" if self.complete else ", incomplete")
            + ")"
        )

    # ------------------------------------------------------------- metadata
    @property
    def manifest(self) -> dict:
        """A copy of the manifest."""
        return json.loads(json.dumps(self._manifest))

    @property
    def n_rows(self) -> int:
        """Number of rows in the store (in the shards its manifest lists)."""
        return int(self._offsets[-1])

    @property
    def complete(self) -> bool:
        """Whether the extraction that writes the store finished."""
        return bool(self._manifest.get("complete", False))

    @property
    def model(self) -> dict:
        """The model: ``reference``, ``fingerprint``, ``n_hidden_states``."""
        return dict(self._manifest.get("model", {}))

    @property
    def settings(self) -> dict:
        """The extraction settings: pooling, max_length, precision..."""
        return dict(self._manifest.get("extraction", {}))

    @property
    def n_shards(self) -> int:
        """Number of shards listed in the manifest."""
        return len(self._shards)

    def layer_dtype(self, layer) -> str:
        """Return the dtype a layer is stored in.

        Parameters
        ----------
        layer : int
            A hidden state the store holds.

        Returns
        -------
        dtype : {"float32", "float16"}
            Its storage dtype.
        """
        if self._dtypes is None:
            return str(self._manifest.get("dtype", "float32"))
        return str(self._dtypes[int(layer)])

    def nbytes(self) -> int:
        """Return the bytes of the shard files on disk.

        Returns
        -------
        nbytes : int
            The sum of the recorded shard sizes.
        """
        return int(sum(int(s["bytes"]) for s in self._shards))

    def _check_layers(self, layers):
        if layers is None:
            return self._all_layers.copy()
        values = np.atleast_1d(np.asarray(layers))
        if values.dtype.kind not in "iu" or values.ndim != 1:
            raise StoreError(
                self.path, f"layers must be a list of ints; got {layers!r}."
            )
        held = set(self._all_layers.tolist())
        missing = [int(v) for v in values if int(v) not in held]
        if missing:
            raise StoreError(
                self.path,
                f"holds layers {self._all_layers.tolist()}, not layer {missing[0]} "
                "(extract it into a store that holds it).",
            )
        return values.astype(np.intp)

    def _check_rows(self, rows):
        try:
            return check_positions(rows, self.n_rows, "select")
        except ValueError as exc:
            raise StoreError(self.path, str(exc)) from None

    def require_complete(self, owner="LayerStore"):
        """Raise a :class:`StoreError` unless the store is complete.

        Parameters
        ----------
        owner : str, default="LayerStore"
            Who asks (named in the message).

        Returns
        -------
        self : LayerStore
            This store.
        """
        if not self.complete:
            raise StoreError(
                self.path,
                f"is incomplete ({self.n_shards} shards, {self.n_rows} rows so far): "
                f"{owner} needs a finished store; re-run the extraction to finish "
                "it.",
            )
        return self

    # ----------------------------------------------------------- checking
    def verify(self):
        """Check every shard against the manifest, byte for byte.

        Every listed shard must exist, hash as recorded (sha256), carry this
        store's settings and its index in its Parquet footer and hold the
        recorded rows; and no shard file outside the manifest may sit in the
        folder (Parquet readers of the folder would read it). The first
        problem is a :class:`StoreError` naming the store and the shard.

        Returns
        -------
        self : LayerStore
            This store.
        """
        for entry in self._shards:
            file = self.path / entry["file"]
            if file_sha256(file) != entry.get("sha256"):
                raise StoreError(
                    self.path,
                    f"shard {entry['file']} does not hash as its manifest records "
                    "(changed or damaged since it was written).",
                )
            self._check_shard(entry)
        listed = {entry["file"] for entry in self._shards}
        extra = sorted(
            p.name
            for p in self.path.iterdir()
            if SHARD_PATTERN.fullmatch(p.name) and p.name not in listed
        )
        if extra and self.complete:
            raise StoreError(
                self.path,
                f"holds shard file {extra[0]}, which its manifest does not list "
                "(readers of the folder would read it); move it away.",
            )
        return self

    def _check_shard(self, entry):
        """The shard's footer and layout against the manifest, from its
        metadata; once per version of the file and of what the manifest
        expects of it in this process (memoised on the file's identity, as
        its sha256 is: :func:`~skloes.core._digests.file_sha256`)."""
        file = self.path / entry["file"]
        try:
            st = os.stat(file)
        except OSError:
            st = None
        key = None
        if st is not None:
            expected = json.dumps(
                [
                    entry,
                    self._manifest.get("digest"),
                    self.dim,
                    [self.layer_dtype(l) for l in self._all_layers],
                ],
                sort_keys=True,
                default=str,
            )
            key = (os.path.abspath(file), *file_identity(st), expected)
            if key in _CHECKED:
                return
        meta = _metadata(file)
        self._check_footer(entry, _footer(meta))
        self._check_layout(entry, meta.schema.to_arrow_schema())
        if key is not None:
            _CHECKED.add(key)

    def _check_footer(self, entry, footer):
        if footer is None:
            raise StoreError(
                self.path, f"shard {entry['file']} is not a readable shard."
            )
        if footer.get("digest") != self._manifest.get("digest"):
            raise StoreError(
                self.path,
                f"shard {entry['file']} was written for other settings (another "
                "model, layers or manifest) than this store's manifest records.",
            )
        if footer.get("index") != entry["index"] or footer["_rows"] != entry["rows"]:
            raise StoreError(
                self.path,
                f"shard {entry['file']} holds shard {footer.get('index')} with "
                f"{footer['_rows']} rows; its manifest records shard {entry['index']} "
                f"with {entry['rows']}.",
            )
        for key in ("input", "first_row"):
            if key in entry and footer.get(key) != entry[key]:
                raise StoreError(
                    self.path,
                    f"shard {entry['file']} was written from other input rows than "
                    f"its manifest records ({key} differs: copied from another "
                    "store?); re-run the extraction to write it again.",
                )

    def _check_layout(self, entry, schema):
        """The shard's schema holds each layer as the manifest says (width
        and dtype) and no column of a type skloes does not write."""
        if schema is None:
            raise StoreError(
                self.path, f"shard {entry['file']} is not a readable shard."
            )
        pa = _pyarrow()
        try:
            check_schema(schema, self.path / entry["file"], owner="LayerStore")
        except ValueError as exc:
            raise StoreError(self.path, str(exc).removeprefix("LayerStore: ")) from None
        kinds = {"halffloat": "float16", "float": "float32"}
        for layer in self._all_layers:
            name = layer_column(layer)
            index = schema.get_field_index(name)
            kind = schema.field(index).type if index >= 0 else None
            if kind is None or not pa.types.is_fixed_size_list(kind):
                raise StoreError(
                    self.path, f"shard {entry['file']} has no column {name} of vectors."
                )
            dtype = kinds.get(str(kind.value_type), str(kind.value_type))
            if kind.list_size != self.dim or dtype != self.layer_dtype(layer):
                raise StoreError(
                    self.path,
                    f"shard {entry['file']} holds {name} as {kind.list_size} {dtype} "
                    f"values; its manifest records {self.dim} "
                    f"{self.layer_dtype(layer)} (edited by hand?).",
                )

    # ------------------------------------------------------------ reading
    def _shard_parts(self, rows):
        """(shard entry, local rows or None, positions in the view) in order."""
        if rows is None:
            for i, entry in enumerate(self._shards):
                start, stop = self._offsets[i], self._offsets[i + 1]
                yield entry, None, np.arange(start, stop)
            return
        shard_of = np.searchsorted(self._offsets, rows, side="right") - 1
        order = np.argsort(shard_of, kind="stable")
        bounds = np.flatnonzero(np.diff(shard_of[order])) + 1
        for group in np.split(order, bounds):
            if group.size:
                i = int(shard_of[group[0]])
                yield self._shards[i], rows[group] - self._offsets[i], group

    def _open(self, entry):
        pq = import_optional("pyarrow.parquet", extra="store")
        file = self.path / entry["file"]
        try:
            handle = pq.ParquetFile(file)
        except OSError:
            raise StoreError(
                self.path, f"shard {entry['file']} is missing or unreadable."
            ) from None
        self._check_footer(entry, _footer(handle.metadata))
        self._check_layout(entry, handle.schema_arrow)
        return handle

    def _iter(self, layers, rows, batch_size, columns):
        names = [layer_column(l) for l in layers]
        wanted = [ROW_ID] + [c for c in columns if c != ROW_ID]
        unknown = [c for c in wanted if c != ROW_ID and c not in self.columns]
        if unknown:
            raise StoreError(
                self.path,
                f"has no column {unknown[0]!r}; its columns: "
                f"{[ROW_ID, *self.columns]}.",
            )
        for entry, local, positions in self._shard_parts(rows):
            handle = self._open(entry)
            start = 0
            for record in handle.iter_batches(
                batch_size=batch_size, columns=wanted + names
            ):
                n = record.num_rows
                if local is None:
                    take, pos = None, positions[start : start + n]
                else:
                    hit = (local >= start) & (local < start + n)
                    take, pos = local[hit] - start, positions[hit]
                start += n
                if take is not None and not take.size:
                    continue
                yield self._batch(record, take, pos, names, wanted, len(layers))

    def _batch(self, record, take, positions, names, wanted, n_layers):
        if take is not None:
            record = record.take(take)
        n = record.num_rows
        dtype = (
            np.float16
            if all(self.layer_dtype(int(name[5:])) == "float16" for name in names)
            and names
            else np.float32
        )
        stack = np.empty((n_layers, n, self.dim), dtype=dtype)
        for i, name in enumerate(names):
            column = record.column(name)
            values = column.flatten().to_numpy(zero_copy_only=False)
            stack[i] = values.reshape(n, self.dim)
        cols = {c: record.column(c).to_numpy(zero_copy_only=False) for c in wanted}
        return StoreBatch(np.asarray(positions), cols[ROW_ID], stack, cols)
