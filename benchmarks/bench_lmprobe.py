"""skloes' LayerProbeClassifier against lmprobe, the closest peer, end to end.

Both tools probe the same SmolLM2 weights (the safetensors folder skloes
converts from the offline GGUF) on the same texts and the same outer folds
(``StratifiedKFold(5, shuffle=True, random_state=0)``), from raw texts, each
with a cold activation cache at the start of its run. Per fold: accuracy,
layers chosen, wall and CPU seconds. lmprobe runs only in its own virtual
environment (never a skloes dependency), one arm per process:

* ``default``: ``Probe(model)`` as shipped: the middle third of the blocks
  (10..19 for SmolLM2) concatenated, last token;
* ``auto``: ``layers="auto", pooling="mean"`` (Group Lasso over blocks 7, 14, 21);
* ``fast_auto``: ``layers="fast_auto", pooling="mean"``.

skloes' arm is ``LayerProbeClassifier(SmolLM2, cache=<fresh folder>)`` with its
defaults (LOES, 4 layers, mean pooling), fitted and scored per fold.

Usage::

    python3 -m venv --system-site-packages benchmarks/.venv-lmprobe
    benchmarks/.venv-lmprobe/bin/pip install "lmprobe[auto]==0.10.3"
    python benchmarks/bench_lmprobe.py --data rt --arms skloes default auto fast_auto
    python benchmarks/bench_lmprobe.py --data langid --arms skloes default fast_auto
    python benchmarks/bench_lmprobe.py --table      # benchmarks/results/lmprobe.md

Layer numbers are Hugging Face ``hidden_states`` indices (0 = embeddings);
lmprobe's block ``L`` is ``hidden_states[L + 1]``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from _machine import machine, machine_lines  # noqa: E402

HERE = Path(__file__).parent
WORK = HERE / ".cache" / "lmprobe"
RESULTS = HERE / "results" / "lmprobe"
TABLE = HERE / "results" / "lmprobe.md"
VENV_PYTHON = HERE / ".venv-lmprobe" / "bin" / "python"
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
LOADERS = {
    "rt": "load_rotten_tomatoes",
    "langid": "load_chatterbot_langid",
    "bbc": "load_bbc_news",
}
# lmprobe never truncates and caches per-token states: BBC articles are cut to
# 256 SmolLM2 tokens for both tools (skloes then uses max_length=256).
TRUNCATE = {"bbc": 256}
MAX_LENGTH = {"rt": 128, "langid": 128, "bbc": 256}


def _smollm2_folder():
    from skloes.models._loading import resolve_model_path

    return resolve_model_path(SMOLLM2)


def prepare(dataset, n_samples=1000, n_folds=5, seed=0):
    """Texts, labels and folds as JSON files both tools read."""
    from sklearn.model_selection import StratifiedKFold

    import skloes.datasets as ds

    data_file = WORK / f"data_{dataset}{n_samples}.json"
    folds_file = WORK / f"folds_{dataset}{n_samples}_{n_folds}.json"
    if data_file.exists() and folds_file.exists():
        return data_file, folds_file
    bunch = getattr(ds, LOADERS[dataset])(n_samples=n_samples, random_state=seed)
    texts = [str(t) for t in bunch.data]
    if dataset in TRUNCATE:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(_smollm2_folder(), local_files_only=True)
        cut = TRUNCATE[dataset]
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        texts = [
            tok.decode(i[:cut]) if len(i) > cut else t
            for t, i in zip(texts, ids, strict=True)
        ]
    y = np.asarray(bunch.target, dtype=int)
    digest = hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:16]
    skf = StratifiedKFold(n_folds, shuffle=True, random_state=seed)
    folds = [
        {"train": tr.tolist(), "test": te.tolist()}
        for tr, te in skf.split(np.zeros(len(y)), y)
    ]
    WORK.mkdir(parents=True, exist_ok=True)
    data_file.write_text(
        json.dumps(
            {
                "dataset": dataset,
                "texts_sha256_16": digest,
                "texts": texts,
                "y": y.tolist(),
                "target_names": [str(n) for n in bunch.target_names],
                "truncate_tokens": TRUNCATE.get(dataset),
            },
            ensure_ascii=False,
        )
    )
    folds_file.write_text(
        json.dumps(
            {
                "spec": (
                    f"StratifiedKFold({n_folds}, shuffle=True, random_state={seed})"
                ),
                "texts_sha256_16": digest,
                "folds": folds,
            }
        )
    )
    return data_file, folds_file


def run_skloes(dataset, data_file, folds_file, threads):
    """Our arm: a LayerProbeClassifier per fold, one cold cache for the run."""
    import torch

    from skloes.probe import LayerProbeClassifier

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    torch.set_num_threads(threads)
    data = json.loads(data_file.read_text())
    folds = json.loads(folds_file.read_text())["folds"]
    texts, y = data["texts"], np.asarray(data["y"])
    cache = Path(tempfile.mkdtemp(prefix="skloes-bench-cache-"))
    rows, accs = [], []
    try:
        for k, fold in enumerate(folds):
            tr, te = np.asarray(fold["train"]), np.asarray(fold["test"])
            t0, c0 = time.perf_counter(), time.process_time()
            probe = LayerProbeClassifier(
                SMOLLM2, cache=cache, random_state=0, max_length=MAX_LENGTH[dataset]
            )
            probe.fit([texts[i] for i in tr], y[tr])
            acc = float(probe.score([texts[i] for i in te], y[te]))
            accs.append(acc)
            rows.append(
                {
                    "fold": k,
                    "accuracy": acc,
                    "layers_used_hf": probe.selected_layers_.tolist(),
                    "wall_s": round(time.perf_counter() - t0, 2),
                    "cpu_s": round(time.process_time() - c0, 2),
                }
            )
            print(
                f"[skloes] fold {k}: acc={acc:.4f} layers="
                f"{probe.selected_layers_.tolist()} ({rows[-1]['wall_s']} s)",
                flush=True,
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {
        "tool": "skloes",
        "arm": "skloes",
        "dataset": dataset,
        "folds": rows,
        "mean_accuracy": float(np.mean(accs)),
        "std_accuracy": float(np.std(accs)),
        "run_wall_s": round(time.perf_counter() - start_wall, 2),
        "run_cpu_s": round(time.process_time() - start_cpu, 2),
        "torch_threads": threads,
        "loadavg_end": list(os.getloadavg()),
        "machine": machine(),
    }


def run_lmprobe(arm, dataset, data_file, folds_file, threads, python):
    """One lmprobe arm in its own process and environment."""
    out = RESULTS / f"lmprobe_{arm}_{data_file.stem.removeprefix('data_')}.json"
    cmd = [
        str(python),
        str(HERE / "_lmprobe_arm.py"),
        "--arm",
        arm,
        "--data",
        str(data_file),
        "--folds",
        str(folds_file),
        "--out",
        str(out),
        "--model",
        _smollm2_folder(),
        "--threads",
        str(threads),
    ]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    result = json.loads(out.read_text())
    result["wall_with_start_s"] = round(time.perf_counter() - start, 2)
    return result


def table():
    """The side-by-side table of every stored result."""
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    lines = [
        machine_lines(r.get("machine") for r in rows),
        "",
        "| data | tool / arm | accuracy (mean ± sd over 5 folds) | layers (HF) "
        "| wall s | CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["dataset"], r["tool"] != "skloes")):
        layers = sorted({tuple(f["layers_used_hf"]) for f in r["folds"]})
        shown = "; ".join(str(list(t)) for t in layers[:3]) + (
            " ..." if len(layers) > 3 else ""
        )
        lines.append(
            f"| {r['dataset']} | {r['tool']} {r['arm']} | {r['mean_accuracy']:.4f} ± "
            f"{r['std_accuracy']:.4f} | {shown} | {r['run_wall_s']:.0f} | "
            f"{r['run_cpu_s']:.0f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(LOADERS), default="rt")
    parser.add_argument(
        "--arms",
        nargs="+",
        default=["skloes", "default"],
        choices=["skloes", "default", "auto", "fast_auto"],
    )
    parser.add_argument("--n-samples", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lmprobe-python", default=str(VENV_PYTHON))
    parser.add_argument(
        "--table",
        action="store_true",
        help=f"print the stored results and write {TABLE}",
    )
    args = parser.parse_args()
    if args.table:
        text = table()
        header = (
            f"Written {time.strftime('%Y-%m-%d')}; `python benchmarks/bench_lmprobe.py "
            "--table` rebuilds it from benchmarks/results/lmprobe/.\n\n"
        )
        TABLE.write_text(header + text + "\n")
        print(text)
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    data_file, folds_file = prepare(args.data, args.n_samples)
    for arm in args.arms:
        print(f"== {args.data} / {arm} (load {os.getloadavg()[0]:.1f})", flush=True)
        if arm == "skloes":
            result = run_skloes(args.data, data_file, folds_file, args.threads)
            result["n_samples"] = args.n_samples
            out = RESULTS / f"skloes_{data_file.stem.removeprefix('data_')}.json"
            out.write_text(json.dumps(result, indent=1))
        else:
            if not Path(args.lmprobe_python).exists():
                sys.exit(
                    f"no lmprobe environment at {args.lmprobe_python}; see the "
                    "usage in this file's docstring"
                )
            run_lmprobe(
                arm, args.data, data_file, folds_file, args.threads, args.lmprobe_python
            )


if __name__ == "__main__":
    main()
