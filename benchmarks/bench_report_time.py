"""The report's fit time under each fusion, against main's (issue 36).

``LayerReport`` with its defaults but ``fusion`` (as ``skloes probe`` fits
it) on the SmolLM2 stack of 500 Rotten Tomatoes texts
(``benchmarks/_stacks.py``), one fit per arm and round, each in a fresh
process pinned to one thread (``OMP_NUM_THREADS=1`` and friends), the arms
interleaved round by round (the order rotates) so that a change of the
machine's load falls on every arm alike:

- ``main``: the library of the branch ``--base`` (default ``main``),
  exported with ``git archive`` into a temporary folder: today's report;
- ``concatenate``, ``average``, ``stack``, ``auto``: this checkout's report
  with that ``fusion`` (``auto`` is the default).

(The ``average_refit`` and ``auto_refit`` arms of the recorded results timed
the report without reusing the per-layer table's fits; that switch was a
private test hook and is gone since issue 57, so the arms are too.)

Writes ``benchmarks/results/fusion/report_time.json`` (each arm's seconds per
round, the median, the ratio of each median to ``main``'s, the spread, the
recommendation and ``/proc/loadavg`` before and after every fit) and prints a
markdown table.

    python benchmarks/bench_report_time.py --rounds 3
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
import warnings
from pathlib import Path

import numpy as np
from _machine import machine, machine_line

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "results" / "fusion" / "report_time.json"
ARMS = (
    "main",
    "concatenate",
    "average",
    "auto",
    "stack",
)
THREADS = {
    k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
}


def _load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def one_fit(arm, model, name, n):
    """Fit one report in this process; print a JSON line."""
    sys.path.insert(0, str(HERE))
    import _stacks

    from skloes.report import LayerReport

    stack, y, _ = _stacks.stack(model, name, n, 64)
    params = {} if arm == "main" else {"fusion": arm}
    report = LayerReport(**params)
    load = _load()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.fit(stack, y)
    seconds = time.perf_counter() - start
    record = {
        "arm": arm,
        "seconds": seconds,
        "recommended": report.recommendation_["method"],
        "fusion_counts": getattr(report, "fusion_", None),
        "scores": {e["method"]: e["score"] for e in report.summary_},
        "load_before": load,
        "load_after": _load(),
    }
    print(json.dumps(record))


def _library(arm, base_dir):
    return base_dir if arm == "main" else str(ROOT)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--set", default="rotten_tomatoes")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--base", default="main", help="git ref of the 'main' arm")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.one:
        one_fit(args.one, args.model, args.set, args.n)
        return
    record = {
        "model": args.model,
        "set": args.set,
        "n": args.n,
        "threads": 1,
        "base": args.base,
        "machine": machine(),
        "fits": [],
    }
    with tempfile.TemporaryDirectory() as base_dir:
        if "main" in args.arms:
            archive = subprocess.run(
                ["git", "archive", args.base],
                cwd=ROOT,
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", base_dir], input=archive, check=True)
        for r in range(args.rounds):
            k = r % len(args.arms)
            for arm in args.arms[k:] + args.arms[:k]:
                env = {**os.environ, **THREADS, "PYTHONPATH": _library(arm, base_dir)}
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--one",
                        arm,
                        "--model",
                        args.model,
                        "--set",
                        args.set,
                        "--n",
                        str(args.n),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                fit = {"round": r, **json.loads(out.strip().splitlines()[-1])}
                record["fits"].append(fit)
                print(
                    r,
                    arm,
                    f"{fit['seconds']:.1f} s",
                    fit["recommended"],
                    fit["load_before"],
                    flush=True,
                )
                args.output.parent.mkdir(parents=True, exist_ok=True)
                args.output.write_text(json.dumps(record, indent=1))
    print(table(record))


def table(record):
    """Markdown: each arm's median seconds, range, ratio to main's median."""
    by, rounds = {}, {}
    for fit in record["fits"]:
        by.setdefault(fit["arm"], []).append(fit["seconds"])
        rounds.setdefault(fit["round"], {})[fit["arm"]] = fit["seconds"]
    base = np.median(by["main"]) if "main" in by else np.nan
    lines = [
        machine_line(record.get("machine")),
        "",
        "| arm | rounds | median s | min - max s | median / main's | "
        "per-round ratio to main's (min - max) | recommended |",
        "|---|---|---|---|---|---|---|",
    ]
    last = {fit["arm"]: fit["recommended"] for fit in record["fits"]}
    for arm, secs in by.items():
        ratios = [
            r[arm] / r["main"] for r in rounds.values() if arm in r and "main" in r
        ]
        spread = f"{min(ratios):.2f} - {max(ratios):.2f}" if ratios else "-"
        lines.append(
            f"| {arm} | {len(secs)} | {np.median(secs):.1f} | {min(secs):.1f} - "
            f"{max(secs):.1f} | {np.median(secs) / base:.2f} | {spread} | "
            f"{last[arm]} |"
        )
    loads = [fit["load_before"] for fit in record["fits"]]
    lines += ["", f"load averages before the fits: {loads[0]} ... {loads[-1]}"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
