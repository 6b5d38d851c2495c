"""Killed with SIGKILL half way, a job completes on re-run with the same bits.

The driver (a child process running the local engine) is killed while it
writes shards; a worker of a Dask cluster, and a Ray actor, are killed while
the job runs. Whatever state each kill leaves, every shard file in the store
is whole, and the same call run again completes the store with exactly one
row per input row and features bitwise equal to an uninterrupted run's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _support.clusters import ROOT, local_dask_cluster
from _support.texts import make_texts

from skloes.scale import LayerStore

N = 240
SHARD = 16

JOB = """
import sys, time
from skloes.scale import extract_to_store
data, store, model, pause = sys.argv[1:5]
extract_to_store(
    data, store, model=model, shard_size=16, verbose=0, device="cpu",
    threads_per_worker=1, callback=lambda result: time.sleep(float(pause)),
)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    import pandas as pd

    path = tmp_path_factory.mktemp("input") / "texts.parquet"
    pd.DataFrame({"text": make_texts(N, seed=1)}).to_parquet(path)
    return path


def _child(data, store, model, pause):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", JOB, str(data), str(store), str(model), str(pause)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _shards(store):
    return sorted(Path(store).glob("part-*.parquet"))


def _every_shard_is_whole(store):
    import pyarrow.parquet as pq

    for file in _shards(store):
        table = pq.read_table(file)  # a torn file has no footer: this raises
        assert len(table) == SHARD or file == _shards(store)[-1]


def _check_complete_and_equal(store, reference):
    store = LayerStore(store).verify()
    ids = store.row_ids()
    assert len(ids) == N and len(np.unique(ids)) == N
    np.testing.assert_array_equal(np.sort(ids), np.arange(N))
    # bitwise on any CPU: each shard is one transform of the same texts,
    # whether written before the kill or after
    np.testing.assert_array_equal(store.read(), LayerStore(reference).read())


def test_a_driver_killed_half_way_resumes_to_the_same_bits(
    data, tiny_model_path, tmp_path
):
    store = tmp_path / "killed"
    child = _child(data, store, tiny_model_path, pause=0.3)
    deadline = time.monotonic() + 300
    while len(_shards(store)) < N // SHARD // 2 and time.monotonic() < deadline:
        if child.poll() is not None:
            pytest.fail(f"the job ended before the kill: {child.stderr.read()!r}")
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    written = len(_shards(store))
    assert 0 < written < N // SHARD
    _every_shard_is_whole(store)
    assert not LayerStore(store).complete
    # Re-run the same job, then an uninterrupted one, each in a fresh process.
    for folder, pause in ((store, 0), (tmp_path / "whole", 0)):
        rerun = _child(data, folder, tiny_model_path, pause)
        assert rerun.wait(timeout=300) == 0, rerun.stderr.read()
    _check_complete_and_equal(store, tmp_path / "whole")


def _killer(after):
    """A callback that SIGKILLs the worker of the ``after``-th result."""
    seen = []

    def kill(result):
        seen.append(result)
        if len(seen) == after:
            os.kill(int(result["worker"].rsplit(":", 1)[1]), signal.SIGKILL)

    return kill


def _run_killed_then_resumed(extract, data, tmp_path, engine):
    store = tmp_path / "killed"
    kw = {"engine": engine, "shard_size": SHARD, "threads_per_worker": 1}
    try:
        extract(data, store, callback=_killer(after=N // SHARD // 2), **kw)
    except Exception:  # the engine may give up on the lost shard: resume
        pass
    _every_shard_is_whole(store)
    extract(data, store, **kw)
    # the uninterrupted run on one Ray actor (each actor of a job starts a
    # process that imports torch, the bulk of this test's time)
    whole = {"n_workers": 1} if engine == "ray" else {}
    extract(data, tmp_path / "whole", **kw, **whole)
    _check_complete_and_equal(store, tmp_path / "whole")


def test_a_dask_worker_killed_half_way_resumes_to_the_same_bits(
    data, extract, tmp_path
):
    distributed = pytest.importorskip("distributed")
    with (
        local_dask_cluster() as cluster,
        distributed.Client(cluster, timeout="60s"),
    ):
        _run_killed_then_resumed(extract, data, tmp_path, "dask")


def test_a_ray_actor_killed_half_way_resumes_to_the_same_bits(
    data, extract, ray_cluster, tmp_path
):
    _run_killed_then_resumed(extract, data, tmp_path, "ray")
