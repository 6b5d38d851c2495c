"""Benchmark: wall time of the README's main job, its MiniLM variant and set-up.

Each arm runs in a fresh process, as a user runs it, with a fresh output
folder and no hidden-states cache (the command line keeps none):

- ``conversion``: ``skloes models --prepare`` into an empty ``SKLOES_HOME``,
  the one-off step of ``scripts/setup.sh`` that converts SmolLM2's GGUF
  weights to safetensors (and prepares the other installed bundles);
- ``smollm2``: the main job, ``skloes probe --force --save DIR/probe`` with
  its defaults (SmolLM2, 500 Rotten Tomatoes texts, nested selection), as
  ``scripts/main.sh`` runs it after the set-up;
- ``minilm``: the README's MiniLM job, ``--model
  sentence-transformers/all-MiniLM-L6-v2 --max-samples 1000``.

``scripts/main.sh`` itself is not timed: its set-up step reinstalls the
package (``pip install -e .``), which a benchmark should not do to the
environment it runs in. Seconds are wall time; the load average at the start
and end of each arm is reported, since the machine may be shared.

Run ``python benchmarks/bench_main_job.py [--arms conversion smollm2 minilm]
[--max-samples N] [--output FILE]``; writes ``benchmarks/results/main_job.md``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from _machine import machine, machine_line

RESULTS = Path(__file__).resolve().parent / "results" / "main_job.md"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
README = {  # what the README says of each arm, for the table
    "conversion": "about 40 s",
    "smollm2": "about 70 s on two cores",
    "minilm": "about 30 s",
}


def command(arm, out, max_samples=None):
    """The argv of an arm (``out``: its fresh folder)."""
    skloes = [sys.executable, "-m", "skloes"]
    if arm == "conversion":
        return [*skloes, "models", "--prepare"]
    probe = [*skloes, "probe", "--out", str(out), "--force"]
    probe += ["--save", str(Path(out) / "probe")]
    if arm == "minilm":
        probe += ["--model", MINILM, "--max-samples", str(max_samples or 1000)]
    elif max_samples:
        probe += ["--max-samples", str(max_samples)]
    return probe


def run_arm(arm, max_samples=None):
    """Wall seconds and load averages of one arm, in a fresh process."""
    with tempfile.TemporaryDirectory(prefix="skloes-main-job-") as folder:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        if arm == "conversion":
            env["SKLOES_HOME"] = str(Path(folder) / "home")
        argv = command(arm, Path(folder) / "report", max_samples)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
    return {
        "arm": arm,
        "argv": " ".join(argv[1:]),
        "seconds": seconds,
        "load": (load, os.getloadavg()[0]),
    }


def markdown(rows):
    lines = [
        "# The main job: wall time",
        "",
        f"Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by "
        "`benchmarks/bench_main_job.py` (part `main_job` of "
        "`benchmarks/reproduce.py`); each arm a fresh process, cold (no cache).",
        "",
        machine_line(machine()),
        "",
        "| arm | command | wall s | README | load average (start, end) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} | `{r['argv']}` | {r['seconds']:.1f} | "
            f"{README[r['arm']]} | {r['load'][0]:.1f}, {r['load'][1]:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(README), choices=list(README))
    parser.add_argument(
        "--max-samples", type=int, default=None, help="texts (default: the job's)"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    for arm in args.arms:
        rows.append(run_arm(arm, args.max_samples))
        print(f"{arm}: {rows[-1]['seconds']:.1f} s", flush=True)
    text = markdown(rows)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
