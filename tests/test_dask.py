"""Scaling out on Dask: searches on the Dask joblib backend share the hidden-state
cache, extraction in partitions equals the single-process stack, and the LOES
statistics that the user guide says merge chunk by chunk do.

The recipes come from ``doc/user_guide/dask_recipes.py``, the file the user
guide shows, so the documented code is the tested code.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
import importlib.util
import operator
from pathlib import Path

import numpy as np
import pytest

from skloes import LOESSelector
from skloes.metrics import isotropy, layer_similarity

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

RECIPES = Path(__file__).resolve().parents[1] / "doc" / "user_guide" / "dask_recipes.py"


@pytest.fixture(scope="module")
def recipes():
    spec = importlib.util.spec_from_file_location("skloes_dask_recipes", RECIPES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def client():
    """Two single-thread workers in this process (robust on 2 cores)."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        dashboard_address=None,
        silence_logs=50,
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _toy_stack(n=600, n_layers=5, dim=12, n_classes=4, seed=0):
    """Layers with a shared large mean, class signal growing with depth."""
    rng = np.random.RandomState(seed)
    y = rng.randint(n_classes, size=n)
    signal = rng.normal(size=(n_classes, dim))
    H = rng.normal(size=(n_layers, n, dim)) + 50.0  # a large common offset
    for l in range(n_layers):
        H[l] += 0.4 * l * signal[y]
    return H, y


def _chunks(H, sizes):
    edges = np.cumsum([0, *sizes])
    assert edges[-1] == H.shape[1]
    return [H[:, a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


# -------------------------------------------------------- real model on Dask
def _transform_from_cache(texts, cache, params):
    from skloes import HiddenStatesTransformer

    hst = HiddenStatesTransformer(cache=cache, **params)
    return hst.fit(texts).transform(texts)


@pytest.mark.integration
def test_search_on_dask_shares_cache_and_equals_single_process(
    client,
    recipes,
    minilm_path,
    rotten_tomatoes_small,
    texts_through_model,
    tmp_path,
):
    import joblib
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline

    from skloes import HiddenStatesTransformer

    texts, y = rotten_tomatoes_small
    texts, y = list(texts[:60]), y[:60]  # 42 and 18 per class
    n_distinct = len(set(texts))
    cache = tmp_path / "cache"
    params = {"model": minilm_path, "max_length": 64}

    # The reference: one transformer, one process, no cache.
    reference = HiddenStatesTransformer(**params).fit_transform(texts)
    texts_through_model[0] = 0

    # 1. Extraction in two partitions on two workers, into the shared cache.
    stack = recipes.extract_on_dask(texts, npartitions=2, cache=cache, **params)
    assert stack.shape == reference.shape == (7, 60, 384)
    np.testing.assert_allclose(stack, reference, rtol=1e-4, atol=1e-5)
    assert texts_through_model[0] == n_distinct
    assert sum(1 for _ in cache.rglob("*.npy")) == n_distinct

    # 2. A grid search on the Dask joblib backend reads every text from it.
    def search(n_jobs):
        pipe = Pipeline(
            [
                ("hst", HiddenStatesTransformer(cache=cache, **params)),
                ("loes", LOESSelector(random_state=0)),
                ("clf", LogisticRegression(max_iter=2000)),
            ]
        )
        grid = {"loes__n_layers_to_select": [1, 2], "clf__C": [0.1, 1.0]}
        cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
        return GridSearchCV(pipe, grid, cv=cv, n_jobs=n_jobs)

    with distributed.get_task_stream(client) as tasks:
        with joblib.parallel_config(backend="dask"):
            on_dask = search(n_jobs=2).fit(texts, y)
    assert tasks.data, "the fits ran as Dask tasks"
    assert texts_through_model[0] == n_distinct  # one pass per text, in total

    # Every worker reads the whole corpus from the shared folder, running no
    # forward pass (joblib may batch all fits onto one worker, so ask each).
    per_worker = client.run(_transform_from_cache, texts, cache, params)
    assert len(per_worker) == 2
    for array in per_worker.values():
        np.testing.assert_array_equal(array, stack)
    assert texts_through_model[0] == n_distinct

    # 3. Same results as the single-process search.
    single = search(n_jobs=None).fit(texts, y)
    assert texts_through_model[0] == n_distinct
    assert on_dask.best_params_ == single.best_params_
    np.testing.assert_allclose(
        on_dask.cv_results_["mean_test_score"],
        single.cv_results_["mean_test_score"],
        atol=1e-12,
    )
    np.testing.assert_array_equal(on_dask.predict(texts), single.predict(texts))


# ------------------------------------------------ LOES on data bigger than memory
@pytest.mark.parametrize("variant", ["robust", "reference"])
def test_chunked_calibration_draw_gives_the_in_memory_selection(recipes, variant):
    H, y = _toy_stack()
    kw = {"variant": variant, "n_layers_to_select": 3}
    full = LOESSelector(max_samples=200, random_state=0, **kw).fit(H, y)

    rows, rng = recipes.draw_calibration_rows(y, 200, random_state=0)
    np.testing.assert_array_equal(rows, full.calibration_indices_)
    H_cal = recipes.gather_rows(_chunks(H, [150, 1, 249, 200]), rows)
    assert H_cal.shape == (5, 200, 12)
    chunked = LOESSelector(max_samples=None, random_state=rng, **kw).fit(H_cal, y[rows])

    np.testing.assert_array_equal(chunked.selection_order_, full.selection_order_)
    for key in full.scores_:
        np.testing.assert_allclose(
            chunked.scores_[key],
            full.scores_[key],
            rtol=1e-10,
            atol=1e-12,
            equal_nan=True,
        )
    # transform is row-wise, so it runs chunk by chunk too.
    parts = [full.transform(chunk) for chunk in _chunks(H, [300, 300])]
    np.testing.assert_array_equal(np.concatenate(parts), full.transform(H))


def test_calibration_draw_falls_back_to_uniform_and_covers_all_rows(recipes):
    y = np.array([0] * 9 + [1])  # a singleton class cannot be stratified
    rows, _ = recipes.draw_calibration_rows(y, 4, random_state=0)
    assert rows.size == 4 and np.all(np.diff(rows) > 0)
    rows, _ = recipes.draw_calibration_rows(y, None)
    np.testing.assert_array_equal(rows, np.arange(10))
    rows, _ = recipes.draw_calibration_rows(y, 0.5, random_state=0)
    assert rows.size == 5


def test_layer_moments_merged_on_dask_equal_the_full_statistics(client, recipes):
    import dask.bag as db

    H, _ = _toy_stack(n=500, n_layers=4, dim=10)
    chunks = _chunks(H, [100, 7, 193, 200])
    bag = db.from_sequence(chunks, npartitions=2)
    merged = bag.map(recipes.LayerMoments.from_chunk).fold(operator.add).compute()
    serial = functools.reduce(
        operator.add, map(recipes.LayerMoments.from_chunk, chunks)
    )
    assert merged.n == serial.n == 500

    np.testing.assert_allclose(merged.mean, H.mean(axis=1), rtol=1e-12)
    Hc = H - H.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(
        merged.total_variance(), (Hc**2).sum(axis=(1, 2)) / 500, rtol=1e-10
    )
    np.testing.assert_allclose(merged.isotropy(), isotropy(H), rtol=1e-10)
    np.testing.assert_allclose(
        merged.cka(), layer_similarity(H, kind="cka"), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(serial.scatter, merged.scatter, rtol=1e-10, atol=1e-8)


def test_memory_mapped_stack_is_read_only_at_the_calibration_rows(tmp_path):
    import tracemalloc

    H, y = _toy_stack(n=20000, n_layers=5, dim=32)
    path = tmp_path / "stack.npy"
    np.save(path, H.astype(np.float32))
    mapped = np.load(path, mmap_mode="r")
    kw = {"n_layers_to_select": 2, "max_samples": 400, "random_state": 0}

    tracemalloc.start()
    try:
        on_disk = LOESSelector(**kw).fit(mapped, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * mapped.nbytes  # the stack itself never came into memory
    in_memory = LOESSelector(**kw).fit(np.asarray(mapped), y)
    np.testing.assert_array_equal(on_disk.selection_order_, in_memory.selection_order_)
    np.testing.assert_array_equal(
        on_disk.calibration_indices_, in_memory.calibration_indices_
    )
