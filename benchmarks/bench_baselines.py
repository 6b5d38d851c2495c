"""Benchmark: the Gram speed-up of the probe-scored baselines.

``ExhaustiveSubsetSelector`` and ``GreedyForwardSelector`` score layer subsets
with the ridge probe. A concatenation's Gram is the sum of its layers' Grams,
so per-layer Grams (and fit × held-out cross-Grams) are computed once and
each subset costs one ``n_fit × n_fit`` eigendecomposition. The baseline in
the same process re-forms every concatenation and decomposes it from scratch
(the same probe, the same answers). Synthetic layers with planted signal; one
BLAS thread (the shared 2-core box makes multi-threaded LAPACK erratic).

Run: ``python benchmarks/bench_baselines.py`` (about a minute or two).
Writes ``benchmarks/results/bench_baselines.md``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import time
from itertools import combinations
from pathlib import Path

import numpy as np
from _machine import machine, machine_line

# The naive arm re-forms every concatenation inside the library's own subset
# scorer: private on purpose, so that the two arms differ only by the Gram
# cache this benchmark times.
from skloes.core._ridge import ridge_fit
from skloes.selection import ExhaustiveSubsetSelector, GreedyForwardSelector
from skloes.selection._ridge_probe import SubsetScorer, _probe_score


class _NaiveScorer(SubsetScorer):
    """The same probe, re-forming and re-decomposing every concatenation."""

    def predict(self, subset):
        A = np.hstack([self._block(l)[0] for l in subset])
        B = np.hstack([self._block(l)[1] for l in subset])
        return ridge_fit(A, self.T).predict(B)


def _data(n, n_layers, dim, seed=0):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % 4
    H = rng.normal(size=(n_layers, n, dim))
    H[n_layers // 2, :, :4] += 1.5 * np.eye(4)[y]
    H[n_layers - 2, :, 4:8] += 1.0 * np.eye(4)[y]
    return H, y


def _naive_exhaustive(H, y, k, held):
    fit = np.setdiff1d(np.arange(H.shape[1]), held)
    target = ("classification", np.unique(y), y)
    scorer = _NaiveScorer(H, target, fit, held)
    subsets = list(combinations(range(H.shape[0]), k))
    scores = [_probe_score(scorer.predict(list(s)), target, held) for s in subsets]
    return np.array(scores)


def run(n=500, n_layers=10, dims=(384, 768), k=3):
    rows = []
    for dim in dims:
        H, y = _data(n, n_layers, dim)
        start = time.perf_counter()
        sel = ExhaustiveSubsetSelector(
            n_layers_to_select=k, max_samples=None, random_state=0
        ).fit(H, y)
        t_fast = time.perf_counter() - start
        start = time.perf_counter()
        naive = _naive_exhaustive(H, y, k, sel.held_out_indices_)
        t_naive = time.perf_counter() - start
        assert np.allclose(naive, sel.subset_scores_), "naive and cached disagree"
        start = time.perf_counter()
        GreedyForwardSelector(
            n_layers_to_select=k, max_samples=None, random_state=0
        ).fit(H, y)
        t_greedy = time.perf_counter() - start
        rows.append((dim, len(sel.subsets_), t_fast, t_naive, t_greedy))
    return rows


def main():
    from threadpoolctl import threadpool_limits

    n, n_layers, k = 500, 10, 3
    with threadpool_limits(limits=1, user_api="blas"):
        rows = run(n=n, n_layers=n_layers, k=k)
    lines = [
        f"Exhaustive k={k} over {n_layers} layers, n={n} calibration rows "
        f"(n_fit={int(n * 0.8)}), one BLAS thread; identical subset scores.",
        "",
        machine_line(machine()),
        "",
        "| dim | subsets | exhaustive, Gram cache (s) | exhaustive, naive (s) "
        "| cache / naive | greedy k=3 (s) | greedy / exhaustive |",
        "|---|---|---|---|---|---|---|",
    ]
    for dim, n_sub, t_fast, t_naive, t_greedy in rows:
        lines.append(
            f"| {dim} | {n_sub} | {t_fast:.2f} | {t_naive:.2f} | "
            f"{t_fast / t_naive:.2f} | {t_greedy:.2f} | {t_greedy / t_fast:.2f} |"
        )
    text = "\n".join(lines)
    print(text)
    out = Path(__file__).parent / "results" / "bench_baselines.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("# Baselines: Gram speed-up\n\n" + text + "\n")


if __name__ == "__main__":
    main()
