"""Fixtures of the scale tests: small texts, a tiny model's stores."""

from __future__ import annotations

import pytest
from _support.texts import make_texts

pytest.importorskip("pyarrow")

SHARD = 64
# A distributed test that hangs fails after this long (its fixtures still
# shut the cluster down); no test asserts on speed.
HANG_SECONDS = 900


@pytest.fixture(autouse=True)
def _bounded():
    """Bound each test in time with SIGALRM (the main thread's signal)."""
    import signal

    def hang(signum, frame):
        raise TimeoutError(f"the test ran past {HANG_SECONDS} s (a hung cluster?)")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def ray_cluster():
    """The local Ray cluster of 2 CPUs whose workers import this checkout,
    shared by the Ray tests of the session (``_support.clusters.shared_ray``;
    tests/conftest.py puts them on one worker and shuts it down after them)."""
    from _support.clusters import shared_ray

    return shared_ray()


@pytest.fixture(scope="session")
def texts():
    return make_texts(230)


@pytest.fixture(scope="session")
def reference(tiny_model_path, texts):
    """Every layer of the tiny model on ``texts``, one process, in memory, in
    the stores' shards of 64 texts (a shard's batches are those of one
    transform of its texts, so the store holds these bits exactly)."""
    import numpy as np
    from _support.rounding import assert_same_states

    from skloes import HiddenStatesTransformer

    hst = HiddenStatesTransformer(tiny_model_path, device="cpu").fit(texts)
    parts = [hst.transform(texts[i : i + SHARD]) for i in range(0, len(texts), SHARD)]
    whole = hst.transform(texts)
    stack = np.concatenate(parts, axis=1)
    assert_same_states(stack, whole)  # other batches: equal up to rounding
    return stack


@pytest.fixture
def extract(tiny_model_path):
    """``extract_to_store`` with the tiny model and quiet defaults."""
    from _support.probes import quiet_extract

    return quiet_extract(tiny_model_path, SHARD)
