"""Benchmark: does GeoReg earn its place? (issue 13).

Three parts, each appending one JSON line per fit to ``OUT/<part>.jsonl`` (so a
long run can be resumed and read while it runs) and printing its table:

``defaults``
    :class:`~skloes.GeoRegClassifier` with default parameters against
    ``StandardScaler + LogisticRegressionCV`` (defaults: 10 C values, 5-fold) on
    the same features: all-MiniLM-L6-v2 hidden states (mean pooling) of the
    layers a default :class:`~skloes.LOESSelector` picks on the training rows,
    for Rotten Tomatoes (2 classes), BBC News (5) and chatterbot language ID
    (15), 2,000 texts each, 450 and 1,600 training rows (the rest is the test
    set), 5 seeds. Also the default head with ``geo_weight=0`` and with the
    former default ``geo_weight=0.1``. A resumed run reuses the layers recorded
    in a seed's logistic row, so that its arms stay paired when
    ``LOESSelector`` has changed in between. Features are extracted at
    ``--max-length`` tokens (default 512; the reported BBC News rows used
    128).
``head``
    Regimes where a head's representation is expected to collapse: language
    ID with few examples per class (10 per class, 150 rows) and with 30 %
    label noise (450 rows). The authors' head (``linear_probe=False``, GeoReg
    weight 0, 0.1 and 1) and the default one (0, 0.01 and 0.1), 5 seeds; test
    accuracy and the geometry of
    the fused embedding ``Z`` on the test rows (effective rank, erank
    isotropy, class-centroid triangle area from :mod:`skloes.metrics`).
``finetune``
    End-to-end :class:`~skloes.GeoRegFineTuner` on CPU: MiniLM (layers 2, 4, 6,
    2 epochs, GeoReg weight 0 / 0.1 / 1) and SmolLM2-135M-Instruct (layers 4,
    8, 12, 1 epoch, weight 0 / 0.1), 5 seeds each, on language ID (400
    training texts, 400 test texts, ``max_length=24``, batch 16, ``lr=1e-3``,
    ``lr_backbone=5e-5``, no validation split, default ``exclude_tokens``:
    SmolLM2's first token, the attention sink, is left out of the mean); the
    epochs are what a 2-core shared machine allowed. Geometry of the
    backbone's pooled, concatenated selected layers on the test texts before
    (pretrained) and after fine-tuning (pooled as the head sees them), and of
    ``Z``; held-out accuracy; seconds per epoch (the whole ``fit`` divided by
    its epochs: model loading included).

Features are extracted once into ``FEATS`` (``--feats``). One torch thread.
Run: ``python benchmarks/bench_georeg.py defaults head finetune --out DIR``;
``--report`` only prints the tables of what ``DIR`` holds. The reading of the
figures lives in ``doc/benchmarks_georeg.md``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from _machine import machine, machine_lines  # noqa: E402

DATASETS = ("rotten_tomatoes", "bbc_news", "chatterbot_langid")
SIZES = (450, 1600)
SEEDS = range(5)
FINETUNE = {  # model -> (model argument, layers, seeds, epochs, GeoReg weights)
    "minilm": (None, [2, 4, 6], [0, 1, 2, 3, 4], 2, (0.0, 0.1, 1.0)),
    "smollm2": (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        [4, 8, 12],
        [0, 1, 2, 3, 4],
        1,
        (0.0, 0.1),
    ),
}


# ----------------------------------------------------------------- helpers
def _features(name, feats_dir, max_length=512):
    """MiniLM stack (7, 2000, 384) and labels, extracted once.

    ``max_length`` applies only when the file is absent (it is not part of
    the file name): an existing ``feat_<name>.npz`` is read as it is.
    """
    path = Path(feats_dir) / f"feat_{name}.npz"
    if not path.exists():
        from skloes import HiddenStatesTransformer
        from skloes.datasets import load_dataset

        X, y = load_dataset(name, n_samples=2000, return_X_y=True)
        H = HiddenStatesTransformer(max_length=max_length, verbose=0).fit_transform(
            list(X)
        )
        np.savez(path, H=H.astype(np.float32), y=np.asarray(y))
    data = np.load(path)
    return data["H"], data["y"]


def _split(n_total, n_train, seed):
    idx = np.random.RandomState(seed).permutation(n_total)
    return idx[:n_train], idx[n_train:]


class _Done:
    """Keys already in a JSONL file, re-read at each look-up (parallel runs)."""

    def __init__(self, path):
        self.path = path

    def __contains__(self, key):
        if not self.path.exists():
            return False
        return key in {json.dumps(json.loads(line)["key"]) for line in self.path.open()}


def _done(path):
    return _Done(path)


def _write(path, key, **row):
    with path.open("a") as fh:
        fh.write(json.dumps({"key": key, **row, "machine": machine()}) + "\n")


def _geometry(F, y):
    from skloes.metrics import effective_rank, isotropy, simplex_volume

    return {
        "erank": float(effective_rank(F)),
        "iso": float(isotropy(F)),
        "vol": float(simplex_volume(F, y, random_state=0)),
    }


def _rows(path):
    return [json.loads(line) for line in path.open()] if path.exists() else []


def _mean(values):
    return float(np.mean(values)), float(np.std(values)), len(values)


# ---------------------------------------------------------------- defaults
def run_defaults(out, feats_dir, datasets=DATASETS, sizes=SIZES, max_length=512):
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes import GeoRegClassifier, LOESSelector

    path = out / "defaults.jsonl"
    done = _done(path)
    arms = {
        "default": {},
        "default, w=0": {"geo_weight": 0.0},
        "default, w=0.1": {"geo_weight": 0.1},
    }
    for name in datasets:
        H, y = _features(name, feats_dir, max_length)
        for n in sizes:
            for seed in SEEDS:
                tr, te = _split(len(y), n, seed)
                layers = _recorded_layers(path, [name, n, seed, "logistic"])
                if layers is None:
                    layers = LOESSelector().fit(H[:, tr], y[tr]).selected_layers_
                S = H[layers]
                key = [name, n, seed, "logistic"]
                if json.dumps(key) not in done:
                    t = time.perf_counter()
                    F = np.concatenate(list(S), axis=1)
                    lr = make_pipeline(
                        StandardScaler(), LogisticRegressionCV(max_iter=3000)
                    )
                    acc = lr.fit(F[tr], y[tr]).score(F[te], y[te])
                    _write(
                        path,
                        key,
                        acc=acc,
                        seconds=time.perf_counter() - t,
                        layers=layers.tolist(),
                    )
                for arm, params in arms.items():
                    key = [name, n, seed, arm]
                    if json.dumps(key) in done:
                        continue
                    t = time.perf_counter()
                    clf = GeoRegClassifier(random_state=seed, **params)
                    clf.fit(S[:, tr], y[tr])
                    acc = float(np.mean(clf.predict(S[:, te]) == y[te]))
                    _write(
                        path,
                        key,
                        acc=acc,
                        seconds=time.perf_counter() - t,
                        best_epoch=clf.best_epoch_,
                        n_iter=clf.n_iter_,
                        layers=layers.tolist(),
                    )
    report_defaults(out)


def _recorded_layers(path, key):
    """The layers a recorded row used, or None.

    A resumed run takes a seed's layers from its logistic row, so that every
    arm of the seed stays paired even when ``LOESSelector`` has changed since.
    """
    for row in _rows(path):
        if row["key"] == key and "layers" in row:
            return np.asarray(row["layers"])
    return None


def report_defaults(out):
    rows = _rows(out / "defaults.jsonl")
    if not rows:
        return
    print(machine_lines(row.get("machine") for row in rows))
    print(
        "\nDefault GeoRegClassifier vs LogisticRegressionCV (test accuracy, "
        "mean ± std over seeds; diff in points, paired)"
    )
    print(
        f"{'data set':<18}{'n':>6}  {'logistic':>14}  {'default':>14}  "
        f"{'diff':>7}  {'default w=0':>14}  {'default w=0.1':>14}  seeds"
    )
    table = {}
    for row in rows:
        name, n, seed, arm = row["key"]
        table.setdefault((name, n), {}).setdefault(arm, {})[seed] = row["acc"]
    for (name, n), arms in table.items():
        seeds = sorted(set(arms.get("logistic", {})) & set(arms.get("default", {})))
        if not seeds:
            continue
        lg = [arms["logistic"][s] for s in seeds]
        df = [arms["default"][s] for s in seeds]
        w0, w01 = (
            [arms.get(arm, {}).get(s, np.nan) for s in seeds]
            for arm in ("default, w=0", "default, w=0.1")
        )
        diff = 100 * (np.mean(df) - np.mean(lg))
        print(
            f"{name:<18}{n:>6}  {np.mean(lg):.4f}±{np.std(lg):.3f}  "
            f"{np.mean(df):.4f}±{np.std(df):.3f}  {diff:+7.2f}  "
            f"{np.nanmean(w0):.4f}±{np.nanstd(w0):.3f}  "
            f"{np.nanmean(w01):.4f}±{np.nanstd(w01):.3f}  {len(seeds)}"
        )


# -------------------------------------------------------------------- head
HEAD_REGIMES = {"10 per class": dict(per_class=10), "30% label noise": dict(noise=0.3)}
HEAD_ARMS = {
    f"{head}, w={w}": dict(linear_probe=lp, geo_weight=w)
    for head, lp in (("authors' head", False), ("default", True))
    for w in ((0.0, 0.1, 1.0) if not lp else (0.0, 0.01, 0.1))
}


def _head_split(y, regime, seed):
    rng = np.random.RandomState(seed)
    if "per_class" in regime:
        k = regime["per_class"]
        tr = np.concatenate(
            [rng.permutation(np.flatnonzero(y == c))[:k] for c in np.unique(y)]
        )
    else:
        tr = rng.permutation(len(y))[:450]
    te = np.setdiff1d(np.arange(len(y)), tr)
    y_train = y[tr].copy()
    if regime.get("noise"):
        flip = rng.rand(len(tr)) < regime["noise"]
        y_train[flip] = rng.choice(np.unique(y), flip.sum())
    return tr, te, y_train


def run_head(out, feats_dir, seeds=SEEDS):
    from skloes import GeoRegClassifier, LOESSelector

    path = out / "head.jsonl"
    done = _done(path)
    H, y = _features("chatterbot_langid", feats_dir)
    for regime_name, regime in HEAD_REGIMES.items():
        for seed in seeds:
            tr, te, y_train = _head_split(y, regime, seed)
            layers = LOESSelector().fit(H[:, tr], y_train).selected_layers_
            S = H[layers]
            for arm, params in HEAD_ARMS.items():
                key = [regime_name, seed, arm]
                if json.dumps(key) in done:
                    continue
                t = time.perf_counter()
                clf = GeoRegClassifier(random_state=seed, **params).fit(
                    S[:, tr], y_train
                )
                acc = float(np.mean(clf.predict(S[:, te]) == y[te]))
                _write(
                    path,
                    key,
                    acc=acc,
                    seconds=time.perf_counter() - t,
                    **_geometry(clf.transform(S[:, te]), y[te]),
                )
    report_head(out)


def report_head(out):
    rows = _rows(out / "head.jsonl")
    if not rows:
        return
    print(machine_lines(row.get("machine") for row in rows))
    print(
        "\nHead regimes where collapse is expected (language ID, MiniLM LOES "
        "features): mean over seeds of the test accuracy and of Z's geometry"
    )
    print(
        f"{'regime':<17}{'arm':<24}{'acc':>14}{'erank':>8}{'iso':>7}"
        f"{'volume':>8}  seeds"
    )
    table = {}
    for row in rows:
        regime, seed, arm = row["key"]
        table.setdefault((regime, arm), []).append(row)
    for (regime, arm), group in table.items():
        acc = [r["acc"] for r in group]
        print(
            f"{regime:<17}{arm:<24}{np.mean(acc):.4f}±{np.std(acc):.3f}"
            f"{np.mean([r['erank'] for r in group]):8.1f}"
            f"{np.mean([r['iso'] for r in group]):7.3f}"
            f"{np.mean([r['vol'] for r in group]):8.3f}  {len(group)}"
        )


# ---------------------------------------------------------------- finetune
def _backbone_features(est, texts):
    """Concatenated pooled selected layers of the (tuned) backbone, pooled as
    the head sees them (same tokens excluded)."""
    pooled = est._pooled_layers(list(texts))
    return pooled.transpose(1, 0, 2).reshape(pooled.shape[1], -1)


def run_finetune(out, models=tuple(FINETUNE), max_length=24, n_train=400):
    from skloes import GeoRegFineTuner, HiddenStatesTransformer
    from skloes.datasets import load_dataset

    path = out / "finetune.jsonl"
    done = _done(path)
    X, y = load_dataset("chatterbot_langid", n_samples=2000, return_X_y=True)
    X, y = np.asarray(list(X), dtype=object), np.asarray(y)
    for model_name in models:
        model, layers, seeds, epochs, weights = FINETUNE[model_name]
        for seed in seeds:
            tr, te = _split(len(y), n_train, seed)
            te = te[:400]
            key = [model_name, seed, "before"]
            if json.dumps(key) not in done:
                hst = HiddenStatesTransformer(
                    model, layers=layers, max_length=max_length, verbose=0
                )
                F = np.concatenate(list(hst.fit_transform(list(X[te]))), axis=1)
                _write(
                    path, key, **{f"bb_{k}": v for k, v in _geometry(F, y[te]).items()}
                )
            for w in weights:
                key = [model_name, seed, f"w={w}"]
                if json.dumps(key) in done:
                    continue
                t = time.perf_counter()
                est = GeoRegFineTuner(
                    model,
                    layers=layers,
                    geo_weight=w,
                    max_epochs=epochs,
                    max_length=max_length,
                    batch_size=16,
                    lr=1e-3,
                    lr_backbone=5e-5,
                    validation_fraction=0,
                    device="cpu",
                    random_state=seed,
                ).fit(list(X[tr]), y[tr])
                seconds = time.perf_counter() - t
                acc = float(np.mean(est.predict(list(X[te])) == y[te]))
                bb = _geometry(_backbone_features(est, X[te]), y[te])
                z = _geometry(est.transform(list(X[te])), y[te])
                _write(
                    path,
                    key,
                    acc=acc,
                    seconds_per_epoch=seconds / est.n_iter_,
                    **{f"bb_{k}": v for k, v in bb.items()},
                    **{f"z_{k}": v for k, v in z.items()},
                )
    report_finetune(out)


def report_finetune(out):
    rows = _rows(out / "finetune.jsonl")
    if not rows:
        return
    print(machine_lines(row.get("machine") for row in rows))
    print(
        "\nEnd-to-end fine-tuning on CPU (language ID, 400 train / 400 test "
        "texts): backbone features (concatenated selected layers) and Z"
    )
    print(
        f"{'model':<9}{'arm':<8}{'acc':>14}{'bb erank':>9}{'bb iso':>8}"
        f"{'bb vol':>8}{'Z erank':>9}{'Z iso':>7}{'Z vol':>7}{'s/epoch':>9}"
        "  seeds"
    )
    table = {}
    for row in rows:
        model, seed, arm = row["key"]
        table.setdefault((model, arm), []).append(row)
    for (model, arm), group in table.items():

        def avg(field, group=group):
            values = [r[field] for r in group if field in r]
            return np.mean(values) if values else np.nan

        acc = [r["acc"] for r in group if "acc" in r]
        acc_text = f"{np.mean(acc):.4f}±{np.std(acc):.3f}" if acc else f"{'-':>12}"
        print(
            f"{model:<9}{arm:<8}{acc_text:>14}{avg('bb_erank'):9.1f}"
            f"{avg('bb_iso'):8.3f}{avg('bb_vol'):8.3f}{avg('z_erank'):9.1f}"
            f"{avg('z_iso'):7.3f}{avg('z_vol'):7.3f}"
            f"{avg('seconds_per_epoch'):9.0f}  {len(group)}"
        )


# -------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "parts",
        nargs="*",
        default=["defaults", "head", "finetune"],
        choices=["defaults", "head", "finetune"],
    )
    parser.add_argument("--out", default="benchmarks/results/georeg")
    parser.add_argument(
        "--feats", default=None, help="folder of the extracted features (default: OUT)"
    )
    parser.add_argument(
        "--report", action="store_true", help="only print the tables of what OUT holds"
    )
    parser.add_argument("--finetune-models", default=",".join(FINETUNE))
    parser.add_argument(
        "--datasets", default=",".join(DATASETS), help="data sets of the defaults part"
    )
    parser.add_argument(
        "--seeds", default=",".join(map(str, SEEDS)), help="seeds of the head part"
    )
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="training sizes of the defaults part",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=512,
        help="tokens per text when the defaults part extracts features (BBC News: 128)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    feats = args.feats or str(out)
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # convergence notes of short runs
    reports = {
        "defaults": report_defaults,
        "head": report_head,
        "finetune": report_finetune,
    }
    for part in args.parts:
        if args.report:
            reports[part](out)
        elif part == "defaults":
            run_defaults(
                out,
                feats,
                args.datasets.split(","),
                [int(n) for n in args.sizes.split(",")],
                args.max_length,
            )
        elif part == "head":
            run_head(out, feats, [int(s) for s in args.seeds.split(",")])
        else:
            run_finetune(out, models=args.finetune_models.split(","))


if __name__ == "__main__":
    main()
