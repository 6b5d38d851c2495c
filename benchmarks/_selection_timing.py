"""Timing ratios of the LOES selectors (``bench_selection.py --timing``).

Every ratio is measured in one process, with BLAS pinned to one thread, arms
interleaved and repeated; the median and the range over repeats are reported.

- **floor ratio**: ``LOESSelector`` fit (K = 4, robust and reference) over the
  *floor*, the time to decompose every candidate layer of the calibration rows
  once with the ``thin_svd`` the path uses (centred float64 layers);
- **greedy ratio**: the default ``LOESSelector`` fit over a
  ``GreedyForwardSelector(n_layers_to_select=4)`` fit on the same rows, at
  ``max_samples`` 2,000 (all rows) and 500 (``--timing-parts greedy``);
- **budget-search ratio**: ``GridSearchCV(Pipeline([LOESSelector(memory=...),
  LogisticRegression()]), {"n_layers_to_select": 1..7}, cv=5)`` over the same
  search with the single budget 4 (and no memory), plus a check that the
  memory search gives the scores of a search without memory;
- **scaling** (``--timing-parts scaling``): floor, default and reference fit
  times at three sizes of ``n``, ``L`` and ``d`` and their log-log slopes;
- **LOESSelectorCV ratio**: ``LOESSelectorCV(max_layers_to_select=K, cv=5)``
  over one ``LOESSelector`` fit at K on the same rows (target cv + 1.5), and
  over the equivalent ``GridSearchCV`` without memory (target 0.3).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import tempfile
import time
import warnings

import numpy as np


def _rows(y, n_rows, seed=0):
    """A stratified subset of ``n_rows`` rows (sorted)."""
    from sklearn.model_selection import train_test_split

    if n_rows >= y.size:
        return np.arange(y.size)
    rows, _ = train_test_split(
        np.arange(y.size), train_size=n_rows, stratify=y, random_state=seed
    )
    return np.sort(rows)


def _clock(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def floor_seconds(stack):
    """Decompose every layer once, as the path does (the floor)."""
    # A private import on purpose: the floor is the library's own
    # decomposition, the linear algebra a selection cannot avoid.
    from skloes.core._geometry import thin_svd

    for layer in stack:
        X = np.asarray(layer, dtype=np.float64)
        thin_svd(X - X.mean(axis=0), center=False)


def _summary(values):
    v = np.asarray(values, dtype=float)
    return f"{np.median(v):.2f} ({v.min():.2f}–{v.max():.2f})"


def floor_ratios(stack, y, repeats):
    """Fit / floor for both variants, arms interleaved."""
    from skloes import LOESSelector

    times = {"floor": [], "robust": [], "reference": []}
    for _ in range(repeats):
        for arm in times:
            if arm == "floor":
                seconds, _ = _clock(lambda: floor_seconds(stack))
            else:
                sel = LOESSelector(
                    n_layers_to_select=4, variant=arm, max_samples=None, random_state=0
                )
                seconds, _ = _clock(lambda sel=sel: sel.fit(stack, y))
            times[arm].append(seconds)
    return times


def greedy_ratios(stack, y, repeats, max_samples):
    """Default ``LOESSelector`` fit over ``GreedyForwardSelector`` fit (K = 4,
    same rows and ``max_samples``), arms interleaved."""
    from skloes import LOESSelector
    from skloes.selection import GreedyForwardSelector

    times = {"loes": [], "greedy": []}
    for _ in range(repeats):
        for arm in times:
            cls = LOESSelector if arm == "loes" else GreedyForwardSelector
            sel = cls(n_layers_to_select=4, max_samples=max_samples, random_state=0)
            seconds, _ = _clock(lambda sel=sel: sel.fit(stack, y))
            times[arm].append(seconds)
    return times


def _flat(stack):
    n_layers, n, dim = stack.shape
    return np.ascontiguousarray(stack.transpose(1, 0, 2).reshape(n, -1))


def budget_search(
    stack,
    y,
    repeats,
    budgets=(1, 2, 3, 4, 5, 6, 7),
    n_folds=5,
    check_identity=True,
    downstream="logistic",
):
    """GridSearchCV over budgets with ``memory`` against one budget.

    The one budget is 4 (``"auto"``) and, separately, the largest of the grid
    (the path a search over every budget has to compute anyway).

    ``downstream="dummy"`` puts a ``DummyClassifier`` after the selector, so
    the ratio is that of the selection alone (the logistic regression's own
    cost grows with the budget's width: 1 + 2 + ... + 7 layers against 4).
    """
    from joblib import Memory
    from sklearn.dummy import DummyClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline

    from skloes import LOESSelector

    dim = stack.shape[2]
    flat = _flat(stack)
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    budgets = [k for k in budgets if k <= stack.shape[0]]

    def search(grid, memory):
        pipe = Pipeline(
            [
                (
                    "loesselector",
                    LOESSelector(layer_dim=dim, random_state=0, memory=memory),
                ),
                (  # the downstream of a timing, not a probe whose score we report
                    "logisticregression",
                    LogisticRegression(max_iter=200)
                    if downstream == "logistic"
                    else DummyClassifier(),
                ),
            ]
        )
        return GridSearchCV(
            pipe, {"loesselector__n_layers_to_select": grid}, cv=folds
        ).fit(flat, y)

    times = {"one budget": [], "largest budget": [], "all budgets, memory": []}
    scores = None
    for _ in range(repeats):
        seconds, _ = _clock(lambda: search([4], None))
        times["one budget"].append(seconds)
        seconds, _ = _clock(lambda: search([max(budgets)], None))
        times["largest budget"].append(seconds)
        with tempfile.TemporaryDirectory() as folder:
            seconds, fitted = _clock(lambda: search(budgets, Memory(folder, verbose=0)))
        times["all budgets, memory"].append(seconds)
        scores = fitted.cv_results_["mean_test_score"]
    if not check_identity:  # tests/selection/loes checks it on small data
        return times, float("nan")
    plain = search(budgets, None).cv_results_["mean_test_score"]
    return times, float(np.max(np.abs(plain - scores)))


def cv_ratios(stack, y, repeats, k_max, n_folds=5):
    """LOESSelectorCV against one fit at K = k_max and against GridSearchCV."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline

    from skloes import LOESSelector, LOESSelectorCV
    from skloes.selection import RidgeProbeClassifier

    dim = stack.shape[2]
    flat = _flat(stack)
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    kw = dict(layer_dim=dim, random_state=0)
    times = {"one fit at K": [], "LOESSelectorCV": [], "GridSearchCV": []}
    for rep in range(repeats):
        seconds, _ = _clock(
            lambda: LOESSelector(n_layers_to_select=k_max, **kw).fit(flat, y)
        )
        times["one fit at K"].append(seconds)
        seconds, cv = _clock(
            lambda: LOESSelectorCV(
                RidgeProbeClassifier(),
                selector=LOESSelector(**kw),
                max_layers_to_select=k_max,
                cv=folds,
            ).fit(flat, y)
        )
        times["LOESSelectorCV"].append(seconds)
        if rep == 0:  # the slow arm once: its spread is not the question
            seconds, grid = _clock(
                lambda: GridSearchCV(
                    Pipeline(
                        [
                            ("loes", LOESSelector(**kw)),
                            ("probe", RidgeProbeClassifier()),
                        ]
                    ),
                    {"loes__n_layers_to_select": list(range(1, k_max + 1))},
                    cv=folds,
                ).fit(flat, y)
            )
            times["GridSearchCV"].append(seconds)
            diff = float(
                np.max(
                    np.abs(
                        cv.cv_results_["mean_test_score"]
                        - grid.cv_results_["mean_test_score"]
                    )
                )
            )
    return times, diff


def scaling_rows(stack, y, repeats, sizes, axis):
    """Floor, default and reference fit times at three sizes of one axis.

    ``axis`` is ``"n"`` (calibration rows), ``"L"`` (the first layers) or
    ``"d"`` (the first columns of every layer); the other two stay as given.
    Returns one markdown row with the medians and the log-log slopes.
    """
    from skloes import LOESSelector

    times = {arm: [] for arm in ("floor", "default", "reference")}
    for size in sizes:
        if axis == "n":
            rows = _rows(y, size)
            sub, yy = np.ascontiguousarray(stack[:, rows]), y[rows]
        elif axis == "L":
            sub, yy = np.ascontiguousarray(stack[:size]), y
        else:
            sub, yy = np.ascontiguousarray(stack[:, :, :size]), y
        per = {arm: [] for arm in times}
        for _ in range(repeats):
            for arm in per:
                if arm == "floor":
                    seconds, _ = _clock(lambda sub=sub: floor_seconds(sub))
                else:
                    sel = LOESSelector(
                        n_layers_to_select=4,
                        max_samples=None,
                        random_state=0,
                        variant="robust" if arm == "default" else arm,
                    )
                    seconds, _ = _clock(
                        lambda sel=sel, sub=sub, yy=yy: sel.fit(sub, yy)
                    )
                per[arm].append(seconds)
        for arm in times:
            times[arm].append(float(np.median(per[arm])))
    span = np.log(sizes[-1] / sizes[0])
    cells = [
        " / ".join(f"{t:.2f}" for t in times[arm])
        + f" ({np.log(times[arm][-1] / times[arm][0]) / span:.2f})"
        for arm in times
    ]
    return f"| {axis} | {' / '.join(map(str, sizes))} | " + " | ".join(cells) + " |"


def _cv_lines(lines, stack, y, n_rows, cv_k, repeats):
    """The two LOESSelectorCV lines at ``n_rows`` rows."""
    rows = _rows(y, n_rows)
    sub = np.ascontiguousarray(stack[:, rows])
    k = min(cv_k, sub.shape[0])
    print(f"LOESSelectorCV on {sub.shape}, K={k}", flush=True)
    t, diff = cv_ratios(sub, y[rows], max(1, repeats - 1), k)
    ratio = np.array(t["LOESSelectorCV"]) / np.array(t["one fit at K"])
    lines.append(
        f"| LOESSelectorCV (K≤{k}, cv=5) / one LOESSelector fit at "
        f"K={k} | {rows.size} | {_summary(ratio)} | ≤ 6.5 | "
        f"{np.median(t['LOESSelectorCV']):.1f} / "
        f"{np.median(t['one fit at K']):.1f} |"
    )
    ratio = np.median(t["LOESSelectorCV"]) / t["GridSearchCV"][0]
    lines.append(
        f"| LOESSelectorCV / GridSearchCV, budgets 1..{k} (max score "
        f"diff {diff:.1e}) | {rows.size} | {ratio:.2f} | ≤ 0.3 | "
        f"{np.median(t['LOESSelectorCV']):.1f} / "
        f"{t['GridSearchCV'][0]:.1f} |"
    )


class _Lines(list):
    """A list of table lines that prints each line as it is added."""

    def __init__(self, lines):
        super().__init__()
        for line in lines:
            self.append(line)

    def append(self, line):
        print(line, flush=True)
        super().append(line)


def run_timing(
    stack,
    y,
    label,
    *,
    repeats=3,
    floor_rows=1600,
    search_rows=1000,
    cv_k=7,
    parts=("floor", "search", "cv"),
    cv_rows=None,
):
    """Markdown lines with every timing ratio for one model's features.

    ``cv_rows`` (default ``(search_rows,)``) are the row counts of the
    LOESSelectorCV timings, one pair of lines each.

    Each line is also printed as soon as it is measured.
    """
    from threadpoolctl import threadpool_limits

    warnings.filterwarnings("ignore", category=UserWarning)
    y = np.unique(np.asarray(y), return_inverse=True)[1]
    lines = _Lines(
        [
            f"### {label} ({stack.shape[0]} layers × {stack.shape[2]})",
            "",
            "| ratio | rows | median (range) | target | seconds, median |",
            "|---|---|---|---|---|",
        ]
    )
    with threadpool_limits(limits=1, user_api="blas"):
        if "floor" in parts:
            rows = _rows(y, floor_rows)
            sub = np.ascontiguousarray(stack[:, rows])
            print(f"floor ratios on {sub.shape}", flush=True)
            t = floor_ratios(sub, y[rows], repeats)
            for arm in ("robust", "reference"):
                ratio = np.array(t[arm]) / np.array(t["floor"])
                lines.append(
                    f"| LOES {arm} fit (K=4) / floor | {rows.size} | "
                    f"{_summary(ratio)} | ≤ 2 | {np.median(t[arm]):.2f} / "
                    f"{np.median(t['floor']):.2f} |"
                )
        if "greedy" in parts:
            rows = _rows(y, floor_rows)
            sub = np.ascontiguousarray(stack[:, rows])
            for max_samples in (2000, 500):
                print(
                    f"LOES vs greedy on {sub.shape}, max_samples={max_samples}",
                    flush=True,
                )
                t = greedy_ratios(sub, y[rows], repeats, max_samples)
                ratio = np.array(t["loes"]) / np.array(t["greedy"])
                lines.append(
                    f"| LOES default fit / GreedyForwardSelector fit (K=4, "
                    f"max_samples={max_samples}) | {rows.size} | "
                    f"{_summary(ratio)} | ≤ 1 | {np.median(t['loes']):.2f} / "
                    f"{np.median(t['greedy']):.2f} |"
                )
        if "scaling" in parts:
            for line in (
                "",
                "| varied | sizes | floor | default fit | reference fit "
                "(medians, s; log-log slope) |",
                "|---|---|---|---|---|",
            ):
                lines.append(line)
            n_max, dim = min(floor_rows, y.size), stack.shape[2]
            n_layers = stack.shape[0]
            lines.append(
                scaling_rows(stack, y, repeats, [n_max // 4, n_max // 2, n_max], "n")
            )
            sub_rows = _rows(y, n_max)
            sub, yy = stack[:, sub_rows], y[sub_rows]
            layer_sizes = [max(n_layers // 4, 5), max(n_layers // 2, 6), n_layers]
            lines.append(scaling_rows(sub, yy, repeats, layer_sizes, "L"))
            lines.append(
                scaling_rows(sub[:8], yy, repeats, [dim // 4, dim // 2, dim], "d")
            )
        if "search" in parts:
            rows = _rows(y, search_rows)
            sub = np.ascontiguousarray(stack[:, rows])
            print(f"budget search on {sub.shape}", flush=True)
            for downstream in ("logistic", "dummy"):
                t, diff = budget_search(
                    sub,
                    y[rows],
                    max(1, repeats - 1),
                    check_identity=downstream == "logistic",
                    downstream=downstream,
                )
                for base, name in (
                    ("one budget", "one budget (4)"),
                    ("largest budget", "the largest budget (7)"),
                ):
                    ratio = np.array(t["all budgets, memory"]) / np.array(t[base])
                    lines.append(
                        f"| GridSearchCV budgets 1..7 with memory / {name}, "
                        f"{downstream} downstream (max score diff vs no memory "
                        f"{diff:.1e}) | {rows.size} | {_summary(ratio)} | ≤ 1.5 | "
                        f"{np.median(t['all budgets, memory']):.1f} / "
                        f"{np.median(t[base]):.1f} |"
                    )
        if "cv" in parts:
            for n_rows in cv_rows or (search_rows,):
                _cv_lines(lines, stack, y, n_rows, cv_k, repeats)
    return lines
