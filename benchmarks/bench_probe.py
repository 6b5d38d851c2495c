"""Predict time of a pruned probe against the full pipeline, and saved sizes.

A ``LayerProbeClassifier`` is fitted on Rotten Tomatoes texts; then, in one
process with threads pinned, its pruned pipeline (the model run through the
deepest selected block, the selected layers pooled) and the equivalent full
pipeline (every block, every layer pooled, the selector's ``transform``)
predict the same held-out texts, alternately ``--repeats`` times. The ratio
pruned/full is compared with its target, ``(deepest selected block + 1) /
(number of blocks + 1) + 0.05``; predictions must agree (probabilities to
1e-6). The saved probe's size (no weights) is reported too.

Usage::

    python benchmarks/bench_probe.py --model minilm --fit 600 --predict 1000
    python benchmarks/bench_probe.py --model smollm2 --fit 600 --predict 1000
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from _machine import machine, machine_line  # noqa: E402

MODELS = {"minilm": None, "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct"}
RESULTS = Path(__file__).parent / "results" / "probe.md"


def _data(n_fit, n_predict, seed):
    from skloes.datasets import load_rotten_tomatoes

    X, y = load_rotten_tomatoes(
        n_samples=n_fit + n_predict, random_state=seed, return_X_y=True
    )
    return list(X[:n_fit]), np.asarray(y[:n_fit]), list(X[n_fit:])


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def run(model_key, n_fit, n_predict, repeats, max_length, seed):
    from sklearn.base import clone
    from sklearn.pipeline import Pipeline

    from skloes.probe import LayerProbeClassifier, save_probe

    X, y, new = _data(n_fit, n_predict, seed)
    probe = LayerProbeClassifier(
        MODELS[model_key], max_length=max_length, random_state=seed
    )
    t_fit, _ = _timed(lambda: probe.fit(X, y))
    pruned = probe.pipeline_
    full_extractor = clone(pruned[0]).set_params(layers="all").fit(new[:2])
    head = pruned.steps[-1][1]
    full = Pipeline(
        [("extractor", full_extractor), ("fusion", probe.selector_), ("head", head)]
    )
    full[0].model_, pruned[0].model_  # noqa: B018 - loaded outside the timings
    times = {"pruned": [], "full": []}
    probas = {}
    for _ in range(repeats):
        for name, pipe in (("full", full), ("pruned", pruned)):
            seconds, proba = _timed(lambda pipe=pipe: pipe.predict_proba(new))
            times[name].append(seconds)
            probas[name] = proba
    deepest = int(probe.selected_layers_.max())
    n_blocks = probe.n_model_layers_ - 1
    ratios = np.array(times["pruned"]) / np.array(times["full"])
    target = (deepest + 1) / (n_blocks + 1) + 0.05
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_probe(probe, Path(tmp) / "probe")
        size = sum(f.stat().st_size for f in folder.iterdir())
    return {
        "model": model_key,
        "fit_s": t_fit,
        "layers": probe.selected_layers_.tolist(),
        "deepest": deepest,
        "n_blocks": n_blocks,
        "full_s": times["full"],
        "pruned_s": times["pruned"],
        "ratio_median": float(np.median(ratios)),
        "ratio_min": float(ratios.min()),
        "ratio_max": float(ratios.max()),
        "target": target,
        "max_proba_diff": float(np.abs(probas["full"] - probas["pruned"]).max()),
        "saved_bytes": size,
        "n_predict": n_predict,
    }


def report(result):
    r = result
    met = "met" if r["ratio_median"] <= r["target"] else "**missed**"
    lines = [
        f"- {r['model']}: layers {r['layers']} (deepest block {r['deepest']} of "
        f"{r['n_blocks']}); predict {r['n_predict']} texts: full "
        f"{np.median(r['full_s']):.1f} s, pruned {np.median(r['pruned_s']):.1f} s; "
        f"pruned/full {r['ratio_median']:.3f} [{r['ratio_min']:.3f}, "
        f"{r['ratio_max']:.3f}], target <= {r['target']:.3f}: {met}; max |Δproba| "
        f"{r['max_proba_diff']:.1e}; saved probe {r['saved_bytes'] / 1e3:.0f} kB; "
        f"fit {r['fit_s']:.1f} s",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm")
    parser.add_argument("--fit", type=int, default=600)
    parser.add_argument("--predict", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--write", action="store_true", help=f"append the result to {RESULTS}"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    result = run(
        args.model, args.fit, args.predict, args.repeats, args.max_length, args.seed
    )
    line = report(result)
    print(line)
    if args.write:
        header = (
            f"\n### {time.strftime('%Y-%m-%d')}, {args.threads} threads, load "
            f"{os.getloadavg()[0]:.1f}\n\n{machine_line(machine())}\n\n"
        )
        with open(RESULTS, "a", encoding="utf-8") as handle:
            handle.write(header + line + "\n")


if __name__ == "__main__":
    main()
