"""Local Ray and Dask clusters for the distributed tests: on loopback, two
one-thread workers (or 2 CPUs) whose workers import this checkout.

tests/conftest.py puts the tests that run on Ray on one pytest-xdist worker
(two Ray clusters on one machine compete for its ports), one after the other,
and they share one cluster (:func:`shared_ray`): started by the first of them
and shut down after the last (:func:`stop_shared_ray`, called by
tests/conftest.py when the next test does not run on Ray), instead of a
cluster started and stopped by each test.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

# The checkout's root, for the workers' PYTHONPATH.
ROOT = str(Path(__file__).resolve().parents[2])


def local_dask_cluster():
    """Two single-thread worker processes (so each loads its own model)."""
    import distributed

    return distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
        silence_logs=50,
    )


def init_local_ray(ray, **env_vars):
    """Start a local Ray of 2 CPUs whose workers import this checkout and get
    ``env_vars``; the caller shuts it down (``ray.shutdown()``)."""
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, **env_vars}},
        _node_ip_address="127.0.0.1",
        logging_level="ERROR",
    )


def shared_ray():
    """The ``ray`` module, with the local Ray cluster of this test process
    started (:func:`init_local_ray`, one-thread workers) unless it runs.

    A job's actors end with the job; when it ended in an error, they end
    once its executor is collected, which this waits for (up to a minute),
    so that a test finds the cluster's 2 CPUs free. tests/conftest.py shuts
    the cluster down once the Ray tests are done. Skips where Ray Data is
    missing.
    """
    import pytest

    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    if not ray.is_initialized():
        init_local_ray(ray, OMP_NUM_THREADS="1")
        return ray
    gc.collect()  # a failed job's executor, held by a reference cycle
    deadline = time.monotonic() + 60
    total = ray.cluster_resources().get("CPU", 0.0)
    while ray.available_resources().get("CPU", 0.0) < total:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return ray


def stop_shared_ray():
    """Shut down this process's Ray cluster, if one runs."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
