"""The report's fit time under each fusion, on the main job's stack (issue 36).

``LayerReport`` with its defaults (as ``skloes probe`` fits it) on the
SmolLM2 stack of 500 Rotten Tomatoes texts (``benchmarks/_stacks.py``), in
three arms interleaved in one process, pinned to one thread:

- ``concatenate``: ``fusion="concatenate"``, the report as it was before
  0.3's fusion (one probe on each method's concatenated layers);
- ``average``: ``fusion="average"``, the per-layer table's held-out outputs
  reused to score every averaged method (the cheap signal);
- ``average_refit``: the same fusion, every method's per-layer probes refitted
  (the numbers are identical; the difference is the time the reuse saves);
- ``stack``: ``fusion="stack"``.

Prints and writes ``benchmarks/results/fusion/report_time.json``: each arm's
seconds per round, their median, and the ratios of the medians to
``concatenate``, with ``/proc/loadavg`` before and after.

    OMP_NUM_THREADS=1 python benchmarks/bench_report_time.py --rounds 3
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _stacks  # noqa: E402

OUT = Path(__file__).parent / "results" / "fusion" / "report_time.json"
ARMS = ("concatenate", "average", "average_refit", "stack")


def _load():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def fit_seconds(arm, stack, y):
    from skloes.report import LayerReport

    fusion = "average" if arm == "average_refit" else arm
    report = LayerReport(fusion=fusion)
    report._reuse_layer_outputs = arm != "average_refit"
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.fit(stack, y)
    return time.perf_counter() - start, report.recommendation_["method"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--set", default="rotten_tomatoes")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    args = parser.parse_args(argv)
    stack, y, _ = _stacks.stack(args.model, args.set, args.n, 64)
    record = {
        "model": args.model,
        "set": args.set,
        "n": int(y.size),
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "load_before": _load(),
        "seconds": {arm: [] for arm in args.arms},
        "recommended": {},
    }
    for r in range(args.rounds):
        order = args.arms[r % len(args.arms) :] + args.arms[: r % len(args.arms)]
        for arm in order:
            sec, method = fit_seconds(arm, stack, y)
            record["seconds"][arm].append(sec)
            record["recommended"][arm] = method
            print(r, arm, f"{sec:.1f} s", method, flush=True)
    record["load_after"] = _load()
    med = {arm: float(np.median(v)) for arm, v in record["seconds"].items()}
    record["median"] = med
    if "concatenate" in med:
        record["ratio_to_concatenate"] = {
            arm: med[arm] / med["concatenate"] for arm in med
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
