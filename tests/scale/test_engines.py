"""The Ray and Dask engines on local clusters: same store, one model per worker.

Each cluster runs on loopback: the Dask cluster lives for this module only,
the Ray cluster is the one the session's Ray tests share
(``_support.clusters.shared_ray``). The stores the engines write hold what
the local engine writes (to float rounding: workers run one torch thread),
with every shard whole.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _support.clusters import ROOT, local_dask_cluster
from _support.decoders import DECODERS, decoder_path
from _support.rounding import assert_same_states

from skloes.scale._engines import ray_pool_size


@pytest.fixture(scope="module")
def dask_client():
    """Two single-thread worker processes (so each loads its own model)."""
    distributed = pytest.importorskip("distributed")
    cluster = local_dask_cluster()
    client = distributed.Client(cluster, timeout="60s")
    client.run(lambda: os.environ.setdefault("PYTHONPATH", ROOT))
    yield client
    client.close()
    cluster.close()


def test_ray_pool_leaves_a_cpu_share_for_ray_data():
    # 2 one-thread actors on 2 CPUs: each claims 2/3, a third is left over.
    assert ray_pool_size({"CPU": 2.0}, 2, 1, 0, 10) == (2, 0.667)
    # One actor per thread's worth of CPUs by default, never more than shards.
    assert ray_pool_size({"CPU": 8.0}, None, 2, 0, 10) == (4, 1.6)
    assert ray_pool_size({"CPU": 8.0}, None, 1, 0, 3) == (3, 1.0)
    # GPUs: one actor per num_gpus, each claiming at most its threads.
    assert ray_pool_size({"CPU": 16.0, "GPU": 4.0}, None, 1, 1, 100) == (4, 1.0)
    with pytest.raises(ValueError, match="num_gpus`=1 per actor, but the Ray"):
        ray_pool_size({"CPU": 4.0}, None, 1, 1, 10)


def _per_worker(results):
    return {r["worker"] for r in results}


def _assert_holds_the_reference(store, reference):
    """The store of the 230 texts is whole: 4 shards of the reference bits
    (up to rounding: the workers run other thread counts)."""
    assert store.complete and store.verify().n_shards == 4
    assert_same_states(store.read(), reference)
    np.testing.assert_array_equal(store.row_ids(), np.arange(230))


# Not rerun capped (a cluster each): the rounding rule they share is checked
# under the caps by the extraction and cache tests.
def test_dask_engine_writes_the_same_store_one_model_per_worker(
    dask_client, extract, texts, reference, tmp_path
):
    from skloes.scale import _jobs

    results = []
    store = extract(texts, tmp_path / "s", engine="dask", callback=results.append)
    _assert_holds_the_reference(store, reference)
    assert len(results) == 4 and all(r["peak_rss"] > 0 for r in results)
    models = dask_client.run(lambda: sorted(_jobs._LOADED))
    used = [m for m in models.values() if m]
    assert used and all(m == ["extractor"] for m in used)  # one model per worker
    assert len(used) == len(_per_worker(results))


def test_ray_engine_writes_the_same_store(
    ray_cluster, extract, texts, reference, tmp_path
):
    results = []
    store = extract(texts, tmp_path / "s", engine="ray", callback=results.append)
    _assert_holds_the_reference(store, reference)
    assert 1 <= len(_per_worker(results)) <= 2  # at most the 2 actors
    # the staged tasks (copies of the texts) are gone, and every hidden file
    hidden = [p.name for p in (tmp_path / "s").iterdir() if p.name.startswith(".")]
    assert hidden == []
    # Resumed on Ray: nothing to do, nothing recomputed.
    results.clear()
    extract(texts, tmp_path / "s", engine="ray", callback=results.append)
    assert results == []


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["dask", "ray"])
def test_minilm_on_a_local_cluster_equals_the_local_engine(
    engine, request, minilm_path, rotten_tomatoes_small, tmp_path
):
    request.getfixturevalue("dask_client" if engine == "dask" else "ray_cluster")
    from skloes.scale import extract_to_store

    texts = [str(t) for t in rotten_tomatoes_small[0][:80]]
    kw = {
        "model": minilm_path,
        "layers": [1, 3],
        "max_length": 48,
        "shard_size": 20,
        "verbose": 0,
        "device": "cpu",
        "threads_per_worker": 1,
    }
    here = extract_to_store(texts, tmp_path / "local", **kw)
    # one Ray actor: a pool of two is test_ray_engine_writes_the_same_store's
    # (each actor of a job starts a process that imports torch and loads
    # the model, the bulk of a small job's time)
    pool = {"n_workers": 1} if engine == "ray" else {}
    there = extract_to_store(texts, tmp_path / engine, engine=engine, **pool, **kw)
    np.testing.assert_allclose(there.read(), here.read(), rtol=1e-4, atol=1e-5)
    assert there.model == here.model and there.n_shards == 4


# Gemma 3's and Qwen2's take 30 to 50 s each on 2 cores (the model loaded in
# a Ray actor, on the local engine and in memory), slow; SmolLM2's runs the
# same path by default, and each family's extraction is checked in this
# process by tests/probe/test_decoder_families.py.
@pytest.mark.integration
@pytest.mark.parametrize(
    "decoder",
    [
        "smollm2",
        pytest.param("gemma3", marks=pytest.mark.slow),
        pytest.param("qwen2", marks=pytest.mark.slow),
    ],
)
def test_a_decoder_store_on_ray_equals_the_local_engine_and_the_extractor(
    decoder, request, rotten_tomatoes_small, tmp_path
):
    """Each decoder family's store (a few real texts, two chosen layers) is
    the same on the local engine, on one Ray actor, and in memory."""
    decoder_path(request, decoder)  # skips before a cluster starts
    request.getfixturevalue("ray_cluster")
    from skloes import HiddenStatesTransformer
    from skloes.scale import extract_to_store

    hub_id, family, n_states, width = DECODERS[decoder]
    texts = [str(t) for t in rotten_tomatoes_small[0][:24]]
    kw = {
        "model": hub_id,
        "layers": [2, n_states - 1],
        "max_length": 16,
        "batch_size": 8,
        "shard_size": 8,
        "verbose": 0,
        "device": "cpu",
        "threads_per_worker": 1,
    }
    here = extract_to_store(texts, tmp_path / "local", **kw)
    there = extract_to_store(texts, tmp_path / "ray", engine="ray", n_workers=1, **kw)
    assert here.complete and there.complete and there.n_shards == 3
    assert there.model == here.model
    hst = HiddenStatesTransformer(
        hub_id, layers=kw["layers"], max_length=16, batch_size=8, device="cpu"
    ).fit(texts[:8])
    assert hst.family_ == family
    memory = np.concatenate([hst.transform(texts[i : i + 8]) for i in (0, 8, 16)], 1)
    assert memory.shape == (2, 24, width)
    scale = np.abs(memory).max(axis=2, keepdims=True)
    for store in (here, there):
        np.testing.assert_array_equal(store.row_ids(), np.arange(24))
        assert np.max(np.abs(store.read() - memory) / scale) < 1e-3
