"""What the engines carry of a sharded job: its spec, tasks, workers' models,
progress.

A job tells its workers what to do in one frozen value (:class:`JobSpec`,
one subclass per kind of job), cuts its input into tasks
(:class:`ShardTask`); a worker keeps the model (or probe) it loaded between
tasks (:func:`loaded`); the driver shows the rows done (:class:`Progress`).
The job's output folder, from start to seal, is
:class:`~skloes.scale._sink.ShardSink`'s; one function drives a job through
it (:func:`~skloes.scale._engines.run_job`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = [
    "JobSpec",
    "Progress",
    "ShardTask",
    "loaded",
    "peak_rss",
]

# What a worker process keeps between tasks and between jobs: the last model
# (or probe) it loaded, of each kind, with the settings that made it.
_LOADED: dict = {}


def loaded(kind, key, factory):
    """The object ``factory()`` made for ``key`` in this process.

    Kept between tasks, so that a worker loads its model once; one object per
    ``kind``, so that a new job's settings (``key``) replace the old object
    instead of piling up models. A job's own paths (its store) stay out of
    the object: they travel with each task's spec.
    """
    held = _LOADED.get(kind)
    if held is None or held[0] != key:
        _LOADED.pop(kind, None)
        _LOADED[kind] = held = (key, factory())
    return held[1]


@dataclass(frozen=True)
class JobSpec:
    """What every worker of a sharded job is told: plain data, sent to Ray
    and Dask workers with each task. A kind of job adds its own fields and
    says which sink its shards go through (:meth:`sink`).

    Parameters
    ----------
    output : str
        What the job makes, as named in messages: the store folder, or the
        predictions file.
    folder : str
        The folder its shards are written into (the store, or the hidden
        parts folder of a predictions file); Ray stages the tasks in a hidden
        folder inside it.
    digest : str
        The job's settings digest: its manifest's, and each shard footer's.
    threads : int or None
        Threads of each worker (None: the library's own setting).
    """

    output: str
    folder: str
    digest: str
    threads: int | None

    def sink(self, owner="skloes"):
        """The job's :class:`~skloes.scale._sink.ShardSink` (a subclass's)."""
        raise NotImplementedError

    def planned(self, sink):
        """This spec with what the first shard planned (a subclass's; the
        sink says when there is a plan to wait for)."""
        return self


@dataclass
class ShardTask:
    """One shard to run: its index, its rows and their input's digest.

    ``table``: ``row_id``, the texts (for a model) and the user's columns.
    ``values``: what a job run on this process hands its worker beside the
    table (the layers of a store's rows); it never travels to a cluster.
    """

    index: int
    table: object  # pyarrow.Table
    digest: str
    values: object = None


def peak_rss() -> int:
    """Peak resident memory of this process, in bytes (Linux: ru_maxrss KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class Progress:
    """A tqdm bar of the rows (quiet when stderr is no terminal, or verbose=0)."""

    def __init__(self, total, verbose):
        self.bar = None
        if verbose:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc="rows", unit="row", disable=None)

    def update(self, n):
        """Count ``n`` more rows done."""
        if self.bar is not None:
            self.bar.update(n)

    def close(self):
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
