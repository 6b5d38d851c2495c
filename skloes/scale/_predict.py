"""Batch prediction at scale: a saved probe over files of any size, resumably.

Each worker loads the probe once, by the rule of
:func:`~skloes.probe.load_probe` (a probe saved with an exported graph runs
on ONNX Runtime through :func:`~skloes.serving.open_exported`, without
torch), and
turns each shard of the input into a Parquet part of predictions, written
whole; the driver records the parts in a hidden folder beside the output and,
when every row is predicted, joins them into the one output file (written
aside, then renamed). A killed job resumes from the same call.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from skloes.core._atomic import foreign_problem
from skloes.core._store import settings_digest
from skloes.scale._engines import ENGINES, run_job, shard_tasks
from skloes.scale._input import TEXT, check_output, chunk_digest, open_input
from skloes.scale._jobs import JobSpec, loaded, peak_rss
from skloes.scale._sink import PREDICTION_COLUMNS, PartsSink, parts_manifest
from skloes.utils._validation import check_count

__all__ = ["PartsSpec", "PredictSpec", "PredictWorker", "predict_to_parquet"]

RUNTIMES = ("auto", "torch", "onnx")


def _probe_digest(folder):
    """Hash of every file of a saved probe folder (names and contents)."""
    from skloes.core._digests import file_sha256

    parts = [
        f"{p.relative_to(folder).as_posix()}:{file_sha256(p)}"
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    ]
    return settings_digest({"files": parts})


def predictions_with_proba(probe, texts):
    """The prediction and, for a classifier, the class probabilities of
    ``texts`` from one pass of the model."""
    if hasattr(probe, "predict_with_proba"):  # an exported graph: one pass
        return probe.predict_with_proba(texts)
    pipe = getattr(probe, "pipeline_", probe)
    features = pipe[:-1].transform(texts)
    head = pipe[-1]
    proba = None
    if getattr(head, "classes_", None) is not None and hasattr(head, "predict_proba"):
        proba = head.predict_proba(features)
    return head.predict(features), proba


@dataclass(frozen=True)
class PartsSpec(JobSpec):
    """What every worker of a job writing a predictions file is told
    (:class:`JobSpec`'s fields: ``output`` the file, ``folder`` its hidden
    parts folder; and ``id_column``, the user's id column or None)."""

    id_column: str | None

    @classmethod
    def of(cls, out, manifest, threads=None, id_column=None, **fields):
        """The spec of a job writing ``out``, its parts folder's manifest
        ``manifest`` (``fields``: a subclass's own)."""
        return cls(
            output=str(out),
            folder=str(PartsSink.parts_folder(out)),
            digest=manifest["digest"],
            threads=threads,
            id_column=id_column,
            **fields,
        )

    def sink(self, owner="skloes"):
        """The predictions' parts sink."""
        return PartsSink(self.output, self.digest, owner, id_column=self.id_column)


@dataclass(frozen=True)
class PredictSpec(PartsSpec):
    """What every worker of :func:`predict_to_parquet` is told
    (:class:`PartsSpec`'s fields, and):

    Parameters
    ----------
    probe : str
        The saved probe folder, resolved.
    probe_digest : str
        The hash of its files.
    runtime : {"auto", "torch", "onnx"}
        As in :func:`~skloes.probe.load_probe`.
    batch_size : int or None
        Texts per forward pass (None: the probe's).
    trust_remote_code : bool
        As in :func:`~skloes.probe.load_probe`.
    """

    probe: str
    probe_digest: str
    runtime: str
    batch_size: int | None
    trust_remote_code: bool


class PredictWorker:
    """What runs on a worker: the probe loaded once, one part file per call.

    Parameters
    ----------
    spec : PredictSpec
        The job's spec (from :func:`predict_to_parquet`).
    """

    def __init__(self, spec):
        self.spec = spec

    def probe(self):
        """The probe of this worker process (loaded once)."""
        spec = self.spec
        key = json.dumps(
            [spec.probe, spec.probe_digest, spec.runtime, spec.batch_size]
            + [spec.trust_remote_code, spec.threads]
        )
        return loaded("probe", key, self._load)

    def _load(self):
        """An exported graph when the folder's manifest has one and the
        runtime allows it (ONNX Runtime with the worker's threads, no
        torch), else the torch probe; the same rule as
        :func:`~skloes.probe.load_probe`."""
        import skloes.probe_folder as probe_folder
        from skloes.probe import load_probe
        from skloes.serving import open_exported

        folder, runtime = self.spec.probe, self.spec.runtime
        threads = self.spec.threads
        owner = "predict_to_parquet"
        manifest = probe_folder.read_manifest(folder, owner)
        if runtime == "onnx" or (runtime == "auto" and "export" in manifest):
            export = probe_folder.export_entry(manifest, folder, owner)
            return open_exported(
                folder,
                export,
                n_threads=threads,
                batch_size=self.spec.batch_size,
                owner=owner,
            )
        probe = load_probe(
            folder, runtime=runtime, trust_remote_code=self.spec.trust_remote_code
        )
        pipe = getattr(probe, "pipeline_", probe)
        if hasattr(pipe, "steps"):  # torch: the extractor's own settings
            params = {"verbose": 0}
            if self.spec.batch_size:
                params["batch_size"] = self.spec.batch_size
            pipe[0].set_params(**params)
            if threads:
                from skloes.core._torch import torch

                torch.set_num_threads(int(threads))
        return probe

    def __call__(self, task):
        """Predict one shard; write and hash its part; return its record."""
        start = time.perf_counter()
        probe = self.probe()
        texts = task.table.column(TEXT).to_pylist()
        prediction, proba = predictions_with_proba(probe, texts)
        classes = getattr(probe, "classes_", None) if proba is not None else None
        record = self.spec.sink().write(task, prediction, proba, classes)
        return {
            "record": record,
            "seconds": time.perf_counter() - start,
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "peak_rss": peak_rss(),
            "torch_imported": "torch" in sys.modules,
        }


def _check_out(out, overwrite, owner):
    path = Path(out)
    if path.suffix.lower() not in (".parquet", ".pq"):
        raise ValueError(f"{owner}: `out` must be a .parquet file; got {str(out)!r}.")
    if path.is_dir() and not path.is_symlink():
        raise ValueError(f"{owner}: `out` {str(out)!r} is a folder; give a file name.")
    problem = foreign_problem(path)
    if problem:  # never written through a link, nor into a pipe
        raise ValueError(
            f"{owner}: `out` {str(out)!r} {problem}; skloes writes only regular "
            "files: give another file name."
        )
    if path.exists() and not overwrite:
        raise ValueError(
            f"{owner}: `out` {str(out)!r} exists; pass overwrite=True to replace it."
        )
    if not path.parent.is_dir():
        raise ValueError(
            f"{owner}: `out` {str(out)!r}: folder {str(path.parent)!r} does not exist."
        )
    return path


def predict_to_parquet(
    probe,
    data,
    out,
    *,
    engine="local",
    text_column="text",
    id_column=None,
    runtime="auto",
    batch_size=None,
    shard_size=2048,
    address=None,
    n_workers=None,
    threads_per_worker=None,
    num_gpus=0,
    trust_remote_code=False,
    overwrite=False,
    verbose=1,
    callback=None,
):
    """Predict every text of a file or folder with a saved probe, into Parquet.

    Every worker (this process, a Ray actor or a Dask worker) loads the probe
    once through :func:`~skloes.probe.load_probe`: a probe saved with an
    exported graph runs on ONNX Runtime, without torch. The input is read in
    shards of ``shard_size`` rows; each becomes a Parquet part in a hidden
    folder beside ``out``, written whole, and the parts are joined into
    ``out`` when every row is predicted. The same call resumes a killed sink.

    Read more in the :ref:`User Guide <scale_predict>`.

    Parameters
    ----------
    probe : str or os.PathLike
        A folder written by :func:`~skloes.probe.save_probe`.
    data : list of str, DataFrame, str or os.PathLike
        Texts: a list, a DataFrame, a CSV/TSV/JSONL/Parquet file or a folder
        of them.
    out : str or os.PathLike
        The ``.parquet`` file to write: ``row_id`` (the input position), the
        ``id_column`` if given, ``prediction`` and, for a classifier,
        ``proba_<class>`` per class.
    engine : {"local", "ray", "dask"}, default="local"
        Where the shards run (see :func:`extract_to_store`).
    text_column : str, default="text"
        The text column of a table or file.
    id_column : str or None, default=None
        The user's id column, kept beside each prediction.
    runtime : {"auto", "torch", "onnx"}, default="auto"
        As in :func:`~skloes.probe.load_probe`.
    batch_size : int or None, default=None
        Texts per forward pass of a torch probe (None: the probe's).
    shard_size : int, default=2048
        Rows per shard.
    address : str or None, default=None
        The Ray or Dask cluster, as in :func:`extract_to_store`.
    n_workers : int or None, default=None
        Ray actors or local Dask workers, as in :func:`extract_to_store`.
    threads_per_worker : int or None, default=None
        Threads of each worker (torch, or ONNX Runtime for an exported probe).
    num_gpus : float, default=0
        GPUs per Ray actor.
    trust_remote_code : bool, default=False
        As in :func:`~skloes.probe.load_probe`.
    overwrite : bool, default=False
        Replace ``out`` if it exists.
    verbose : int, default=1
        ``>= 1`` shows a progress bar of the rows.
    callback : callable or None, default=None
        Called with each finished shard's result.

    Returns
    -------
    out : pathlib.Path
        The predictions file.

    See Also
    --------
    extract_to_store : The same engines for hidden states.

    Examples
    --------
    >>> from skloes.scale import predict_to_parquet
    >>> predict_to_parquet("my_probe", "texts.parquet", "preds.parquet",
    ...                    id_column="doc_id")  # doctest: +SKIP
    PosixPath('preds.parquet')
    """
    owner = "predict_to_parquet"
    if engine not in ENGINES or runtime not in RUNTIMES:
        raise ValueError(
            f"{owner}: `engine` must be one of {ENGINES} and `runtime` one of "
            f"{RUNTIMES}; got {engine!r} and {runtime!r}."
        )
    check_count(shard_size, owner, "shard_size")
    out = _check_out(out, overwrite, owner)
    source = open_input(
        data,
        text_column=text_column,
        id_column=id_column,
        owner=owner,
        reserved=PREDICTION_COLUMNS,
    )
    check_output(out, source, owner)
    threads = threads_per_worker or (None if engine == "local" else 1)
    spec, manifest = _predict_spec(
        probe, out, source, shard_size, runtime, batch_size, threads, trust_remote_code
    )
    run_job(
        spec,
        manifest,
        shard_tasks(source.chunks(shard_size), shard_size, _digest_of(id_column)),
        PredictWorker,
        owner=owner,
        engine=engine,
        engine_kw={"address": address, "n_workers": n_workers, "num_gpus": num_gpus},
        total=source.n_rows(),
        verbose=verbose,
        callback=callback,
    )
    return out


def _digest_of(id_column):
    """A chunk's input digest: its texts and ids."""

    def digest(table):
        ids = [table.column(id_column).to_pylist()] if id_column else None
        return chunk_digest(table.column(TEXT).to_pylist(), ids)

    return digest


def _predict_spec(
    probe, out, source, shard_size, runtime, batch_size, threads, trust_remote_code
):
    """The job's spec and new manifest, the probe checked to load here first."""
    from skloes.probe import load_probe

    if not isinstance(probe, (str, os.PathLike)):
        raise TypeError(
            "predict_to_parquet: `probe` must be a saved probe folder (a str or "
            f"os.PathLike); got {type(probe).__name__}."
        )
    load_probe(probe, runtime=runtime)  # a bad folder fails here, not on workers
    manifest = parts_manifest(
        {
            "probe": _probe_digest(probe),
            "runtime": runtime,
            "id_column": source.id_column,
            "shard_size": int(shard_size),
            "out": out.name,
        }
    )
    spec = PredictSpec.of(
        out,
        manifest,
        threads=threads,
        id_column=source.id_column,
        probe=str(Path(probe).resolve()),
        probe_digest=manifest["probe"],
        runtime=runtime,
        batch_size=batch_size,
        trust_remote_code=bool(trust_remote_code),
    )
    return spec, manifest
