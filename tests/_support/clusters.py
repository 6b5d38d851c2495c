"""Local Ray and Dask clusters for the distributed tests: on loopback, two
one-thread workers (or 2 CPUs) whose workers import this checkout.

tests/conftest.py puts the test files that call :func:`init_local_ray` on one
pytest-xdist worker (two Ray clusters on one machine compete for its ports).
"""

from __future__ import annotations

import os
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
