"""Run ONE lmprobe arm over given outer folds; write per-fold results to JSON.

The lmprobe side of ``bench_lmprobe.py`` (skloes vs lmprobe), which runs it
with the lmprobe virtual environment's Python, never the system one (lmprobe
is not a skloes dependency)::

    HF_HUB_OFFLINE=1 benchmarks/.venv-lmprobe/bin/python benchmarks/_lmprobe_arm.py \
        --arm default --data DATA.json --folds FOLDS.json --out OUT.json

The inputs come from ``bench_lmprobe.py`` (system Python + skloes), so both
tools read the same texts and the same folds.

Arms (lmprobe 0.10.3 semantics):

* ``default``    Probe(model) as shipped: layers="middle" (the middle THIRD of
                 the decoder blocks, concatenated: blocks 10..19 of SmolLM2's
                 30, i.e. 5,760 features), pooling="last_token",
                 logistic_regression, per-neuron standardisation.
* ``auto``       layers="auto", pooling="mean": Group Lasso (skglm, alpha=0.01)
                 over candidate blocks at 25/50/75% depth (7, 14, 21 for 30
                 blocks), then logistic regression on the kept blocks.
* ``fast_auto``  layers="fast_auto", pooling="mean": logistic regression on
                 the same candidates, keeps the top half by coefficient L2 norm
                 (1 of 3), refits.
* ``custom``     whatever --layers / --pooling say.

``--layers`` / ``--pooling`` override any arm. Layer numbers in the output are
lmprobe's (0 = output of the first decoder block); ``layers_hf`` adds 1 to
give the Hugging Face ``hidden_states`` index skloes uses (0 = embeddings).
Caveat: lmprobe's last block (29) is the raw block output, while
``hidden_states[30]`` is after the final norm.

Cache: every run gets its own EMPTY LMPROBE_CACHE_DIR (a fresh temporary
folder unless --cache-dir names an empty or missing one), set before lmprobe
is imported, and removed afterwards unless --keep-cache. So each arm starts
cold; within a run lmprobe reuses its cache across folds (after fold 1 every
text is cached), which is its normal behaviour and part of what we measure.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine

T_PROCESS0 = time.perf_counter()

ARMS = {
    "default": {},
    "auto": {"layers": "auto", "pooling": "mean"},
    "fast_auto": {"layers": "fast_auto", "pooling": "mean"},
    "custom": {},
}


def find_smollm2() -> str:
    """The converted SmolLM2 safetensors folder (skloes' user cache)."""
    base = os.environ.get("SKLOES_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "skloes"
    )
    hits = sorted(
        p
        for p in glob.glob(os.path.join(base, "gguf", "SmolLM2-135M-Instruct*"))
        if os.path.exists(os.path.join(p, "skloes_source.json"))
    )
    if not hits:
        sys.exit(f"no converted SmolLM2 folder under {base}/gguf; pass --model")
    return hits[-1]


def parse_layers(text):
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    if "," in text:
        return [int(t) for t in text.split(",") if t.strip()]
    return text


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def loadavg():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--arm", choices=sorted(ARMS), required=True)
    ap.add_argument("--data", required=True, help="JSON from make_inputs.py")
    ap.add_argument("--folds", required=True, help="JSON from make_inputs.py")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--model",
        default=None,
        help="local model folder (default: skloes' converted SmolLM2)",
    )
    ap.add_argument(
        "--layers",
        default=None,
        help='override: int, "a,b,c", middle, last, all, auto, fast_auto, sweep...',
    )
    ap.add_argument(
        "--pooling", default=None, help="override: last_token, mean, first_token"
    )
    ap.add_argument(
        "--device",
        default="cpu",
        help='lmprobe device; its default "auto" means device_map="auto"',
    )
    ap.add_argument("--batch-size", type=int, default=8, help="lmprobe default: 8")
    ap.add_argument("--random-state", type=int, default=0)
    ap.add_argument("--auto-alpha", type=float, default=None)
    ap.add_argument("--fast-auto-top-k", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument(
        "--max-folds", type=int, default=None, help="run only the first k folds"
    )
    ap.add_argument("--cache-dir", default=None, help="must be empty or missing")
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument(
        "--check-save",
        action="store_true",
        help="after fold 1: save(), load() and compare predictions",
    )
    args = ap.parse_args(argv)

    # --- cold cache, set before lmprobe is imported ------------------------
    if args.cache_dir:
        cache_dir = Path(args.cache_dir)
        if cache_dir.exists() and any(cache_dir.iterdir()):
            sys.exit(f"--cache-dir {cache_dir} is not empty: the arm must start cold")
        cache_dir.mkdir(parents=True, exist_ok=True)
    else:
        cache_dir = Path(tempfile.mkdtemp(prefix="lmprobe-cache-"))
    os.environ["LMPROBE_CACHE_DIR"] = str(cache_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    data = json.loads(Path(args.data).read_text())
    fold_doc = json.loads(Path(args.folds).read_text())
    if fold_doc.get("texts_sha256_16") != data.get("texts_sha256_16"):
        sys.exit("folds file was made for other texts (texts_sha256_16 differs)")
    texts = data["texts"]
    import numpy as np

    y = np.asarray(data["y"], dtype=np.int64)  # ints: lmprobe's "standard" fit mode
    folds = fold_doc["folds"][: args.max_folds]
    model = args.model or find_smollm2()

    t_import0 = time.perf_counter()
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    import lmprobe
    from lmprobe import Probe

    t_import = time.perf_counter() - t_import0
    if args.threads:
        torch.set_num_threads(args.threads)

    kwargs = dict(ARMS[args.arm])
    if args.layers is not None:
        kwargs["layers"] = parse_layers(args.layers)
    if args.pooling is not None:
        kwargs["pooling"] = args.pooling
    if args.auto_alpha is not None:
        kwargs["auto_alpha"] = args.auto_alpha
    if args.fast_auto_top_k is not None:
        kwargs["fast_auto_top_k"] = args.fast_auto_top_k
    kwargs.update(
        device=args.device, batch_size=args.batch_size, random_state=args.random_state
    )

    n_classes = int(len(np.unique(y)))
    result = {
        "tool": "lmprobe",
        "arm": args.arm,
        "probe_kwargs": {k: v for k, v in kwargs.items()},
        "model": model,
        "dataset": data.get("dataset"),
        "loader": data.get("loader"),
        "truncate_tokens": data.get("truncate_tokens"),
        "texts_sha256_16": data.get("texts_sha256_16"),
        "n_samples": len(texts),
        "n_classes": n_classes,
        "folds_spec": fold_doc.get("spec"),
        "n_folds_run": len(folds),
        "versions": {
            "lmprobe": lmprobe.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
        },
        "torch_threads": torch.get_num_threads(),
        "machine": machine(),
        "loadavg_start": loadavg(),
        "cache_dir": str(cache_dir),
        "cache_cold_at_start": not any(cache_dir.iterdir()),
        "import_s": round(t_import, 3),
        "folds": [],
    }
    if kwargs.get("layers") == "auto" and n_classes > 2:
        result["warning"] = (
            "lmprobe's Group Lasso is binary: it maps y==0 to -1 and "
            "every other class to +1, so layers='auto' selects layers "
            "for class-0-vs-rest on this multi-class task"
        )

    accs = []
    t_run0, c_run0 = time.perf_counter(), time.process_time()
    for k, fold in enumerate(folds):
        tr, te = np.asarray(fold["train"]), np.asarray(fold["test"])
        X_tr = [texts[i] for i in tr]
        X_te = [texts[i] for i in te]
        t0, c0 = time.perf_counter(), time.process_time()
        probe = Probe(model=model, **kwargs)
        probe.fit(X_tr, y[tr])
        t_fit, c_fit = time.perf_counter() - t0, time.process_time() - c0
        t1, c1 = time.perf_counter(), time.process_time()
        pred = np.asarray(probe.predict(X_te))
        t_pred, c_pred = time.perf_counter() - t1, time.process_time() - c1
        acc = float((pred == y[te]).mean())
        accs.append(acc)
        used = [int(l) for l in probe._extractor.layer_indices]
        row = {
            "fold": k,
            "n_train": int(len(tr)),
            "n_test": int(len(te)),
            "accuracy": acc,
            "layers_used": used,  # lmprobe block index
            "layers_used_hf": [l + 1 for l in used],  # hidden_states index
            "selected_layers": (
                None
                if probe.selected_layers_ is None
                else [int(l) for l in probe.selected_layers_]
            ),
            "candidate_layers": (
                None
                if probe.candidate_layers_ is None
                else [int(l) for l in probe.candidate_layers_]
            ),
            "layer_importances": (
                None
                if probe.layer_importances_ is None
                else [float(v) for v in np.ravel(probe.layer_importances_)]
            ),
            "fit_s": round(t_fit, 3),
            "predict_s": round(t_pred, 3),
            "fit_cpu_s": round(c_fit, 3),  # all threads; robust to pauses
            "predict_cpu_s": round(c_pred, 3),
            "cache_mb_after": round(dir_bytes(cache_dir) / 2**20, 1),
        }
        if args.check_save and k == 0:
            tmp = Path(tempfile.mkdtemp(prefix="lmprobe-save-"))
            path = tmp / "probe.pkl"
            t2 = time.perf_counter()
            probe.save(str(path))
            loaded = Probe.load(str(path))
            pred2 = np.asarray(loaded.predict(X_te))
            row["save_check"] = {
                "bytes": path.stat().st_size,
                "same_predictions": bool(np.array_equal(pred, pred2)),
                "loaded_layers": [int(l) for l in loaded._extractor.layer_indices],
                "seconds": round(time.perf_counter() - t2, 3),
            }
            shutil.rmtree(tmp, ignore_errors=True)
        result["folds"].append(row)
        print(
            f"[{args.arm}] fold {k}: acc={acc:.4f} "
            f"layers={row['selected_layers'] or used} fit={t_fit:.1f}s "
            f"predict={t_pred:.1f}s (cpu {c_fit:.0f}+{c_pred:.0f}s)",
            flush=True,
        )

    result["mean_accuracy"] = float(np.mean(accs)) if accs else None
    result["std_accuracy"] = float(np.std(accs)) if accs else None
    result["run_wall_s"] = round(
        time.perf_counter() - t_run0, 3
    )  # folds only, incl. model load
    result["run_cpu_s"] = round(time.process_time() - c_run0, 3)  # all threads
    result["process_wall_s"] = round(time.perf_counter() - T_PROCESS0, 3)  # + imports
    result["process_cpu_s"] = round(time.process_time(), 3)
    result["cache_mb_final"] = round(dir_bytes(cache_dir) / 2**20, 1)
    result["loadavg_end"] = loadavg()
    if not args.keep_cache:
        shutil.rmtree(cache_dir, ignore_errors=True)
        result["cache_removed"] = True
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(
        f"[{args.arm}] mean acc {result['mean_accuracy']:.4f} over {len(accs)} folds, "
        f"run {result['run_wall_s']:.1f}s, process {result['process_wall_s']:.1f}s "
        f"-> {args.out}"
    )


if __name__ == "__main__":
    main()
