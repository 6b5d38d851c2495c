"""The layer store's format: file names, the shard schema, footers and the manifest.

A store is a folder of Parquet files (``part-00000.parquet``, ...) and one
JSON manifest (``_manifest.json``). Every row is one text: ``row_id`` (int64,
the text's position in the input), the user's columns (label, group, own id)
as given, then one column per layer, ``layer{l}``, a fixed-size list of
``dim`` float32 (or float16) values. Layer indices follow Hugging Face
``hidden_states`` (0 is the embedding output). The manifest records the model
(its reference and the hash of its files), the layers, pooling, ``max_length``,
precision, the dtype of each layer and, per shard, its file, rows and sha256;
each shard's Parquet footer carries the settings digest that binds it to its
manifest (see :ref:`layer_store`).

This module says what a store *is*; :mod:`skloes.core._store._readers` reads
one. The manifest is read and written as every sealed folder's is
(:mod:`skloes.core._sealed`); what it must hold is said here. It imports
pyarrow only inside the functions that need it.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import re

import numpy as np

import skloes.core._sealed as sealed
from skloes.core._digests import setting_digest
from skloes.utils._optional import import_optional

__all__ = [
    "FLOAT16_MAX",
    "FOOTER_KEY",
    "LAYER_PATTERN",
    "MANIFEST_FILE",
    "ROW_ID",
    "SHARD_PATTERN",
    "STORE_FORMAT",
    "STORE_VERSION",
    "TMP_PREFIX",
    "StoreError",
    "check_positions",
    "check_schema",
    "job_token",
    "layer_array",
    "layer_column",
    "new_manifest",
    "read_footer",
    "read_manifest",
    "reserved_column",
    "settings_digest",
    "shard_dtypes",
    "shard_file",
    "shard_table",
    "temporary_prefix",
    "write_manifest",
]

STORE_FORMAT = "skloes-layer-store"
STORE_VERSION = 1
MANIFEST_FILE = "_manifest.json"
ROW_ID = "row_id"
SHARD_PATTERN = re.compile(r"part-(\d{5,})\.parquet")
# The columns a store writes itself: a user column may not take these names.
LAYER_PATTERN = re.compile(r"layer\d+")
# A job's own temporary files and folders: ``.skloes-<token>-...``, the token
# taken from the job's settings digest, so that no user file shares the name
# by accident and a job removes only what a job of these settings wrote.
TMP_PREFIX = ".skloes-"
FOOTER_KEY = b"skloes"
# The largest finite float16; a value beyond it is an overflow to inf.
FLOAT16_MAX = float(np.finfo(np.float16).max)


class StoreError(ValueError):
    """A store that is missing, damaged, or not what the caller expects.

    The message is one line naming the store folder and what is wrong.

    Parameters
    ----------
    path : str or os.PathLike
        The store folder.
    what : str
        What is wrong, as a sentence.

    Examples
    --------
    >>> from skloes.scale import StoreError
    >>> str(StoreError("my_store", "holds layers [2, 4], not layer 5."))
    "LayerStore 'my_store': holds layers [2, 4], not layer 5."
    """

    def __init__(self, path, what):
        self.path, self.what = str(path), what
        super().__init__(f"LayerStore {str(path)!r}: {what}")


def layer_column(layer: int) -> str:
    """The Parquet column of hidden state ``layer`` (``layer{l}``)."""
    return f"layer{int(layer)}"


def shard_file(index: int) -> str:
    """The file name of shard ``index``."""
    return f"part-{int(index):05d}.parquet"


def settings_digest(settings: dict) -> str:
    """The digest that binds every shard to the settings of its store."""
    return setting_digest(settings, 32)


def _pyarrow():
    pa = import_optional("pyarrow", extra="store")
    import_optional("pyarrow.parquet", extra="store")
    return pa


# ------------------------------------------------------------------- names
def job_token(digest) -> str:
    """The token of a job's temporary names (from its settings digest)."""
    return str(digest)[:12]


def temporary_prefix(digest, name) -> str:
    """The prefix of the hidden file a job writes ``name`` into first."""
    return f"{TMP_PREFIX}{job_token(digest)}-{name}-"


def reserved_column(name, extra=()) -> bool:
    """Whether a user column would shadow a column skloes writes: ``row_id``,
    ``layer<l>`` (a store's), and ``extra`` (names or prefixes ending in
    ``_``, such as a prediction file's ``prediction`` and ``proba_``)."""
    name = str(name)
    if name == ROW_ID or LAYER_PATTERN.fullmatch(name):
        return True
    return any(name.startswith(e) if e.endswith("_") else name == e for e in extra)


def check_schema(schema, file, columns=None, owner="skloes"):
    """Refuse, before any data is read, a column of an extension type (such
    as Ray's ``ray.data.arrow_pickled_object``, whose values are pickles that
    run code when read) or one nesting such a type: ``columns`` of
    ``schema`` (None: all), naming the file and the column. skloes writes
    none of these; an unregistered extension type (its name in the field's
    metadata) is refused too."""
    pa = _pyarrow()
    names = (
        schema.names if columns is None else [c for c in columns if c in schema.names]
    )
    for name in names:
        field = schema.field(name)
        kind = _foreign_type(pa, field)
        if kind is not None:
            raise ValueError(
                f"{owner}: column {name!r} of {str(file)!r} is of the extension "
                f"type {kind!r}; skloes reads no extension or object column (its "
                "values could run code when read); convert it to a plain column."
            )


def _foreign_type(pa, field):
    meta = field.metadata or {}
    if b"ARROW:extension:name" in meta:
        return meta[b"ARROW:extension:name"].decode("utf-8", "replace")
    kind = field.type
    if isinstance(kind, pa.ExtensionType):
        return kind.extension_name
    if pa.types.is_dictionary(kind):
        return _foreign_type(pa, pa.field("v", kind.value_type))
    for i in range(getattr(kind, "num_fields", 0)):
        found = _foreign_type(pa, kind.field(i))
        if found is not None:
            return found
    return None


def check_positions(rows, n, what):
    """``rows`` as positions in ``0..n-1``: integers (an integer-valued
    float is not one), or a boolean mask of length ``n`` (it selects, as in
    numpy). Returns int64 positions or raises a one-line ``ValueError``
    message starting with ``what``."""
    values = np.asarray(rows)
    if values.dtype == bool:
        if values.ndim != 1 or len(values) != n:
            raise ValueError(
                f"{what}: a boolean mask `rows` must have one value per row ({n}); "
                f"got {values.shape[0] if values.ndim else 'a scalar'}."
            )
        return np.flatnonzero(values).astype(np.int64)
    if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
        raise ValueError(
            f"{what}: `rows` must be a 1-D list of integer row positions or a "
            f"boolean mask; got {_short(rows)}."
        )
    values = values.astype(np.int64)
    if values.size and values.min() < 0:
        raise ValueError(
            f"{what}: row position {int(values.min())} in `rows` is negative; "
            "positions count from 0."
        )
    if values.size and values.max() >= n:
        bad = int(values.max())
        raise ValueError(
            f"{what}: row position {bad} in `rows` is out of range; there are {n} "
            f"rows (0..{n - 1})."
        )
    return values


def _short(value):
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


# ------------------------------------------------------------------- writing


def layer_array(values: np.ndarray, dtype: str):
    """One layer's ``(n_rows, dim)`` values as an Arrow fixed-size-list column."""
    pa = _pyarrow()
    values = np.ascontiguousarray(values, dtype=dtype)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1])


def shard_table(row_ids, stack, layers, dtypes, columns=None):
    """The Arrow table of one shard.

    Parameters
    ----------
    row_ids : ndarray of int64
        The rows' ids.
    stack : ndarray of shape (n_layers, n_rows, dim)
        Their pooled states, in the order of ``layers``.
    layers : sequence of int
        Hugging Face ``hidden_states`` indices.
    dtypes : sequence of str
        ``"float32"`` or ``"float16"`` per layer.
    columns : dict of str to pyarrow.Array or None
        The user's columns, in order.
    """
    pa = _pyarrow()
    data = {ROW_ID: pa.array(np.asarray(row_ids, dtype=np.int64))}
    data.update(columns or {})
    for i, layer in enumerate(layers):
        data[layer_column(layer)] = layer_array(stack[i], dtypes[i])
    return pa.table(data)


def _metadata(path):
    """A Parquet file's metadata (footer and schema), or None if unreadable."""
    pq = import_optional("pyarrow.parquet", extra="store")
    try:
        return pq.read_metadata(path)
    except (OSError, ValueError):
        return None


def _footer(meta):
    """The skloes footer in a file's metadata (a dict with ``_rows``), or None."""
    if meta is None:
        return None
    try:
        footer = json.loads((meta.metadata or {})[FOOTER_KEY])
    except (KeyError, ValueError, TypeError):
        return None
    if not isinstance(footer, dict):
        return None
    footer["_rows"] = meta.num_rows
    return footer


def read_footer(path):
    """The skloes footer of a Parquet shard (a dict), or None if unreadable."""
    return _footer(_metadata(path))


def shard_dtypes(path, layers):
    """The dtype of each layer column in a shard file (its Parquet schema)."""
    pq = import_optional("pyarrow.parquet", extra="store")
    schema = pq.read_schema(path)
    names = {
        "halffloat": "float16",
        "float": "float32",
    }
    return [
        names.get(str(schema.field(layer_column(l)).type.value_type), "float32")
        for l in layers
    ]


# ------------------------------------------------------------------- reading
def _check_manifest(path, manifest, fmt=STORE_FORMAT):
    """The manifest's shape: format, version and plain shard entries."""
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        what = "layer store" if fmt == STORE_FORMAT else fmt
        raise StoreError(path, f"{MANIFEST_FILE} is not a skloes {what} manifest.")
    if manifest.get("version", STORE_VERSION) != STORE_VERSION:
        raise StoreError(
            path,
            f"store format version {manifest.get('version')!r}; this skloes reads "
            f"version {STORE_VERSION}.",
        )
    files, indices = set(), set()
    for entry in manifest.get("shards", []):
        name = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not SHARD_PATTERN.fullmatch(name):
            raise StoreError(path, f"its manifest lists an invalid shard {entry!r}.")
        index, rows = entry.get("index"), entry.get("rows")
        if not all(
            isinstance(v, int) and not isinstance(v, bool) for v in (index, rows)
        ):
            raise StoreError(
                path,
                f"its manifest lists shard {name} without an integer index and rows.",
            )
        if name in files or index in indices:
            raise StoreError(
                path,
                f"its manifest lists shard {name} (index {index}) more than once "
                "(edited by hand?); each shard is listed once.",
            )
        files.add(name)
        indices.add(index)


def read_manifest(path, fmt=STORE_FORMAT):
    """The manifest of the store at ``path`` (a dict), or a :class:`StoreError`.

    ``fmt``: the manifest's ``format`` (a layer store's, or a prediction
    job's parts).
    """

    def fail(problem, exc):
        if problem == "no folder":
            return StoreError(path, "no such folder.")
        if problem == "no manifest":
            return StoreError(
                path, f"not a layer store (no {MANIFEST_FILE}, as extraction writes)."
            )
        return StoreError(path, f"{MANIFEST_FILE} is unreadable ({exc}).")

    manifest = sealed.read_manifest(path, MANIFEST_FILE, fail)
    _check_manifest(path, manifest, fmt)
    return manifest


# ---------------------------------------------------------------- manifests
def new_manifest(
    *, model, extraction, layers, dim, dtype, columns, id_column, shard_size
):
    """The manifest of a new, empty store (see :ref:`layer_store`).

    ``model`` holds the model's ``reference``, ``fingerprint`` and
    ``n_hidden_states``; ``extraction`` the settings that change the values
    (pooling, ``exclude_tokens``, ``max_length``, precision). The settings
    digest, written into every shard's footer too, covers all of it.
    """
    from skloes.utils._version import VERSION

    identity = {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "model": {"fingerprint": model["fingerprint"]},
        "extraction": extraction,
        "layers": [int(l) for l in layers],
        "dim": int(dim),
        "dtype": str(dtype),
        "columns": list(columns),
        "id_column": id_column,
        "shard_size": int(shard_size),
    }
    return {
        **identity,
        "model": dict(model),
        "digest": settings_digest(identity),
        "skloes": VERSION,
        "row_id": ROW_ID,
        "layer_columns": [layer_column(l) for l in layers],
        "layer_dtypes": None,
        "shards": [],
        "n_rows": None,
        "complete": False,
    }


def write_manifest(folder, manifest) -> None:
    """Write the manifest of the store in ``folder`` whole (written aside,
    flushed to disk, renamed), in a sealed folder's JSON style."""
    sealed.write_manifest(
        folder,
        MANIFEST_FILE,
        manifest,
        prefix=temporary_prefix(manifest.get("digest"), MANIFEST_FILE),
    )
