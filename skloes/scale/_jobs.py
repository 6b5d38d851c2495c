"""What the engines carry of a sharded job: tasks, workers' models, progress.

A job cuts its input into tasks (:class:`ShardTask`); a worker keeps the model (or
probe) it loaded between tasks (:func:`loaded`); the driver shows the rows
done (:class:`Progress`). The job's output folder, from start to seal, is
:class:`~skloes.scale._sink.ShardSink`'s.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = ["Progress", "ShardTask", "loaded", "peak_rss"]

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


@dataclass
class ShardTask:
    """One shard to run: its index, its rows and their texts."""

    index: int
    table: object  # pyarrow.Table: row_id, text, the user's columns
    digest: str


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
