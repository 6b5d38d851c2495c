"""Measure the constants of the scale cost model, on a GPU (or here, on the CPU).

The cost model of ``doc/user_guide/scaling.rst`` (:ref:`scale_cost_model`)
turns a few constants into hours, workers and storage for a job at scale:

- ``s_tok``: seconds per token of the forward pass through every block, on
  one worker (and per parameter, to scale to another model);
- ``s_write``: seconds per stored byte of a shard (Arrow, Parquet, sha256,
  rename), beyond the forward pass;
- ``bytes_per_value``: bytes on disk per stored number (4 in float32, 2 in
  float16, plus the row id);
- ``r_read``: bytes per second a streaming head reads from a store;
- ``s_gram``: seconds per row per squared feature of the ridge head's Gram.

Run it where the job will run::

    python benchmarks/scale_cost_gpu.py --model HuggingFaceTB/SmolLM2-135M-Instruct \\
        --device cuda --precision bfloat16 --n 5000
    python benchmarks/scale_cost_gpu.py --device cpu --n 2000   # as measured here

It prints one JSON object (the constants, the machine, the load average) and
the projection for 10 million texts of 64 tokens through a 7B model with 33
hidden states of width 4,096, appends the JSON to
``benchmarks/results/scale/cost_constants.jsonl`` and needs nothing but skloes,
its offline models and the benchmark corpus (``bench_scale.py --corpus``).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from _machine import machine

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "scale" / "cost_constants.jsonl"
# The job the projection prices: 10M texts of 64 tokens, a 7B model.
JOB = {
    "texts": 10_000_000,
    "tokens_per_text": 64,
    "params": 7.0e9,
    "hidden_states": 33,
    "width": 4096,
    "chosen": 4,
    "deepest": 26,
}


def _texts(n):
    import pyarrow.parquet as pq

    work = Path(os.environ.get("SKLOES_BENCH_SCALE", HERE / ".cache" / "scale"))
    path = work / "corpus.parquet"  # where bench_scale.py --corpus writes it
    if not path.exists():
        raise SystemExit(
            "build the corpus first: python benchmarks/bench_scale.py --corpus"
        )
    return pq.read_table(path, columns=["text"]).column(0).to_pylist()[:n]


def measure(model, n, device, precision, max_length, batch_size):
    """The constants on this machine for ``model``."""
    from skloes import HiddenStatesTransformer
    from skloes.scale import LayerStore, StreamingRidgeClassifier, extract_to_store

    texts = _texts(n)
    params = dict(
        max_length=max_length,
        device=device,
        precision=precision,
        batch_size=batch_size,
        max_batch_tokens="auto",
    )
    hst = HiddenStatesTransformer(model, **params).fit(texts)
    tokens = sum(
        len(ids)
        for ids in hst.processor_(texts, truncation=True, max_length=hst.max_length_)[
            "input_ids"
        ]
    )
    hst.transform(texts[:64])  # warm: load, kernels
    _sync(device)
    start = time.perf_counter()
    stack = hst.transform(texts)
    _sync(device)
    forward = time.perf_counter() - start
    n_params = sum(p.numel() for p in hst.model_.parameters())
    folder = Path(tempfile.mkdtemp(prefix="skloes-cost-"))
    try:
        start = time.perf_counter()
        store = extract_to_store(
            texts,
            folder / "s",
            model=model,
            verbose=0,
            shard_size=max(64, n // 4),
            extractor_params={"max_batch_tokens": params["max_batch_tokens"]},
            **{k: v for k, v in params.items() if k != "max_batch_tokens"},
        )
        stored = time.perf_counter() - start
        store = LayerStore(store.path)
        start = time.perf_counter()
        read = sum(b.stack.nbytes for b in store.iter_batches(4096))
        read_s = time.perf_counter() - start
        y = np.arange(n) % 2
        k = min(4, len(store.layers))
        view = store.select(layers=store.layers[-k:])
        start = time.perf_counter()
        StreamingRidgeClassifier(batch_size=4096).fit(view, y)
        head_s = time.perf_counter() - start
        p = k * store.dim
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    values = int(np.prod(stack.shape))
    return {
        "model": str(model),
        "params": int(n_params),
        "hidden_states": int(stack.shape[0]),
        "width": int(stack.shape[2]),
        "texts": n,
        "tokens": int(tokens),
        "s_tok": forward / tokens,
        "s_tok_per_param": forward / tokens / n_params,
        "s_write": max(stored - forward, 0.0) / store.nbytes(),
        "store_overhead_of_forward": stored / forward - 1.0,
        "bytes_per_value": store.nbytes() / values,
        "r_read": read / read_s,
        "s_gram": max(head_s - n * p * 4 / (read / read_s), 0.0) / (n * p * p),
        "head_s": head_s,
        "head_features": p,
        "forward_s": forward,
        "store_s": stored,
    }


def _sync(device):
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def project(c, job=JOB, workers=1, dtype_bytes=2):
    """Hours, storage and memory of ``job`` from the constants ``c``."""
    tokens = job["texts"] * job["tokens_per_text"]
    s_tok = c["s_tok_per_param"] * job["params"]  # dense: cost ~ parameters
    full_h = tokens * s_tok / 3600 / workers
    fraction = (job["deepest"] + 1) / job["hidden_states"]
    row_all = job["hidden_states"] * job["width"] * dtype_bytes + 8
    row_chosen = job["chosen"] * job["width"] * dtype_bytes + 8
    p = job["chosen"] * job["width"]
    return {
        "workers": workers,
        "full_pass_hours": full_h,
        "chosen_pass_hours": full_h * fraction,
        "store_all_layers_TB": job["texts"] * row_all / 1e12,
        "store_chosen_TB": job["texts"] * row_chosen / 1e12,
        "write_hours_chosen": job["texts"] * row_chosen * c["s_write"] / 3600 / workers,
        "ridge_head_hours": (
            job["texts"] * row_chosen / c["r_read"] + job["texts"] * p * p * c["s_gram"]
        )
        / 3600,
        "ridge_gram_GB": 8 * p * p / 1e9,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3]
    constants = measure(
        args.model,
        args.n,
        args.device,
        args.precision,
        args.max_length,
        args.batch_size,
    )
    import torch

    record = {
        **constants,
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "precision": args.precision,
        "machine": machine(),
        "threads": torch.get_num_threads(),
        "load_before": load,
        "load_after": Path("/proc/loadavg").read_text().split()[:3],
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "projection_10M_7B": project(constants, workers=args.workers),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
