"""The one runner of a sharded job, and the engines its shards run on: this
process, Ray Data, or Dask.

:func:`run_job` drives every sharded job (extraction to a layer store, batch
prediction, the predictions of :func:`~skloes.scale.probe_at_scale`) through
its sink: start, the shards it lacks handed to an engine and recorded,
complete, and release however it ends.

An engine is an adapter at the edge (see :ref:`layer_store`): it takes the
job's pending shard tasks, runs a worker's callable (one model loaded per
worker) on each, and hands every result back to the driver as it finishes.
skloes schedules nothing itself.

- ``local``: a loop in this process.
- ``ray``: a Ray Data ``map_batches`` over an actor pool (``concurrency``
  actors, each with ``num_gpus`` GPUs and a share of the CPUs that leaves
  room for Ray Data's own work); the tasks are staged as Arrow files in the
  job's hidden ``.skloes-<token>-work`` folder (removed when the job ends,
  however it ends), so the driver never holds the input.
- ``dask``: ``Client.submit`` per shard, at most two tasks per worker in
  flight; each worker process keeps its model between tasks.

A worker process keeps the model it loaded (:func:`~skloes.scale._jobs.loaded`)
and builds the small worker object of each task from the task's spec, so
that a second job on the same cluster writes where it says.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil

from skloes.core._contract import first_line
from skloes.core._store import StoreError
from skloes.scale._jobs import Progress, ShardTask
from skloes.scale._sink import work_folder
from skloes.utils._optional import import_optional

__all__ = ["ENGINES", "ray_pool_size", "run_job", "run_tasks", "shard_tasks"]

ENGINES = ("local", "ray", "dask")
# Dask: tasks in flight per worker.
IN_FLIGHT_PER_WORKER = 2


# ------------------------------------------------------------- the runner
def run_job(
    spec,
    manifest,
    tasks,
    worker_class,
    *,
    owner,
    engine="local",
    engine_kw=None,
    total=None,
    verbose=0,
    callback=None,
):
    """Drive one sharded job through its sink, from start to seal.

    The job's sink (``spec.sink(owner)``) takes its folder and opens
    ``manifest``; the tasks the folder lacks go to ``engine``, where
    ``worker_class(spec)`` writes each shard, and each result is recorded on
    this process as it comes back; once ``tasks`` is read to its end the
    sink completes with the rows read. However the job ends (an input that
    does not read, a worker's error, a completion refused, an interrupt),
    the progress bar closes and the folder's writer lock is released, so
    that the same call, run again in this process, resumes.

    Parameters
    ----------
    spec : JobSpec
        What every worker is told; it names the sink.
    manifest : dict
        The manifest of a new folder (a folder it resumes must hold one of
        the same ``digest``).
    tasks : iterable of ShardTask
        The job's shards in order, read as they are needed (a chunk of input
        that does not read fails inside the job).
    worker_class : type
        Built from ``spec`` on each worker; called with one task, it returns
        a result whose ``record`` is the shard's manifest record.
    owner : str
        Named in messages.
    engine : {"local", "ray", "dask"}, default="local"
        Where the shards run (:func:`run_tasks`).
    engine_kw : dict or None, default=None
        ``address``, ``n_workers``, ``num_gpus`` of a cluster.
    total : int or None, default=None
        Rows of the input, for the progress bar (None: unknown).
    verbose : int, default=0
        ``>= 1`` shows a progress bar of the rows.
    callback : callable or None, default=None
        Called on this process with each finished shard's result.

    Returns
    -------
    sink : ShardSink
        The completed (and released) sink.
    """
    engine_kw = engine_kw or {"address": None, "n_workers": None, "num_gpus": 0}
    sink = spec.sink(owner)
    progress = Progress(total, verbose)
    shards = _Shards(sink, progress, callback)
    try:
        sink.start(manifest)
        pending = shards.pending(tasks)
        if sink.unplanned():  # the first shard plans the others (float16)
            first = next(pending, None)  # (reading on may adopt a planned shard)
            if first is not None and sink.unplanned():
                run_tasks(engine, [first], worker_class, spec, shards.record, engine_kw)
            elif first is not None:
                pending = itertools.chain([first], pending)
        spec = spec.planned(sink)
        run_tasks(engine, pending, worker_class, spec, shards.record, engine_kw)
        sink.complete(shards.rows)
    finally:
        progress.close()
        sink.release()
    return sink


def shard_tasks(chunks, size, digest):
    """The :class:`ShardTask` of each ``(start, table)`` chunk of ``size``
    rows (``digest(table)``: the chunk's input digest)."""
    for start, table in chunks:
        yield ShardTask(start // size, table, digest(table))


class _Shards:
    """The shards a sink still lacks, handed out in order, and their results
    recorded (``rows``: the input rows read so far)."""

    def __init__(self, sink, progress, callback):
        self.sink = sink
        self.progress = progress
        self.callback = callback
        self.rows = 0

    def pending(self, tasks):
        """The tasks not yet done; the done ones count as progress."""
        for task in tasks:
            self.rows += len(task.table)
            if self.sink.done(task):
                self.progress.update(len(task.table))
                continue
            yield task

    def record(self, result):
        """Record one finished shard (the engine's ``on_result``)."""
        self.sink.record(result)
        self.progress.update(result["record"]["rows"])
        if self.callback is not None:
            self.callback(result)


# ---------------------------------------------------------------- engines


def run_tasks(engine, tasks, worker_class, spec, on_result, engine_kw):
    """Run ``worker_class(spec)(task)`` for each task on ``engine``.

    ``on_result`` gets each result on the driver, in completion order.
    ``engine_kw``: ``address``, ``n_workers``, ``num_gpus``.
    """
    if engine == "local":
        worker = None
        for task in tasks:
            worker = worker or worker_class(spec)
            on_result(worker(task))
    elif engine == "dask":
        _run_dask(tasks, worker_class, spec, on_result, **engine_kw)
    else:
        _run_ray(tasks, worker_class, spec, on_result, **engine_kw)


# ------------------------------------------------------------------- dask
def _dask_task(worker_class, spec, task):
    """A shard on a Dask worker (whose process keeps its model between tasks:
    :func:`~skloes.scale._jobs.loaded`)."""
    return worker_class(spec)(task)


def _dask_client(distributed, address, n_workers, threads):
    """The client of ``address``, the running one, or a local cluster
    (returned to be closed)."""
    if address is not None:
        return distributed.Client(address), None
    try:
        return distributed.default_client(), None
    except ValueError:
        pass
    cluster = distributed.LocalCluster(
        n_workers=n_workers or max(1, (os.cpu_count() or 1) // (threads or 1)),
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
    )
    return distributed.Client(cluster), cluster


def _run_dask(tasks, worker_class, spec, on_result, address, n_workers, num_gpus):
    distributed = import_optional("distributed", extra="dask")
    client, cluster = _dask_client(distributed, address, n_workers, spec.threads)
    try:
        n = max(1, len(client.scheduler_info().get("workers", {})))
        window = IN_FLIGHT_PER_WORKER * n
        running = distributed.as_completed()
        for task in tasks:
            running.add(client.submit(_dask_task, worker_class, spec, task, pure=False))
            while running.count() >= window:
                on_result(_result(next(running), spec))
        for future in running:
            on_result(_result(future, spec))
    finally:
        if cluster is not None:
            client.close()
            cluster.close()


def _result(future, spec):
    try:
        return future.result()
    except StoreError:
        raise
    except Exception as exc:  # a worker's error, on one line
        raise RuntimeError(
            f"skloes: a shard of the job writing {spec.output!r} failed on a Dask "
            f"worker: {type(exc).__name__}: {first_line(exc)}"
        ) from exc


# -------------------------------------------------------------------- ray
class RayShardActor:
    """A Ray Data actor: the worker object built once, one staged task per row."""

    def __init__(self, worker_class, spec):
        self.worker = worker_class(spec)

    def __call__(self, batch):
        import numpy as np

        pa = import_optional("pyarrow", extra="store")
        out = []
        for path, index, digest in zip(
            batch["path"], batch["index"], batch["digest"], strict=True
        ):
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
            task = _task(int(index), table, str(digest))
            out.append(json.dumps(self.worker(task)))
        return {"result": np.asarray(out, dtype=object)}


def _task(index, table, digest):
    return ShardTask(index, table, digest)


def ray_pool_size(resources, n_workers, threads, num_gpus, n_tasks):
    """Actors and the CPUs each claims, from the cluster's resources.

    Ray Data needs CPU for its own operators besides the actors: a pool that
    claims every CPU stalls (2 actors of 1 CPU on a 2-CPU cluster waited for
    minutes on the output stage). So each actor claims at most an equal share
    of the CPUs with one share left over.

    Parameters
    ----------
    resources : dict
        ``ray.cluster_resources()``.
    n_workers : int or None
        Actors asked for (None: one per ``num_gpus`` GPUs, or one per
        ``threads`` CPUs).
    threads : int
        Torch threads per actor.
    num_gpus : float
        GPUs per actor.
    n_tasks : int
        Shards to run (no more actors than shards).

    Returns
    -------
    n_actors : int
    num_cpus : float
    """
    cpus = float(resources.get("CPU", 1.0))
    if n_workers is None:
        if num_gpus:
            n_workers = int(float(resources.get("GPU", 0)) // num_gpus)
            if n_workers < 1:
                raise ValueError(
                    f"extract_to_store: `num_gpus`={num_gpus} per actor, but the Ray "
                    f"cluster has {resources.get('GPU', 0)} GPUs."
                )
        else:
            n_workers = max(1, int(cpus // max(threads, 1)))
    n_actors = max(1, min(int(n_workers), int(n_tasks)))
    num_cpus = min(float(threads), cpus / (n_actors + 1))
    return n_actors, round(num_cpus, 3)


def _stage(tasks, folder):
    """Write each task's table as an Arrow file; return the rows of the
    dataset (the driver holds one task at a time)."""
    pa = import_optional("pyarrow", extra="store")
    folder.mkdir(parents=True, exist_ok=True)
    items = []
    for task in tasks:
        path = folder / f"task-{task.index:05d}.arrow"
        with pa.OSFile(str(path), "wb") as sink:
            with pa.ipc.new_file(sink, task.table.schema) as writer:
                writer.write_table(task.table)
        items.append({"path": str(path), "index": task.index, "digest": task.digest})
    return items


def _run_ray(tasks, worker_class, spec, on_result, address, n_workers, num_gpus):
    ray = import_optional("ray", extra="ray")
    import_optional("ray.data", extra="ray")
    # the job's own hidden folder, named by its token; it holds copies of the
    # input texts, so it goes when the job ends, however it ends
    staging = work_folder(spec.folder, spec.digest)
    try:
        _run_staged(
            ray,
            tasks,
            staging,
            worker_class,
            spec,
            on_result,
            address,
            n_workers,
            num_gpus,
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run_staged(
    ray, tasks, staging, worker_class, spec, on_result, address, n_workers, num_gpus
):
    items = _stage(tasks, staging)
    if not items:
        return
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address, include_dashboard=False, logging_level=logging.WARNING
        )
    try:
        n_actors, num_cpus = ray_pool_size(
            ray.cluster_resources(),
            n_workers,
            spec.threads or 1,
            num_gpus,
            len(items),
        )
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        dataset = ray.data.from_items(items, override_num_blocks=len(items))
        results = dataset.map_batches(
            RayShardActor,
            fn_constructor_args=(worker_class, spec),
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=n_actors),
            num_cpus=num_cpus,
            num_gpus=num_gpus or None,
        )
        for row in results.iter_rows():
            on_result(json.loads(row["result"]))
    except Exception as exc:
        if isinstance(exc, StoreError):
            raise
        raise RuntimeError(
            f"skloes: the Ray job writing {spec.output!r} failed: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from exc
    finally:
        if started:
            ray.shutdown()
