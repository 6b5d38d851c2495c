"""Reproduce every headline number of the README and of doc/benchmarks.rst.

One command, from raw texts: each part runs one benchmark script of this
folder, which extracts the hidden states it needs through
:class:`skloes.HiddenStatesTransformer` with a disk cache under
``benchmarks/.cache/`` (``benchmarks/_features.py``; reruns read it), scores
them with the library's public estimators and defaults, and writes the
tables the documentation quotes or includes::

    python benchmarks/reproduce.py                  # every part, in order
    python benchmarks/reproduce.py --only headline main_job
    python benchmarks/reproduce.py --quick          # a few hundred texts
    python benchmarks/reproduce.py --list           # parts, outputs, figures

``--quick`` runs the parts that have a small mode on a few hundred texts and
writes under ``benchmarks/.cache/quick/`` instead of ``benchmarks/results/``
(a check of the pipeline, in minutes; its numbers mean little). Without
``--quick`` the results files are rewritten. ``--dry-run`` prints the
commands. Nothing here needs a GPU or the network; each part's figures, its
output files and its time on the 2-core development machine are listed by
``--list`` and in doc/benchmarks.rst.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUICK = HERE / ".cache" / "quick"


@dataclass(frozen=True)
class Part:
    """One reproducible piece: its commands (full and quick), what it writes
    and which quoted figures it produces."""

    name: str
    figures: str
    writes: str
    duration: str
    full: list = field(default_factory=list)
    quick: list = field(default_factory=list)


def _q(name):
    return str(QUICK / name)


PARTS = [
    Part(
        "headline",
        "README headline paragraph: SmolLM2 LOES / last / best single / greedy "
        "/ all layers, MiniLM LOES / last (3 sets x 2,000 texts, 5 folds); "
        "the Gemma 3 and Qwen2 rows (3 sets x 1,000 texts)",
        "benchmarks/results/headline.md, headline.json",
        "about 2 h on 2 shared cores with cold caches (SmolLM2 extraction about "
        "40 min of it), about 1 h warm; Gemma 3 about 1 h more, Qwen2 more",
        full=[
            ["bench_headline.py", "--models", "smollm2", "minilm"],
            ["bench_headline.py", "--models", "gemma3", "--n-texts", "1000"],
            ["bench_headline.py", "--models", "qwen2", "--n-texts", "1000"],
        ],
        quick=[
            ["bench_headline.py", "--n-texts", "200", "--output", _q("headline.md")]
        ],
    ),
    Part(
        "main_job",
        "README: the main job's wall time (SmolLM2, 500 texts), the MiniLM "
        "job's, the one-off GGUF conversion",
        "benchmarks/results/main_job.md",
        "about 5 min",
        full=[["bench_main_job.py"]],
        quick=[
            [
                "bench_main_job.py",
                "--arms",
                "minilm",
                "--max-samples",
                "100",
                "--output",
                _q("main_job.md"),
            ]
        ],
    ),
    Part(
        "selection",
        "doc/benchmarks_selection.md: the SmolLM2 and MiniLM selection tables "
        "(every baseline, LOES variants and budgets) and the MiniLM timing "
        "ratios",
        "benchmarks/results/selection.md (+ selection.smollm2.*.json)",
        "about 1 h (MiniLM) + 2-3 h (SmolLM2) on 2 shared cores, warm caches",
        full=[
            ["bench_selection.py"],
            ["bench_selection.py", "--model", "smollm2"],
        ],
        quick=[
            [
                "bench_selection.py",
                "--n-texts",
                "200",
                "--datasets",
                "rotten_tomatoes",
                "--max-samples",
                "100",
                "--cv-timing-rows",
                "160",
                "--output",
                _q("selection.md"),
            ]
        ],
    ),
    Part(
        "stability",
        "doc/benchmarks.rst, selection stability per data set: accuracy, "
        "stability and fit time of every selector, 6 SmolLM2 and 4 MiniLM sets",
        "benchmarks/results/selection_stability.md, selection_stability.json",
        "about 3 h on 2 shared cores with cold caches",
        full=[["bench_stability.py", "--force"]],
        quick=[
            [
                "bench_stability.py",
                "--models",
                "minilm",
                "--sets",
                "trec6",
                "--n-texts",
                "200",
                "--output",
                str(QUICK),
            ]
        ],
    ),
    Part(
        "selection_speed",
        "doc/user_guide selection speed: floor, budget-search and "
        "LOESSelectorCV ratios (MiniLM, SmolLM2)",
        "appends to benchmarks/results/selection_speed_runs.md (summarised "
        "by hand in selection_speed.md)",
        "about 30 min",
        full=[
            ["bench_selection.py", "--timing", "--model", "minilm"],
            [
                "bench_selection.py",
                "--timing",
                "--model",
                "smollm2",
                "--repeats",
                "2",
                "--search-rows",
                "600",
                "--timing-parts",
                "floor",
                "search",
            ],
        ],
    ),
    Part(
        "extraction",
        "extraction speed and memory ratios (HiddenStatesTransformer vs a bare "
        "loop, cache, truncated forward)",
        "benchmarks/results/extraction.md",
        "about 20 min",
        full=[
            [
                "bench_extraction.py",
                "--n-samples",
                "1000",
                "--repeats",
                "3",
                "--smollm2-samples",
                "200",
                "--threads",
                "1",
            ]
        ],
        quick=[
            [
                "bench_extraction.py",
                "--threads",
                "1",
                "--repeats",
                "1",
                "--n-samples",
                "64",
                "--no-write",
            ]
        ],
    ),
    Part(
        "metrics",
        "metric cost per layer against one probe fit; token-path memory",
        "benchmarks/results/metrics.md",
        "about 5 min",
        full=[["bench_metrics.py"]],
        quick=[["bench_metrics.py", "--quick"]],
    ),
    Part(
        "georeg",
        "doc/benchmarks_georeg.md: GeoReg head against LogisticRegressionCV, "
        "collapse regimes, fine-tuning cost",
        "benchmarks/results/georeg/*.jsonl, georeg.md",
        "several hours (5 seeds, fine-tuning on CPU)",
        full=[
            [
                "bench_georeg.py",
                "defaults",
                "head",
                "finetune",
                "--out",
                "benchmarks/results/georeg",
            ]
        ],
    ),
    Part(
        "precision",
        "doc/benchmarks_precision.md: GEMM peak, texts/s per precision, "
        "feature quality in int8 and bfloat16",
        "benchmarks/results/precision/*.json, precision.md, "
        "doc/benchmarks_precision.md",
        "about 1 h (run it pinned to one core for per-core figures)",
        full=[
            ["bench_precision.py", "peak"],
            ["bench_precision.py", "speed", "--model", "minilm", "--n", "1000"],
            ["bench_precision.py", "speed", "--model", "smollm2", "--n", "200"],
            ["bench_precision.py", "quality", "--model", "minilm", "--n", "500"],
            ["bench_precision.py", "quality", "--model", "smollm2", "--n", "300"],
            ["bench_precision.py", "--table"],
        ],
    ),
    Part(
        "probe",
        "pruned against full predict time of a fitted probe; saved size",
        "appends to benchmarks/results/probe.md",
        "about 15 min",
        full=[
            ["bench_probe.py", "--model", "minilm", "--write"],
            ["bench_probe.py", "--model", "smollm2", "--write"],
        ],
    ),
    Part(
        "baselines",
        "Gram speed-up of the probe-scored baselines",
        "benchmarks/results/bench_baselines.md",
        "about 2 min",
        full=[["bench_baselines.py"]],
    ),
    Part(
        "budget",
        "user guide, selection: LOESSelectorCV's per-budget curves and rules "
        "against the fixed K=4 and the best single layer (issue 27's table)",
        "benchmarks/results/budget/*.json; budget.md quotes bench_budget.py "
        "--summarize of them (run by hand)",
        "about 2 h on 2 shared cores (4 stacks, 5 outer folds)",
        full=[
            ["bench_budget.py", "--models", "smollm2", "--sets", "rotten_tomatoes"]
            + ["--n", "500"],
            ["bench_budget.py", "--models", "minilm", "--sets", "rotten_tomatoes"]
            + ["vader_amazon3", "chatterbot_topics"],
        ],
    ),
    Part(
        "fusion",
        "user guide, selection: the fusions of the chosen layers (concatenated, "
        "averaged, stacked, auto) per stack, with paired standard errors",
        "benchmarks/results/fusion/*.json, fusion.md and the selection guide's "
        "table (--summarize)",
        "about 2 h on 2 cores (11 stacks, repeated 5-fold CV)",
        full=[
            ["bench_fusion.py", "--models", "minilm", "--repeats", "3"],
            ["bench_fusion.py", "--models", "mpnet", "smollm2", "--repeats", "2"]
            + ["--sets", "rotten_tomatoes", "trec6", "vader_amazon3"],
            ["bench_fusion.py", "--summarize"],
        ],
    ),
    Part(
        "auto_cost",
        "user guide, selection: fusion='auto' by leave-one-out scores, its "
        "accuracy against the inner-CV chooser and its fit time against "
        "concatenation (the 14 fusion stacks, 3 MiniLM stacks of 2,000 texts)",
        "benchmarks/results/auto_cost.json, auto_cost.md",
        "about 15 min once the stacks are cached",
        full=[["bench_auto_cost.py", "--part", "accuracy", "cost"]],
    ),
    Part(
        "store_verify",
        "user guide, scaling: LayerStore.verify() and reads of a 100,000-row "
        "store against main's",
        "benchmarks/results/store_verify.md",
        "about 10 min",
        full=[["bench_store_verify.py"]],
    ),
    Part(
        "scale",
        "user guide, scaling: the layer store's throughput per engine, memory "
        "against N, kill and resume, chosen layers only, the streaming heads",
        "benchmarks/results/scale/runs.jsonl, scale.md (--summarize)",
        "about 4 h on 2 cores (100,000 texts through MiniLM several times)",
        full=[
            ["bench_scale.py", "--corpus"],
            ["bench_scale.py", "--plan"],
            ["bench_scale.py", "--summarize"],
        ],
    ),
    Part(
        "serve",
        "user guide, serving: exported int8/float32 speed against torch, "
        "quality, cold start, every fusion's default export (MiniLM) and "
        "install sizes (MiniLM, SmolLM2, Gemma 3, Qwen2)",
        "benchmarks/results/serve/*.json, serve.md (the table by --table)",
        "about 2 h",
        full=[
            ["bench_serve.py", "speed", "--model", "minilm"],
            ["bench_serve.py", "speed", "--model", "smollm2", "--n", "96"],
            ["bench_serve.py", "speed", "--model", "gemma3", "--n", "96"],
            ["bench_serve.py", "speed", "--model", "qwen2", "--n", "96"],
            ["bench_serve.py", "quality", "--model", "minilm", "--n", "1000"],
            ["bench_serve.py", "quality", "--model", "smollm2", "--n", "1000"],
            ["bench_serve.py", "quality", "--model", "gemma3", "--n", "1000"],
            ["bench_serve.py", "quality", "--model", "qwen2", "--n", "1000"],
            ["bench_serve.py", "coldstart", "--model", "smollm2"],
            ["bench_serve.py", "coldstart", "--model", "gemma3", "--baseline", "none"],
            ["bench_serve.py", "fusions", "--model", "minilm", "--repeats", "5"],
            ["bench_serve.py", "sizes", "--table"],
        ],
    ),
    Part(
        "lmprobe",
        "skloes against lmprobe (needs benchmarks/.venv-lmprobe, see bench_lmprobe.py)",
        "benchmarks/results/lmprobe/*.json, lmprobe.md",
        "about 1 h",
        full=[
            ["bench_lmprobe.py", "--data", "rt", "--arms", "skloes", "default"]
            + ["auto", "fast_auto"],
            ["bench_lmprobe.py", "--data", "langid", "--arms", "skloes", "default"]
            + ["fast_auto"],
            ["bench_lmprobe.py", "--table"],
        ],
    ),
]


def _environment():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    root = str(HERE.parent)  # this checkout's skloes, whatever is installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def run_part(part, quick, dry_run):
    """Run a part's commands in order; returns its wall seconds (None when
    the part has no quick mode)."""
    commands = part.quick if quick else part.full
    if not commands:
        print(f"[{part.name}] no quick mode; skipped", flush=True)
        return None
    if quick:
        QUICK.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for argv in commands:
        full = [sys.executable, str(HERE / argv[0]), *argv[1:]]
        print(f"[{part.name}] {' '.join(full[1:])}", flush=True)
        if not dry_run:
            subprocess.run(full, cwd=HERE.parent, env=_environment(), check=True)
    return time.perf_counter() - start


def main(argv=None):
    names = [p.name for p in PARTS]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=names, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    parts = [p for p in PARTS if args.only is None or p.name in args.only]
    if args.list:
        for p in parts:
            print(f"{p.name}\n  figures: {p.figures}\n  writes:  {p.writes}")
            print(f"  time:    {p.duration}\n  quick:   {'yes' if p.quick else 'no'}")
        return
    if not args.dry_run:  # the scripts record it too; this names it in the log
        from _machine import machine, machine_line

        print(machine_line(machine()), flush=True)
    for part in parts:
        seconds = run_part(part, args.quick, args.dry_run)
        if seconds is not None and not args.dry_run:
            print(f"[{part.name}] done in {seconds / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
