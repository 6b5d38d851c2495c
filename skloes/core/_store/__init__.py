"""The layer store: pooled hidden states of many texts as Parquet shards on disk.

Two rooms: :mod:`~skloes.core._store._format` says what a store is (the file
names, the shard schema and footer, the manifest) and
:mod:`~skloes.core._store._readers` reads one (:class:`LayerStore`,
:class:`StoreView`). The names other modules use are re-exported here, so
that ``from skloes.core._store import X`` names one place whatever room ``X``
lives in (see :ref:`layer_store`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.core._store._format import (
    FLOAT16_MAX,
    FOOTER_KEY,
    LAYER_PATTERN,
    MANIFEST_FILE,
    ROW_ID,
    SHARD_PATTERN,
    STORE_FORMAT,
    STORE_VERSION,
    TMP_PREFIX,
    StoreError,
    check_positions,
    check_schema,
    job_token,
    layer_array,
    layer_column,
    new_manifest,
    read_footer,
    read_manifest,
    reserved_column,
    settings_digest,
    shard_dtypes,
    shard_file,
    shard_table,
    temporary_prefix,
    write_manifest,
)
from skloes.core._store._readers import (
    READ_ROWS,
    LayerStore,
    StoreBatch,
    StoreView,
    is_layer_source,
)

__all__ = [
    "FLOAT16_MAX",
    "FOOTER_KEY",
    "LAYER_PATTERN",
    "MANIFEST_FILE",
    "READ_ROWS",
    "ROW_ID",
    "SHARD_PATTERN",
    "STORE_FORMAT",
    "STORE_VERSION",
    "TMP_PREFIX",
    "LayerStore",
    "StoreBatch",
    "StoreError",
    "StoreView",
    "check_positions",
    "check_schema",
    "is_layer_source",
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
