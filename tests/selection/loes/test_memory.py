"""One path for every budget: the selector's ``memory``."""

from __future__ import annotations

import numpy as np
from _support.loes import (
    count_paths,
    planted,
    to_flat,
)
from joblib import parallel_config
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from skloes import LOESSelector


# --------------------------------------------------------------------------
# One path for every budget: ``memory``
# --------------------------------------------------------------------------
def test_memory_reuses_and_extends_the_cached_path(tmp_path, monkeypatch):
    stack, y = planted(n=150, seed=41)
    plain = {
        k: LOESSelector(n_layers_to_select=k, random_state=0).fit(stack, y)
        for k in (1, 3, 5)
    }
    counts = count_paths(monkeypatch)
    before = dict(counts)
    for k in (3, 1, 5, 5, 2):  # a hit, a slice, an extension, a hit, a slice
        sel = LOESSelector(
            n_layers_to_select=k, random_state=0, memory=str(tmp_path)
        ).fit(stack, y)
        ref = plain.get(k) or plain[5]
        assert sel.selection_order_.tolist() == ref.selection_order_[:k].tolist()
        for key, value in sel.scores_.items():
            np.testing.assert_array_equal(value, ref.scores_[key][:k])
        if k in plain:  # a slice restores the residual by adding fits back
            np.testing.assert_allclose(
                sel.residual_, plain[k].residual_, rtol=0, atol=1e-12
            )
    assert counts["prepare"] - before["prepare"] == 1  # the extension loads it
    # 3 steps, then 3 -> 6 (an extension at least doubles), each step once
    assert counts["steps"] - before["steps"] == 6


def test_memory_grid_search_equals_no_memory(tmp_path, monkeypatch):
    from joblib import Memory

    counts = count_paths(monkeypatch)
    stack, y = planted(n=150, seed=42)
    flat = to_flat(stack)
    grid = {"loes__n_layers_to_select": [1, 2, 3]}
    results = []
    for memory in (None, Memory(tmp_path, verbose=0)):
        pipe = Pipeline(
            [
                ("loes", LOESSelector(layer_dim=12, random_state=0, memory=memory)),
                ("clf", LogisticRegression(max_iter=300)),
            ]
        )
        before = counts["prepare"]
        search = GridSearchCV(pipe, grid, cv=3).fit(flat, y)
        results.append(
            (
                search.cv_results_["mean_test_score"],
                counts["prepare"] - before,
            )
        )
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1] == 3 * 3 + 1 and results[1][1] == 3 + 1


def test_memory_search_on_parallel_workers_equals_sequential(tmp_path):
    stack, y = planted(n=90, seed=44)
    flat = to_flat(stack)
    grid = {"loes__n_layers_to_select": [1, 3, 2]}
    scores = []
    for n_jobs, folder in ((1, tmp_path / "a"), (2, tmp_path / "b")):
        pipe = Pipeline(
            [
                (
                    "loes",
                    LOESSelector(layer_dim=12, random_state=0, memory=str(folder)),
                ),
                ("clf", LogisticRegression(max_iter=300)),
            ]
        )
        with parallel_config(backend="threading"):
            search = GridSearchCV(pipe, grid, cv=2, n_jobs=n_jobs).fit(flat, y)
        scores.append(search.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(scores[0], scores[1])
