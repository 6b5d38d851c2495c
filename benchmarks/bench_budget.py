"""Diagnosis: why ``LOESSelectorCV`` under-selects, measured per budget.

For each layer stack (``benchmarks/_stacks.py``) and each of 5 outer folds
(stratified, shuffled, seed 0), everything is fitted on the outer training
rows only:

- the fixed arms (last layer, all layers, default LOES ``K = 4``, best single
  layer by inner CV) and ``LOESSelectorCV()`` as shipped, each scored on the
  held-out rows with the head ``StandardScaler`` + ``LogisticRegression``
  (``C`` from ``--C``, 0.01 by default: the house probe);
- the inner budget curves of ``LOESSelectorCV``: its own per-fold scores
  (the closed-form ridge probe, 5 inner folds and also 10) and, on the same
  inner folds and the same fold paths, the logistic head's scores;
- the held-out accuracy of every budget ``K = 1..10`` of the full-training
  path (``LOESSelectorCV``'s candidate grid), of the default's 8-candidate
  grid (``K = 1..8``) and of the full search (``candidate_grid="all"``).

The raw numbers go to ``benchmarks/results/budget/{model}_{set}.json``; the
budget rules are compared offline from them (``--summarize``).

``--shipped`` runs only ``LOESSelectorCV()`` as the library now ships it
(``budget_rule="anchored"``, the selector's own grid) and the default
``LOESSelector``, on the same outer folds, into
``benchmarks/results/budget/shipped/{model}_{set}.json``; ``--summarize``
adds their table when those files exist.

``--shipped`` and ``--recommend`` score every answer under ``--fusion``
(the library's default, ``fusion="auto"`` since issue 36: in each outer
fold, concatenation, the average or the stack of one head per layer,
whichever scores best by 5-fold CV on the outer training rows, as
``LayerProbeClassifier(fusion="auto")`` chooses; a single layer is its own
head); the fixed arms of the full run (last, all layers, best single) stay
concatenated heads.

``--recommend`` fits, in each outer fold, the ``LayerReport`` the main job
fits (its defaults, without the label-free metrics, which do not enter the
recommendation) on the outer training rows, then the selector of its
recommendation (``recommendation_``), and scores that answer on the held-out
rows, into ``benchmarks/results/budget/recommend/{model}_{set}.json``.

    python benchmarks/bench_budget.py --models smollm2 minilm --sets trec6 ...
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _stacks  # noqa: E402
from _machine import machine, machine_line, machine_lines  # noqa: E402

OUT = Path(__file__).parent / "results" / "budget"
K_MAX = 10


def head(C):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000))


def fused(stack, layers, rows):
    return np.concatenate([stack[l][rows] for l in sorted(layers)], axis=1)


def head_score(stack, y, layers, train, test, C, fusion="concatenate", record=None):
    """Held-out accuracy of the head on ``layers`` under ``fusion`` (one
    layer: the head itself, whatever the fusion); ``record["fusion"]`` gets
    the fusion used (None for one layer)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fusion == "auto" and len(layers) > 1:
            fusion = auto_fusion(stack, y, layers, train, C)
        if record is not None:
            record["fusion"] = fusion if len(layers) > 1 else None
        if fusion != "concatenate" and len(layers) > 1:
            from skloes.probe import LayerEnsembleClassifier

            part = stack[sorted(layers)]
            model = LayerEnsembleClassifier(head(C), combine=fusion, random_state=0)
            model.fit(part[:, train], y[train])
            return float(model.score(part[:, test], y[test]))
        model = head(C).fit(fused(stack, layers, train), y[train])
    return float(model.score(fused(stack, layers, test), y[test]))


def auto_fusion(stack, y, layers, train, C):
    """The fusion ``fusion="auto"`` chooses on the training rows (the
    library's inner folds and scores, seed 0)."""
    from _fusion_cv import fusion_cv

    from skloes.core._fusion import choose_fusion
    from skloes.probe._ensemble import inner_folds

    folds = inner_folds(y[train], "classification", 5, 0)
    scores, _ = fusion_cv(
        head(C),
        fused(stack, layers, train),
        y[train],
        folds,
        layer_dim=stack.shape[2],
        classes=np.unique(y[train]),
    )
    return choose_fusion(scores)


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


@contextlib.contextmanager
def _gcv_as_shipped(active):
    """GCV as 0.2 shipped it (every row counted, see ``free_rows``)."""
    import skloes.core._ridge as ridge

    saved = ridge.free_rows
    if active:
        ridge.free_rows = lambda n, m, n_features: n
    try:
        yield
    finally:
        ridge.free_rows = saved


def fixed_arms(stack, y, train, test, C):
    """Held-out accuracy, picks and fit seconds of the shipped selectors."""
    from skloes.selection import (
        BestSingleLayerSelector,
        LOESSelector,
        LOESSelectorCV,
    )

    L = stack.shape[0]
    out = {
        "last": {"picks": [L - 1], "fit_s": 0.0},
        "all": {"picks": list(range(L)), "fit_s": 0.0},
    }
    makers = {
        "default": lambda: LOESSelector(random_state=0),
        "best_single": lambda: BestSingleLayerSelector(random_state=0),
        "cv_shipped": lambda: LOESSelectorCV(selector=LOESSelector(random_state=0)),
        "cv_one_se": lambda: LOESSelectorCV(selector=LOESSelector(random_state=0)),
    }
    fitted = {}
    for arm, make in makers.items():
        with warnings.catch_warnings(), _gcv_as_shipped(arm == "cv_shipped"):
            warnings.simplefilter("ignore")
            sel, sec = _timed(lambda make=make: make().fit(stack[:, train], y[train]))
        order = getattr(sel, "selection_order_", None)
        picks = sel.get_support(indices=True) if order is None else order
        out[arm] = {"picks": [int(v) for v in picks], "fit_s": sec}
        fitted[arm] = sel
    for entry in out.values():
        entry["acc"] = head_score(stack, y, entry["picks"], train, test, C)
    return out, fitted


def _split_scores(res):
    n_splits = sum(1 for k in res if k.startswith("split") and "score" in k)
    return np.array([res[f"split{i}_test_score"] for i in range(n_splits)])


def inner_curves(stack, y, train, fitted, C, cv10):
    """Ridge and head scores per inner fold and budget, on the same paths."""
    from sklearn.model_selection import StratifiedKFold

    res = fitted["cv_one_se"].cv_results_
    n_splits = sum(1 for k in res if k.endswith("_test_score") and "split" in k)
    ridge = np.array([res[f"split{i}_test_score"] for i in range(n_splits)])
    orders = [res[f"split{i}_selection_order"] for i in range(n_splits)]
    splits = StratifiedKFold(n_splits).split(np.zeros((train.size, 1)), y[train])
    logit = np.full_like(ridge, np.nan)
    for i, (tr, te) in enumerate(splits):
        order = [int(v) for v in orders[i] if v >= 0]
        for k in range(1, len(order) + 1):
            logit[i, k - 1] = head_score(stack, y, order[:k], train[tr], train[te], C)
    ridge10 = _split_scores(cv10.cv_results_)
    return {
        "ridge_shipped": _split_scores(fitted["cv_shipped"].cv_results_).tolist(),
        "ridge": ridge.tolist(),
        "head": logit.tolist(),
        "ridge_cv10": ridge10.tolist(),
        "orders": [[int(v) for v in o] for o in orders],
    }


def outer_curves(stack, y, train, test, C):
    """Held-out head accuracy of every budget of three full-training paths."""
    from skloes.selection import LOESSelector
    from skloes.selection._loes._grid import auto_grid

    L = stack.shape[0]
    paths = {
        "grid_cv": LOESSelector(n_layers_to_select=min(K_MAX, L), random_state=0),
        "grid_k4": LOESSelector(
            n_layers_to_select=min(8, L),
            random_state=0,
            candidate_grid=auto_grid(L, 4).tolist(),
        ),
        "all": LOESSelector(
            n_layers_to_select=min(K_MAX, L), random_state=0, candidate_grid="all"
        ),
    }
    out = {}
    for name, sel in paths.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sel.fit(stack[:, train], y[train])
        order = [int(v) for v in sel.selection_order_]
        accs = [
            head_score(stack, y, order[:k], train, test, C)
            for k in range(1, len(order) + 1)
        ]
        out[name] = {"order": order, "acc": accs}
    return out


def run(model, name, n, max_length, C, rows=None):
    from sklearn.model_selection import StratifiedKFold

    from skloes.selection import LOESSelector, LOESSelectorCV

    stack, y, meta = _stacks.stack(model, name, n, max_length)
    stack, y = _stacks.subsample(stack, y, rows)
    stack = np.ascontiguousarray(stack, dtype=np.float32)
    meta = {**meta, "rows": int(y.size)}
    folds = StratifiedKFold(5, shuffle=True, random_state=0).split(
        np.zeros((y.size, 1)), y
    )
    result = {"meta": meta, "C": C, "n_layers": int(stack.shape[0]), "folds": []}
    for f, (train, test) in enumerate(folds):
        arms, fitted = fixed_arms(stack, y, train, test, C)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cv10 = LOESSelectorCV(cv=10, selector=LOESSelector(random_state=0))
            cv10.fit(stack[:, train], y[train])
        fold = {
            "arms": arms,
            "inner": inner_curves(stack, y, train, fitted, C, cv10),
            "outer": outer_curves(stack, y, train, test, C),
        }
        result["folds"].append(fold)
        print(
            model,
            name,
            f"fold {f}:",
            {a: round(v["acc"], 3) for a, v in arms.items()},
            "cv picks",
            arms["cv_one_se"]["picks"],
            flush=True,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    suffix = "" if C == 0.01 else f"_C{C:g}"
    result["machine"] = machine()
    (OUT / f"{model}_{name}{suffix}.json").write_text(json.dumps(result))
    return result


SHIPPED = OUT / "shipped"


def _outer_folds(model, name, n, max_length, C, rows):
    """The stack, labels and outer folds of :func:`run`, and an empty record."""
    from sklearn.model_selection import StratifiedKFold

    stack, y, meta = _stacks.stack(model, name, n, max_length)
    stack, y = _stacks.subsample(stack, y, rows)
    stack = np.ascontiguousarray(stack, dtype=np.float32)
    folds = StratifiedKFold(5, shuffle=True, random_state=0).split(
        np.zeros((y.size, 1)), y
    )
    return stack, y, folds, {"meta": {**meta, "rows": int(y.size)}, "C": C, "folds": []}


def _beside(path, folder):
    """The full run's folds, its arms' mean accuracies and the folds of the
    side run ``folder`` on the same stack (None when it was not run)."""
    side = folder / Path(path).name
    if not side.exists():
        return None
    F = json.loads(Path(path).read_text())["folds"]
    acc = {a: 100 * np.mean([f["arms"][a]["acc"] for f in F]) for a in F[0]["arms"]}
    return acc, json.loads(side.read_text())["folds"], F


def _paired(a, b):
    """Mean and standard error (points) of the per-fold differences a - b."""
    d = 100 * (np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))


def _fusions(entries):
    """How the folds combined their layers (one layer: its own head)."""
    used = [e.get("fusion", "?") or "one layer" for e in entries]
    return ", ".join(f"{u} {used.count(u)}" for u in dict.fromkeys(used))


def _mean_row(label, deltas, n_cols):
    """The mean over the stacks of each column of deltas, with the standard
    error over the stacks."""
    cells = []
    for col in zip(*deltas, strict=True):
        v = np.asarray(col)
        cells.append(f"{v.mean():+.2f} ± {v.std(ddof=1) / np.sqrt(v.size):.2f}")
    return f"| {label} |" + " |" * n_cols + " " + " | ".join(cells) + " |"


def run_shipped(model, name, n, max_length, C, rows=None, fusion="concatenate"):
    """Held-out accuracy, budget and fit time of the shipped LOESSelectorCV."""
    from skloes.selection import LOESSelector, LOESSelectorCV

    stack, y, folds, out = _outer_folds(model, name, n, max_length, C, rows)
    for train, test in folds:
        fold = {}
        for arm, make in (
            ("default", lambda: LOESSelector(random_state=0)),
            ("cv", lambda: LOESSelectorCV(selector=LOESSelector(random_state=0))),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sel, sec = _timed(
                    lambda make=make, rows=train: make().fit(stack[:, rows], y[rows])
                )
            picks = [int(v) for v in sel.selected_layers_]
            fold[arm] = {"picks": picks, "k": len(picks), "fit_s": sec}
            fold[arm]["acc"] = head_score(
                stack, y, picks, train, test, C, fusion, record=fold[arm]
            )
        out["folds"].append(fold)
        print(model, name, {a: (v["k"], round(v["acc"], 3)) for a, v in fold.items()})
    out["fusion"] = fusion
    SHIPPED.mkdir(parents=True, exist_ok=True)
    out["machine"] = machine()
    (SHIPPED / f"{model}_{name}.json").write_text(json.dumps(out))


RECOMMEND = OUT / "recommend"


def run_recommend(model, name, n, max_length, C, rows=None, fusion="concatenate"):
    """Held-out accuracy of the report's recommended answer, per outer fold."""
    from skloes.core._contract import flat_table
    from skloes.report import LayerReport

    stack, y, folds, out = _outer_folds(model, name, n, max_length, C, rows)
    for train, test in folds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report, sec = _timed(
                lambda rows=train: LayerReport(
                    metrics=(), random_state=0, fusion=fusion
                ).fit(stack[:, rows], y[rows])
            )
            method = report.recommendation_.method
            selector = report.method_selector(method)
            part = stack[:, train]
            selector.fit(flat_table(part, np.arange(part.shape[0])), y[train])
        picks = [int(v) for v in selector.get_support(indices=True)]
        entry = {"method": method, "picks": picks, "fit_s": sec}
        entry["acc"] = head_score(stack, y, picks, train, test, C, fusion, entry)
        entry["report_fusions"] = report.fusion_[method]
        out["folds"].append(entry)
        print(model, name, method, picks, round(out["folds"][-1]["acc"], 3))
    out["fusion"] = fusion
    RECOMMEND.mkdir(parents=True, exist_ok=True)
    out["machine"] = machine()
    (RECOMMEND / f"{model}_{name}.json").write_text(json.dumps(out))


def recommend_table(paths):
    """The report's recommended answer against the last and all layers
    (paired differences over the same outer folds, ± standard error)."""
    lines = [
        "| stack | last | all | default K=4 | recommended | Δ last | Δ all "
        "| method per fold | fusion per fold | report fit s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    deltas = []
    for path in paths:
        found = _beside(path, RECOMMEND)
        if found is None:
            continue
        acc, G, F = found
        rec = 100 * np.mean([g["acc"] for g in G])
        mine = [g["acc"] for g in G]
        d_last = _paired(mine, [f["arms"]["last"]["acc"] for f in F])
        d_all = _paired(mine, [f["arms"]["all"]["acc"] for f in F])
        deltas.append((d_last[0], d_all[0]))
        methods = ", ".join(g["method"] for g in G)
        lines.append(
            f"| {Path(path).stem} | {acc['last']:.1f} | {acc['all']:.1f} | "
            f"{acc['default']:.1f} | {rec:.1f} | {d_last[0]:+.1f} ± {d_last[1]:.1f} | "
            f"{d_all[0]:+.1f} ± {d_all[1]:.1f} | {methods} | {_fusions(G)} | "
            f"{np.median([g['fit_s'] for g in G]):.1f} |"
        )
    if len(deltas) > 1:
        row = _mean_row(f"mean of {len(deltas)} stacks", deltas, 4)
        lines.append(row + " | | |")
    return lines


def shipped_table(paths):
    """The shipped LOESSelectorCV against the arms of the full runs (paired
    differences over the same outer folds, ± standard error)."""
    lines = [
        "| stack | last | all | default K=4 | LOESSelectorCV (anchored) "
        "| best single | Δ K=4 | Δ best single | K per fold | fusion per fold "
        "| fit s default / CV | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    deltas = []
    for path in paths:
        found = _beside(path, SHIPPED)
        if found is None:
            continue
        acc, G, F = found
        d = 100 * np.mean([g["default"]["acc"] for g in G])
        cv = 100 * np.mean([g["cv"]["acc"] for g in G])
        best = acc["best_single"]
        mine = [g["cv"]["acc"] for g in G]
        d_k4 = _paired(mine, [g["default"]["acc"] for g in G])
        d_best = _paired(mine, [f["arms"]["best_single"]["acc"] for f in F])
        deltas.append((d_k4[0], d_best[0]))
        fit = [np.median([g[a]["fit_s"] for g in G]) for a in ("default", "cv")]
        ok = cv >= d - 0.5 and cv >= best - 0.5
        lines.append(
            f"| {Path(path).stem} | {acc['last']:.1f} | {acc['all']:.1f} | {d:.1f} | "
            f"{cv:.1f} | {best:.1f} | {d_k4[0]:+.1f} ± {d_k4[1]:.1f} | "
            f"{d_best[0]:+.1f} ± {d_best[1]:.1f} | "
            f"{', '.join(str(g['cv']['k']) for g in G)} | "
            f"{_fusions([g['cv'] for g in G])} | {fit[0]:.1f} / "
            f"{fit[1]:.1f} | {'met' if ok else 'missed'} |"
        )
    if len(deltas) > 1:
        lines.append(_mean_row(f"mean of {len(deltas)} stacks", deltas, 5) + " | | | |")
    return lines


def rule_pick(S, rule):
    """The budget (1-based) a rule reads off per-fold scores ``S``."""
    from skloes.core._noise import cheapest_within_noise
    from skloes.selection._loes._cv import choose_budget

    S = np.asarray(S, dtype=np.float64)
    if rule == "anchor_k4":  # K = 4 unless a budget beats it by a paired SE
        base = min(4, S.shape[1]) - 1
        d = S - S[:, [base]]
        gain = d.mean(axis=0) - d.std(axis=0, ddof=1) / np.sqrt(S.shape[0])
        better = np.flatnonzero(gain > 0)
        if better.size == 0:
            return base + 1
        return int(better[np.argmax(d.mean(axis=0)[better])]) + 1
    if rule == "paired_se":
        return cheapest_within_noise(S, np.arange(S.shape[1]))[0] + 1
    return choose_budget(S, rule)


RULES = (
    ("ridge_shipped", "one_se"),
    ("ridge", "one_se"),
    ("ridge", "best"),
    ("ridge", "paired_se"),
    ("ridge_cv10", "one_se"),
    ("ridge_cv10", "paired_se"),
    ("ridge", "anchor_k4"),
    ("head", "best"),
    ("head", "paired_se"),
    ("head", "anchor_k4"),
)


def _curve(folds, key):
    return np.array([np.nanmean(np.asarray(f["inner"][key], float), 0) for f in folds])


def _stability(picks, n_layers):
    """Nogueira stability of the outer folds' picks (NaN for all layers)."""
    from skloes.metrics import selection_stability

    if all(len(q) == n_layers for q in picks):
        return float("nan")
    return float(selection_stability(picks, n_layers))


def target_row(path):
    """One row of the issue-27 target table: the arms, LOESSelectorCV with the
    paired rule (read off the shipped fit's per-fold scores), the picks."""
    r = json.loads(Path(path).read_text())
    F, L = r["folds"], r["n_layers"]
    acc = {a: 100 * np.mean([f["arms"][a]["acc"] for f in F]) for a in F[0]["arms"]}
    ks = [rule_pick(f["inner"]["ridge"], "paired_se") for f in F]
    cv = 100 * np.mean(
        [f["outer"]["grid_cv"]["acc"][k - 1] for f, k in zip(F, ks, strict=True)]
    )
    picks = [f["outer"]["grid_cv"]["order"][:k] for f, k in zip(F, ks, strict=True)]
    fit = {a: np.median([f["arms"][a]["fit_s"] for f in F]) for a in F[0]["arms"]}
    ok = cv >= acc["default"] - 0.5 and cv >= acc["best_single"] - 0.5
    default_picks = [f["arms"]["default"]["picks"] for f in F]
    return (
        f"| {Path(path).stem} | {acc['last']:.1f} | {acc['all']:.1f} | "
        f"{acc['default']:.1f} | {cv:.1f} | {acc['best_single']:.1f} | "
        f"{cv - acc['default']:+.1f} | {cv - acc['best_single']:+.1f} | "
        f"{', '.join(map(str, ks))} | {_stability(picks, L):.2f} | "
        f"{_stability(default_picks, L):.2f} | {fit['default']:.1f} / "
        f"{fit['cv_one_se']:.1f} | {'met' if ok else 'missed'} |"
    )


TARGET_HEADER = (
    "| stack | last | all | default K=4 | LOESSelectorCV (paired_se) | best single "
    "| Δ K=4 | Δ best single | K per fold | CV stability | default stability "
    "| fit s default / CV | target |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
)


def _machines(paths):
    """The machine lines of the runs behind a summary (full, shipped,
    recommended)."""
    files = [Path(p) for p in paths]
    files += [d / Path(p).name for p in paths for d in (SHIPPED, RECOMMEND)]
    return machine_lines(
        json.loads(f.read_text()).get("machine") for f in files if f.is_file()
    )


def summarize(paths):
    """Markdown: per set, the fixed arms, the budget curves and each rule."""
    lines = [*TARGET_HEADER, *(target_row(p) for p in paths), ""]
    shipped, recommended = shipped_table(paths), recommend_table(paths)
    head = []
    if len(shipped) > 2:
        head += [
            "LOESSelectorCV as shipped (`--shipped`), on the same outer folds:",
            "",
            *shipped,
            "",
        ]
    if len(recommended) > 2:
        head += [
            "The report's recommendation (`--recommend`), on the same outer folds:",
            "",
            *recommended,
            "",
        ]
    if head:
        lines = [
            *head,
            "The rules before (from the full runs' per-fold scores):",
            "",
            *lines,
        ]
    lines = [_machines(paths), "", *lines]
    for path in paths:
        r = json.loads(Path(path).read_text())
        F = r["folds"]
        acc = {a: 100 * np.mean([f["arms"][a]["acc"] for f in F]) for a in F[0]["arms"]}
        lines += [
            f"### {Path(path).stem} ({r['meta'].get('rows', r['meta']['n'])} rows, "
            f"{r['n_layers']} layers)",
            "",
            machine_line(r.get("machine")),
            "",
            "fixed arms (held-out %): "
            + ", ".join(f"{a} {v:.1f}" for a, v in acc.items()),
            "",
            "| curve | " + " | ".join(f"K={k}" for k in range(1, K_MAX + 1)) + " |",
            "|---" * (K_MAX + 1) + "|",
        ]
        for key in ("ridge_shipped", "ridge", "ridge_cv10", "head"):
            if key not in F[0]["inner"]:
                continue
            m = 100 * _curve(F, key).mean(0)
            lines.append(f"| inner {key} | " + " | ".join(f"{v:.1f}" for v in m) + " |")
        for key in ("grid_cv", "grid_k4", "all"):
            A = [f["outer"][key]["acc"] for f in F]
            k = min(map(len, A))
            m = 100 * np.mean([a[:k] for a in A], 0)
            lines.append(
                f"| held-out {key} | " + " | ".join(f"{v:.1f}" for v in m) + " |"
            )
        lines += [
            "",
            "| rule | held-out % | Δ default K=4 | Δ best single | K per fold |",
            "|---|---|---|---|---|",
        ]
        for key, rule in RULES:
            if key not in F[0]["inner"]:
                continue
            ks = [rule_pick(f["inner"][key], rule) for f in F]
            a = 100 * np.mean(
                [
                    f["outer"]["grid_cv"]["acc"][k - 1]
                    for f, k in zip(F, ks, strict=True)
                ]
            )
            lines.append(
                f"| {key} {rule} | {a:.1f} | {a - acc['default']:+.1f} | "
                f"{a - acc['best_single']:+.1f} | {', '.join(map(str, ks))} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2", "minilm"])
    parser.add_argument("--sets", nargs="+", default=list(_stacks.DEV_SETS))
    parser.add_argument("--n", type=int, default=1000, help="texts extracted")
    parser.add_argument("--rows", type=int, default=None, help="rows used")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--C", type=float, default=0.01)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--shipped", action="store_true", help="see the docstring")
    parser.add_argument("--recommend", action="store_true", help="see the docstring")
    parser.add_argument("--summarize", nargs="+", default=None, help="JSON files")
    parser.add_argument(
        "--fusion",
        default=None,
        help="fusion of --shipped and --recommend (default: the library's)",
    )
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize))
        return
    for model in args.models:
        for name in args.sets:
            suffix = "" if args.C == 0.01 else f"_C{args.C:g}"
            if args.shipped or args.recommend:
                from skloes.core._fusion import DEFAULT_FUSION

                part = run_shipped if args.shipped else run_recommend
                fusion = args.fusion or DEFAULT_FUSION
                part(model, name, args.n, args.max_length, args.C, args.rows, fusion)
                continue
            if (OUT / f"{model}_{name}{suffix}.json").exists() and not args.force:
                continue
            if not _stacks.path_of(model, name, args.n, args.max_length).exists():
                print("missing stack", model, name, flush=True)
                continue
            run(model, name, args.n, args.max_length, args.C, args.rows)


if __name__ == "__main__":
    main()
