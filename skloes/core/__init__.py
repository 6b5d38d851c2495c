"""The core: what every floor above shares, with no estimator in it.

Data and its layers: the layer-data contract (``_contract``: stacks, flat
tables, fusing; also the first line of an error, :func:`first_line`), text
inputs (``_texts``), data frames (``_frames``), targets and folds
(``_targets``: task resolution, the class checks, CV splits), metadata routing
(``_routing``), the fusion names (``_fusion``) and the paired
one-standard-error rule over shared folds (``_noise``).

Numbers: shared geometry (``_geometry``, numpy and torch, one definition
each), ridge algebra (``_ridge``), token pooling (``_pooling``) and
length-sorted batches (``_batching``).

Files and folders, one idiom each: a file or a folder written whole and the
one folder lock (``_atomic``: :func:`write_whole`, :class:`FolderLock`), a
setting's canonical digest and file hashes that survive the process
(``_digests``: :func:`setting_digest`, :func:`file_sha256`), a sealed folder
whose manifest hashes its files (``_sealed``), the layer store built on it
(``_store``: Parquet shards of pooled hidden states), the content-addressed
hidden-states cache (``_cache``) and objects saved without pickle
(``_safe_state``).

The process: its memory (``_memory``) and the one torch access point with
the device rule (``_torch``). A count is checked by
:func:`skloes.utils._validation.check_count`, on the floor below.

May import: utils.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
