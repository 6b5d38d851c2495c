"""The LOES tests run BLAS on one thread."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _single_blas_thread():
    # On a busy 2-core machine, multi-threaded OpenBLAS eigh of a 200x200 Gram
    # can take ~1 s instead of ~5 ms (threads spin-wait); one thread is stable.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
