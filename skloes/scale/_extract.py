"""Extraction to a layer store: one function, on the local process, Ray or Dask.

The driver reads the input in shards of ``shard_size`` rows (shard ``i`` holds
the kept rows ``i*shard_size ..``), skips the shards the store already holds
whole and verified, and hands the rest to an engine; a worker (the local
process, a Ray actor or a Dask worker) loads the model once and turns each
shard into one Parquet file, written aside and renamed; the driver records
each finished shard in the manifest. Killed at any moment, the job resumes
from the same call: recorded shards are verified by their sha256, shards
written but not yet recorded are adopted after their footer is checked, and
the rest are computed again. See :ref:`layer_store`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from skloes.core._store import (
    FLOAT16_MAX,
    LayerStore,
    StoreError,
    check_positions,
    new_manifest,
)
from skloes.probe_folder import check_folder_arg
from skloes.scale._engines import ENGINES, run_job, shard_tasks
from skloes.scale._input import TEXT, check_output, chunk_digest, open_input
from skloes.scale._jobs import JobSpec, loaded, peak_rss
from skloes.scale._modality import blank_inputs, job_modality
from skloes.scale._sink import StoreSink
from skloes.utils._validation import check_count

__all__ = ["ExtractSpec", "ShardWorker", "extract_to_store"]

# ``shard_size=None``: about this many bytes of layers per shard, within
# [MIN_SHARD, MAX_SHARD] rows and rounded to a multiple of 64.
SHARD_BYTES = 32 << 20
MIN_SHARD, MAX_SHARD = 64, 8192
# A layer is planned in float16 only when the first shard's values stay below
# this (a quarter of float16's range: room for later shards).
FLOAT16_SAFE = FLOAT16_MAX / 4
# HiddenStatesTransformer parameters a job passes through ``extractor_params``.
_OWN = ("model", "layers", "pooling", "max_length", "batch_size", "precision")


@dataclass(frozen=True)
class ExtractSpec(JobSpec):
    """What every worker of an extraction is told (:class:`JobSpec`'s
    fields, ``output`` and ``folder`` both the store folder, and):

    Parameters
    ----------
    extractor : dict
        The :class:`~skloes.extraction.HiddenStatesTransformer` parameters.
    fingerprint : str
        The model files' fingerprint on the driver (a worker's must match).
    layers : list of int
        The layers a shard holds, in order.
    columns : list of str
        The user's columns a shard keeps.
    dtype : {"float32", "float16"}
        The store's dtype.
    float16_overflow : {"error", "float32"}
        What a layer too large for float16 does (see :func:`plan_dtypes`).
    layer_dtypes : list of str or None
        Each layer's dtype; None until the first shard plans them.
    modality : {"text", "image", "audio"}, default="text"
        What the input column holds (image or audio file paths for those
        models); a worker fits its extractor on a blank input of it.
    """

    extractor: dict
    fingerprint: str
    layers: list
    columns: list
    dtype: str
    float16_overflow: str
    layer_dtypes: list | None
    modality: str = "text"

    def sink(self, owner="skloes"):
        """The store's sink."""
        return StoreSink(
            self.folder, self.digest, owner, layers=self.layers, columns=self.columns
        )

    def planned(self, sink):
        """This spec with the layers' dtypes the store holds now."""
        return replace(self, layer_dtypes=sink.layer_dtypes)


class ShardWorker:
    """What runs on a worker: the model loaded once, one shard file per call.

    Parameters
    ----------
    spec : ExtractSpec
        The job's spec (from :func:`extract_to_store`).
    """

    def __init__(self, spec):
        self.spec = spec

    def extractor(self):
        """The fitted extractor of this worker process (loaded once)."""
        if self.spec.threads:
            from skloes.core._torch import torch

            torch.set_num_threads(int(self.spec.threads))
        key = json.dumps(
            [self.spec.extractor, self.spec.fingerprint], sort_keys=True, default=str
        )
        return loaded("extractor", key, self._load)

    def _load(self):
        from skloes.extraction import HiddenStatesTransformer

        hst = HiddenStatesTransformer(**self.spec.extractor).fit(
            blank_inputs(self.spec.modality)
        )
        if hst.model_fingerprint_ != self.spec.fingerprint:
            raise StoreError(
                self.spec.output,
                f"the model files on worker {socket.gethostname()} "
                f"({hst.model_path_}) hash differently from the driver's; "
                "every worker needs the same model files.",
            )
        return hst

    def __call__(self, task):
        """Extract, write and hash one shard; return its record."""
        start = time.perf_counter()
        texts = task.table.column(TEXT).to_pylist()
        stack = self.extractor().transform(texts)
        dtypes = self.spec.layer_dtypes
        planned = dtypes is None
        if planned:
            dtypes = plan_dtypes(stack, self.spec)
        check_float16(stack, dtypes, self.spec, task.index)
        record = self.spec.sink().write(task, stack, dtypes)
        return {
            "record": record,
            "layer_dtypes": list(dtypes) if planned else None,
            "seconds": time.perf_counter() - start,
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "peak_rss": peak_rss(),
            "cpu_s": time.process_time(),
        }


def plan_dtypes(stack, spec):
    """Each layer's dtype, from the first shard: float16 only where it fits.

    With ``dtype="float16"``, a layer whose values in the first shard exceed
    :data:`FLOAT16_SAFE` is kept in float32 with a warning
    (``float16_overflow="float32"``) or refused (``"error"``).
    """
    layers = spec.layers
    if spec.dtype == "float32":
        return ["float32"] * len(layers)
    peaks = np.abs(stack).max(axis=(1, 2))
    big = [int(l) for l, p in zip(layers, peaks, strict=True) if p > FLOAT16_SAFE]
    if big and spec.float16_overflow == "error":
        raise StoreError(
            spec.output,
            f"layers {big} reach {float(peaks.max()):.4g} in the first shard, beyond "
            f"float16's safe range ({FLOAT16_SAFE:.0f}); use dtype='float32', or "
            "float16_overflow='float32' to keep those layers in float32.",
        )
    if big:
        warnings.warn(
            f"extract_to_store: layers {big} reach {float(peaks.max()):.4g} in the "
            "first shard, beyond float16's safe range; they are stored in float32.",
            UserWarning,
            stacklevel=2,
        )
    return ["float32" if int(l) in big else "float16" for l in layers]


def check_float16(stack, dtypes, spec, index):
    """Refuse a shard whose float16 layer would overflow to inf."""
    for i, dtype in enumerate(dtypes):
        if dtype == "float16":
            peak = float(np.abs(stack[i]).max())
            if peak > FLOAT16_MAX:
                raise StoreError(
                    spec.output,
                    f"layer {spec.layers[i]} reaches {peak:.4g} in shard {index}, "
                    "beyond float16's range (planned from the first shard); "
                    "extract into a new store with dtype='float32'.",
                )


# ------------------------------------------------------------ the function
def resolve_job_layers(layers, owner):
    """``layers`` as :class:`~skloes.extraction.HiddenStatesTransformer`
    takes them: "all", indices, or those of a fitted selector or probe (a
    probe folder, a probe, a pruned pipeline)."""
    if isinstance(layers, os.PathLike) or (isinstance(layers, str) and layers != "all"):
        from skloes.probe import load_probe

        layers = load_probe(layers)
    if hasattr(layers, "selected_layers_") and hasattr(layers, "predict"):
        return [int(l) for l in layers.selected_layers_]  # a probe: model indices
    steps = getattr(layers, "steps", None)
    if steps and hasattr(steps[0][1], "layers_"):
        return [int(l) for l in steps[0][1].layers_]  # a pruned pipeline
    if hasattr(layers, "get_support"):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(layers)
        return ("selector", layers)
    return layers


def _selector_layers(selector, n_hidden, owner):
    if selector.n_layers_in_ != n_hidden:
        raise ValueError(
            f"{owner}: `layers` is a selector fitted on {selector.n_layers_in_} "
            f"layers, but the model has {n_hidden} hidden states, so its picks are "
            "not the model's layer indices; pass them as a list."
        )
    return [int(l) for l in selector.selected_layers_]


def _driver_extractor(params, layers, owner, modality="text"):
    """The job's extractor, fitted on the driver (no weights loaded): the
    model's fingerprint, layers and width (of the tower that takes
    ``modality``)."""
    from skloes.extraction import HiddenStatesTransformer

    selector = None
    if isinstance(layers, tuple) and layers[:1] == ("selector",):
        selector, layers = layers[1], "all"
    blank = blank_inputs(modality)
    hst = HiddenStatesTransformer(**params, layers=layers).fit(blank)
    if selector is not None:
        picked = _selector_layers(selector, hst.n_model_layers_, owner)
        hst = HiddenStatesTransformer(**params, layers=picked).fit(blank)
    return hst


def _shard_size(shard_size, n_layers, dim, dtype, owner):
    if shard_size is not None:
        return check_count(shard_size, owner, "shard_size")
    row_bytes = n_layers * dim * np.dtype(dtype).itemsize
    rows = int(np.clip(SHARD_BYTES // max(row_bytes, 1), MIN_SHARD, MAX_SHARD))
    return max(MIN_SHARD, rows // 64 * 64)


def _check_params(engine, dtype, float16_overflow, extractor_params, owner):
    if engine not in ENGINES:
        raise ValueError(
            f"{owner}: `engine` must be one of {', '.join(map(repr, ENGINES))}; got "
            f"{engine!r}."
        )
    if dtype not in ("float32", "float16"):
        raise ValueError(
            f"{owner}: `dtype` must be 'float32' or 'float16'; got {dtype!r}."
        )
    if float16_overflow not in ("error", "float32"):
        raise ValueError(
            f"{owner}: `float16_overflow` must be 'error' or 'float32'; got "
            f"{float16_overflow!r}."
        )
    params = dict(extractor_params or {})
    bad = [k for k in params if k in _OWN + ("output", "dtype", "cache", "verbose")]
    if bad:
        raise ValueError(
            f"{owner}: `extractor_params` sets {bad[0]!r}, which the job sets "
            "itself (or which has its own parameter); drop it."
        )
    return params


def job_spec(hst, params, store, manifest, float16_overflow, threads):
    """What a worker is told (plain data: it travels to Ray and Dask workers)."""
    layers = [int(l) for l in hst.layers_]
    extractor = {**params, "layers": layers}
    extractor.pop("verbose", None)
    return ExtractSpec(
        output=str(store),
        folder=str(store),
        digest=manifest["digest"],
        threads=threads,
        extractor=extractor,
        fingerprint=hst.model_fingerprint_,
        layers=layers,
        columns=list(manifest["columns"]),
        dtype=manifest["dtype"],
        float16_overflow=float16_overflow,
        layer_dtypes=manifest.get("layer_dtypes"),
        modality=hst.modality_,
    )


def extract_to_store(
    data,
    store,
    *,
    model=None,
    layers="all",
    engine="local",
    text_column="text",
    id_column=None,
    columns=None,
    rows=None,
    pooling="mean",
    max_length=512,
    batch_size=32,
    precision="float32",
    dtype="float32",
    float16_overflow="error",
    device="auto",
    extractor_params=None,
    shard_size=None,
    address=None,
    n_workers=None,
    threads_per_worker=None,
    num_gpus=0,
    verbose=1,
    callback=None,
):
    """Extract the pooled hidden states of many texts into a layer store.

    The input is read in shards of ``shard_size`` rows; each shard goes
    through the model on a worker (this process, a Ray actor or a Dask
    worker, each loading the model once) and becomes one Parquet file of the
    store, written whole or not at all. Calling it again with the same
    arguments resumes a killed or failed job: the shards the store holds,
    verified by their sha256, are skipped (see :ref:`layer_store`).

    Read more in the :ref:`User Guide <layer_store>`.

    Parameters
    ----------
    data : list of str, DataFrame, str or os.PathLike
        Texts: a list, a pandas or polars DataFrame, a CSV/TSV/JSONL/Parquet
        file, or a folder of them (read in sorted name order).
    store : str or os.PathLike
        The store folder: new, empty, or a store of the same job to resume.
    model : str, os.PathLike or None, default=None
        As :class:`~skloes.extraction.HiddenStatesTransformer` takes it
        (None: the bundled MiniLM).
    layers : "all", int, list of int, selector, probe or str, default="all"
        Hugging Face ``hidden_states`` indices (0 = embedding output); or a
        fitted probe, a probe folder (:func:`~skloes.probe.load_probe`), a
        pruned pipeline, or a fitted selector over all the model's layers:
        their selected layers. The forward pass stops at the deepest.
    engine : {"local", "ray", "dask"}, default="local"
        Where the shards run: this process; a Ray Data actor pool (one model
        per actor); or a Dask cluster (one model per worker).
    text_column : str, default="text"
        The text column of a table or file.
    id_column : str or None, default=None
        The user's id column, kept in the store beside ``row_id``.
    columns : list of str or None, default=None
        Further columns kept in the store (labels, groups).
    rows : array-like of int or bool, or None, default=None
        Input positions to extract (sorted or not), or a boolean mask of one
        value per input row; None: every row. A position past the input's
        end is an error.
    pooling : str, default="mean"
        Token pooling (see :class:`~skloes.extraction.HiddenStatesTransformer`).
    max_length : int, default=512
        Tokens kept per text.
    batch_size : int, default=32
        Texts per forward pass.
    precision : {"float32", "bfloat16", "int8"}, default="float32"
        Arithmetic of the forward pass.
    dtype : {"float32", "float16"}, default="float32"
        Storage dtype of the layers. With float16, the first shard plans each
        layer's dtype: a layer whose values exceed a quarter of float16's
        range there is refused or kept in float32 (``float16_overflow``), and
        a later shard that would overflow is an error.
    float16_overflow : {"error", "float32"}, default="error"
        What a layer too large for float16 does: stop the sink, or stay in
        float32 with a warning.
    device : str, default="auto"
        Torch device of each worker.
    extractor_params : dict or None, default=None
        Further :class:`~skloes.extraction.HiddenStatesTransformer`
        parameters (``exclude_tokens``, ``max_batch_tokens``...).
    shard_size : int or None, default=None
        Rows per shard; None: about 32 MiB of layers per shard.
    address : str or None, default=None
        The cluster: a Ray address (``"ray://head:10001"``, ``"auto"``) or a
        Dask scheduler (``"tcp://scheduler:8786"``). None: a running
        ``ray.init``/Dask ``Client`` of this process, else a local cluster
        started and shut down by this call.
    n_workers : int or None, default=None
        Ray actors (default: one per ``num_gpus`` GPUs, or per
        ``threads_per_worker`` CPUs), or workers of a local Dask cluster.
    threads_per_worker : int or None, default=None
        Torch threads per worker (default: 1 on Ray and Dask; torch's own
        setting locally).
    num_gpus : float, default=0
        GPUs per Ray actor (passed to Ray Data).
    verbose : int, default=1
        ``>= 1`` shows a progress bar of the rows.
    callback : callable or None, default=None
        Called on the driver with each finished shard's result, a dict: the
        manifest ``record``, ``seconds`` (the shard's), ``worker``
        (``host:pid``), the worker process's ``peak_rss`` (bytes) and its
        ``cpu_s`` (CPU seconds so far).

    Returns
    -------
    store : LayerStore
        The complete store.

    See Also
    --------
    LayerStore : Read a store.
    probe_at_scale : Choose layers on a sample, then extract only those.

    Examples
    --------
    >>> from skloes.scale import extract_to_store
    >>> store = extract_to_store(["a good film", "a dull plot"], "my_store",
    ...                          layers=[2, 4])  # doctest: +SKIP
    >>> store.shape  # doctest: +SKIP
    (2, 2, 384)
    """
    owner = "extract_to_store"
    params = _check_params(engine, dtype, float16_overflow, extractor_params, owner)
    params.update(
        model=model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        precision=precision,
        device=device,
    )
    check_store_arg(store, owner)
    layers = resolve_job_layers(layers, owner)
    source = open_input(
        data,
        text_column=text_column,
        id_column=id_column,
        columns=columns or (),
        owner=owner,
    )
    check_output(store, source, owner, "store")
    n_input = source.n_rows()
    rows = check_input_rows(rows, n_input, owner)
    modality = job_modality(params, source, owner)
    hst = _driver_extractor(params, layers, owner, modality)
    size = _shard_size(shard_size, hst.n_layers_, hst.dim_, dtype, owner)
    manifest = _new_manifest(hst, source, dtype, size)
    threads = threads_per_worker or (None if engine == "local" else 1)
    spec = job_spec(hst, params, store, manifest, float16_overflow, threads)
    run_job(
        spec,
        manifest,
        shard_tasks(
            _chunks(source, size, rows, n_input, owner),
            size,
            lambda table: _digest(table, spec.columns),
        ),
        ShardWorker,
        owner=owner,
        engine=engine,
        engine_kw={"address": address, "n_workers": n_workers, "num_gpus": num_gpus},
        total=len(rows) if rows is not None else n_input,
        verbose=verbose,
        callback=callback,
    )
    return LayerStore(store)


def check_store_arg(store, owner):
    """``store``: a folder path (a non-empty str or os.PathLike, no NUL)."""
    check_folder_arg(store, owner, "store")
    if not os.fspath(store):
        raise ValueError(
            f"{owner}: `store` is an empty path; give the folder of the store."
        )


def _chunks(source, size, rows, n_input, owner):
    """The input's chunks of kept rows; ``rows`` checked again at the end
    when the input's length (``n_input``) was unknown until it was read."""
    yield from source.chunks(size, rows)
    if rows is not None and n_input is None:
        check_input_rows(rows, source.total_, owner)


class JobRows(np.ndarray):
    """Sorted input positions from ``rows=``, with what the user gave
    (``given``), checked again once the input's length is known."""


def check_input_rows(rows, n, owner):
    """``rows=`` of a job: sorted unique input positions (integers, or a
    boolean mask of one value per input row), checked against the input's
    length ``n`` (None: unknown until the input is read; checked then)."""
    if rows is None:
        return None
    given = rows.given if isinstance(rows, JobRows) else rows
    values = np.asarray(given)
    if n is None:  # only the kind of values, for now
        n_check = len(values) if values.dtype == bool and values.ndim == 1 else None
        positions = check_positions(
            values, n_check if n_check is not None else np.iinfo(np.int64).max, owner
        )
    else:
        try:
            positions = check_positions(values, n, owner)
        except ValueError as exc:
            raise ValueError(str(exc).replace("there are", "the input has")) from None
    out = np.unique(positions).view(JobRows)
    out.given = given
    return out


def _pooling_name(pooling):
    """The pooling a store records (``"cls"`` is ``"first"``)."""
    return "first" if pooling == "cls" else pooling


def _new_manifest(hst, source, dtype, size):
    from skloes.models._loading import default_model

    reference = hst.model if hst.model is not None else default_model()
    extraction = {
        "pooling": _pooling_name(getattr(hst, "pooling_", hst.pooling)),
        "exclude_tokens": hst.exclude_tokens_,
        "max_length": hst.max_length_,
        "precision": hst.precision,
    }
    if hst.modality_ != "text":  # a two-tower checkpoint has both
        extraction["modality"] = hst.modality_
    model = {
        "reference": str(reference),
        "fingerprint": hst.model_fingerprint_,
        "n_hidden_states": int(hst.n_model_layers_),
    }
    manifest = new_manifest(
        model=model,
        extraction=extraction,
        layers=hst.layers_,
        dim=hst.dim_,
        dtype=dtype,
        columns=source.kept,
        id_column=source.id_column,
        shard_size=size,
    )
    if dtype == "float32":  # nothing to plan
        manifest["layer_dtypes"] = ["float32"] * len(hst.layers_)
    return manifest


def _digest(table, columns):
    """A chunk's input digest: its texts and the user's columns."""
    ids = [table.column(c).to_pylist() for c in columns] if columns else None
    return chunk_digest(table.column(TEXT).to_pylist(), ids)
