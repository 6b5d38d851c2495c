"""Benchmark: GeoReg on real MiniLM features (issue 4 §5).

1. Head mode on LOES-selected layers of all-MiniLM-L6-v2 (mean pooling), for
   Rotten Tomatoes (sentiment, 2 classes) and chatterbot language ID
   (15 classes), 2,000 texts each, a stratified 75/25 split: test accuracy of
   cross-entropy alone (``geo_weight=0``) against cross-entropy + GeoReg (robust
   and reference variants, ``geo_weight=0.1``), 5 seeds, mean ± std; the same
   seed gives the same initialisation, split and shuffles in every arm.
2. Geometry of the fused embedding ``Z`` (the head's output before the probe's
   LayerNorm) on the test texts: effective rank (Roy & Vetterli) and erank
   isotropy from :mod:`skloes._geometry`, before training (the freshly
   initialised head, same seed) and after, with and without GeoReg.
3. End-to-end mode on 1,000 Rotten Tomatoes texts (750 train / 250 test), one
   epoch on CPU: seconds per epoch and test accuracy, against the frozen
   backbone (the same code path with ``lr_backbone=0``) and against head mode
   on cached features with the default 15 epochs.

Hidden states are cached under ``benchmarks/.cache`` (git-ignored). One torch
thread: on the shared 2-core box, OpenMP oversubscription made two threads
several times slower. Run: ``python benchmarks/bench_georeg.py`` (about 15-20
minutes there). Writes ``benchmarks/results/georeg.md``; the reading of the
figures lives in ``doc/benchmarks_georeg.md``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skloes import GeoRegFineTuner, HiddenStatesTransformer  # noqa: E402
from skloes._geometry import effective_rank, isotropy_erank, thin_svd  # noqa: E402
from skloes._heads import LayerFusionHead, make_generator  # noqa: E402
from skloes.datasets import load_chatterbot_langid, load_rotten_tomatoes  # noqa: E402

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "georeg"
SEEDS = range(5)
ARMS = {"CE only (w=0)": dict(geo_weight=0.0),
        "CE + GeoReg robust (w=0.1)": dict(geo_weight=0.1, geo_variant="robust"),
        "CE + GeoReg reference (w=0.1)": dict(geo_weight=0.1,
                                              geo_variant="reference")}
MAX_LENGTH = 128


def _features(texts):
    hst = HiddenStatesTransformer(max_length=MAX_LENGTH, batch_size=64,
                                  device="cpu", cache=str(CACHE))
    return hst.fit_transform(list(texts))


def _select_layers(H, y):
    try:
        from skloes import LOESSelector

        sel = LOESSelector(n_layers_to_select=4, random_state=0).fit(H, y)
        return [int(l) for l in sel.selected_layers_], "LOES (K=4)"
    except (ImportError, AttributeError):  # selector not available
        return list(range(1, 7)), "layers 1..6 (no LOESSelector)"


def _geometry(Z):
    Z = np.asarray(Z, dtype=np.float64)
    _, s = thin_svd(Z)
    return effective_rank(s), isotropy_erank(s, *Z.shape)


def _initial_embedding(H, layers, n_classes, seed, test):
    """Z of the freshly initialised head (the estimator draws it the same way)."""
    feats = torch.from_numpy(np.ascontiguousarray(
        H[layers][:, test].transpose(1, 0, 2), dtype=np.float32))
    head = LayerFusionHead(len(layers), H.shape[2], n_classes, proj_dim=256,
                           generator=make_generator(seed)).eval()
    with torch.no_grad():
        return head.embed(feats).numpy()


def head_mode(name, texts, y):
    t0 = time.perf_counter()
    H = _features(texts)
    t_feat = time.perf_counter() - t0
    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=0.25, stratify=y, random_state=0)
    layers, how = _select_layers(H[:, train], y[train])
    fused = np.concatenate([H[l][test] for l in layers], axis=1)
    geo = {"raw fused layers (no head)": [_geometry(fused)]}
    geo["head at initialisation"] = [
        _geometry(_initial_embedding(H, layers, len(np.unique(y)), s, test))
        for s in SEEDS]
    acc, secs = {}, {}
    for arm, params in ARMS.items():
        acc[arm], secs[arm], geo[f"after: {arm}"] = [], [], []
        for seed in SEEDS:
            clf = GeoRegFineTuner(layers=layers, random_state=seed, device="cpu",
                                  **params)
            t = time.perf_counter()
            clf.fit(H[:, train], y[train])
            secs[arm].append((time.perf_counter() - t) / clf.n_iter_)
            acc[arm].append(clf.score(H[:, test], y[test]))
            geo[f"after: {arm}"].append(_geometry(clf.transform(H[:, test])))
        print(f"  {name} {arm}: {np.mean(acc[arm]):.4f}", flush=True)
    return dict(name=name, layers=layers, how=how, acc=acc, secs=secs, geo=geo,
                t_feat=t_feat, n=len(y), n_classes=len(np.unique(y)))


def end_to_end(texts, y, layers):
    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=0.25, stratify=y, random_state=0)
    Xtr, Xte = [texts[i] for i in train], [texts[i] for i in test]
    common = dict(mode="finetune", layers=layers, max_epochs=1, batch_size=32,
                  lr=1e-3, max_length=MAX_LENGTH, validation_fraction=0,
                  device="cpu", random_state=0)
    rows = []
    for label, lr_backbone in [("end-to-end (backbone lr 2e-5)", 2e-5),
                               ("frozen backbone (lr_backbone=0)", 0.0)]:
        clf = GeoRegFineTuner(lr_backbone=lr_backbone, **common)
        t = time.perf_counter()
        clf.fit(Xtr, y[train])
        fit_s = time.perf_counter() - t
        t = time.perf_counter()
        score = clf.score(Xte, y[test])
        rows.append((label, fit_s, time.perf_counter() - t, score, 1))
        print(f"  e2e {label}: {fit_s:.1f}s, acc {score:.4f}", flush=True)
    H = _features(texts)
    clf = GeoRegFineTuner(layers=layers, device="cpu", random_state=0)
    t = time.perf_counter()
    clf.fit(H[:, train], y[train])
    fit_s = time.perf_counter() - t
    rows.append(("head mode on cached features (15 epochs max, lr 1e-4)",
                 fit_s / clf.n_iter_, float("nan"), clf.score(H[:, test], y[test]),
                 clf.n_iter_))
    return rows


def _pm(values, digits=4):
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f}"


def _report(results, e2e, e2e_layers, elapsed):
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# GeoReg benchmark (`benchmarks/bench_georeg.py`)",
        "",
        f"Run {now} on {platform.machine()} / {os.cpu_count()} CPU cores "
        f"(shared), torch {torch.__version__}, 1 torch thread; all-MiniLM-L6-v2, "
        f"mean pooling, max_length {MAX_LENGTH}; total {elapsed / 60:.1f} min. "
        "Head defaults of the spec (proj_dim 256, lr 1e-4, batch 128, 15 epochs "
        "max, 10% stratified validation with early stopping, concat fusion).",
        "",
        "## Head mode: test accuracy, 5 seeds (mean ± std)",
        "",
        "| data | layers | " + " | ".join(ARMS) + " |",
        "|---|---|" + "---|" * len(ARMS),
    ]
    for r in results:
        cells = " | ".join(_pm(r["acc"][a]) for a in ARMS)
        lines.append(f"| {r['name']} (n={r['n']}, {r['n_classes']} classes) | "
                     f"{r['layers']} ({r['how']}) | {cells} |")
    lines += ["", "Seconds per epoch (head mode, mean over seeds): " + "; ".join(
        f"{r['name']}: " + ", ".join(f"{a.split(' (')[0]} {np.mean(r['secs'][a]):.2f}"
                                     for a in ARMS) for r in results) + ".",
              "",
              "## Geometry of the fused embedding Z on the test texts",
              "",
              "Effective rank exp(H(σ/Σσ)) and erank isotropy "
              "exp(H(σ²/Σσ²))/min(n-1, d) of the centred Z (d = 1024 for the "
              "head, 4·384 for the raw layers); mean ± std over seeds.",
              "",
              "| data | embedding | effective rank | isotropy |",
              "|---|---|---|---|"]
    for r in results:
        for label, vals in r["geo"].items():
            er, iso = np.array(vals).T
            lines.append(f"| {r['name']} | {label} | {_pm(er, 1)} | {_pm(iso, 4)} |")
    lines += ["", f"## End-to-end mode: 1,000 Rotten Tomatoes texts, layers "
              f"{e2e_layers}, CPU", "",
              "One epoch, batch 32, head lr 1e-3, GeoReg robust w=0.1, no "
              "validation split; 750 train / 250 test.", "",
              "| run | seconds per epoch | predict 250 texts (s) | test accuracy | "
              "epochs |", "|---|---|---|---|---|"]
    base = e2e[1][1]
    for label, sec, pred, acc, epochs in e2e:
        pred_s = "-" if np.isnan(pred) else f"{pred:.1f}"
        lines.append(f"| {label} | {sec:.2f} ({sec / base:.3g}x frozen) | {pred_s} | "
                     f"{acc:.4f} | {epochs} |")
    return "\n".join(lines) + "\n"


def main():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ConvergenceWarning)
    t0 = time.perf_counter()
    rt = load_rotten_tomatoes(n_samples=2000, random_state=0)
    cb = load_chatterbot_langid(n_samples=2000, random_state=0)
    results = []
    for name, bunch in [("Rotten Tomatoes", rt), ("chatterbot langid", cb)]:
        print(name, flush=True)
        results.append(head_mode(name, list(bunch.data), np.asarray(bunch.target)))
    rt1k = load_rotten_tomatoes(n_samples=1000, random_state=0)
    texts, y = list(rt1k.data), np.asarray(rt1k.target)
    layers = results[0]["layers"]
    e2e = end_to_end(texts, y, layers)
    text = _report(results, e2e, layers, time.perf_counter() - t0)
    path = ROOT / "results" / "georeg.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
