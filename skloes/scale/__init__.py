"""Past one machine: the layer store, extraction on Ray or Dask, heads that stream.

:class:`LayerStore` reads a folder of Parquet shards of pooled hidden states
(one row per text, one column per layer) by layers and rows in bounded
batches, and goes wherever a layer stack does. :func:`extract_to_store`
writes one, on this process, a Ray Data actor pool or a Dask cluster,
resumably. :func:`probe_at_scale` chooses the layers on a stratified sample,
extracts only those for every row, fits a head that streams the store
(:class:`StreamingRidgeClassifier`, :class:`StreamingLogisticRegression`)
and writes predictions; :func:`predict_to_parquet` predicts with a saved
probe over files of any size.

May import: utils, core, models, extraction, metrics, selection, heads, probe,
report.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.core._store import LayerStore, StoreError, StoreView
from skloes.scale._extract import extract_to_store
from skloes.scale._heads import StreamingLogisticRegression, StreamingRidgeClassifier
from skloes.scale._predict import predict_to_parquet
from skloes.scale._workflow import probe_at_scale

__all__ = [
    "LayerStore",
    "StoreError",
    "StoreView",
    "StreamingLogisticRegression",
    "StreamingRidgeClassifier",
    "extract_to_store",
    "predict_to_parquet",
    "probe_at_scale",
]
