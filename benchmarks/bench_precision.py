"""Benchmark the compute ``precision`` of HiddenStatesTransformer.

Three parts, each writing a JSON file under ``benchmarks/results/precision/``;
``--table`` turns them into ``benchmarks/results/precision.md``:

``peak``
    The machine's GEMM throughput per precision: ``torch.mm`` in float32 and
    bfloat16 and ``torch._int_mm`` in int8, on the linear-layer shapes of
    MiniLM and SmolLM2 with 2,048 rows (tokens), median over ``--repeats``.
``speed``
    Texts/s of ``transform`` on Rotten Tomatoes texts (``max_length=64``), the
    arms sharing one process and running in rotated order ``--repeats``
    times: float32, the library's ``"int8"`` and ``"bfloat16"``, and the
    candidate engines they were chosen against (int8 with the feed-forward
    output projection kept in float32; bfloat16 linear layers with float32
    states between them).
    Achieved GFLOP/s counts the linear layers only: 2 x (multiply-adds per
    token) x padded tokens / seconds (attention's score products are left
    out, a few percent at these lengths).
``quality``
    On Rotten Tomatoes, BBC News and lang-ID, ``--n`` texts: per layer the
    cosine between float32 and reduced-precision pooled vectors (mean over
    texts), the 5-fold accuracy of a ridge probe (:class:`RidgeProbeClassifier`)
    and its difference to float32, and whether the default
    :class:`LOESSelector` picks the same layers in each fold.

Usage::

    python benchmarks/bench_precision.py peak
    python benchmarks/bench_precision.py speed --model minilm --n 1000
    python benchmarks/bench_precision.py quality --model smollm2 --n 500
    python benchmarks/bench_precision.py --table

Run it pinned to one core with one thread (``taskset -c 0`` and
``OMP_NUM_THREADS=1``) for per-core figures.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from _machine import machine as cpu_record  # noqa: E402
from _machine import machine_line, machine_lines  # noqa: E402

RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "precision"
MODELS = {"minilm": None, "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct"}
# Feed-forward output projections: BERT's `layer.N.output.dense`, Llama's down_proj.
FFN_OUT = r"(layer\.\d+\.output\.dense|mlp\.down_proj)$"
DATASETS = {
    "rt": ("load_rotten_tomatoes", 64),
    "bbc": ("load_bbc_news", 128),
    "langid": ("load_chatterbot_langid", 64),
}
TARGETS = {"speedup": 2.5, "acc_mean": 0.5, "acc_worst": 1.5, "same_picks": 4}


def load(dataset, n):
    from skloes import datasets

    loader, max_length = DATASETS[dataset]
    X, y = getattr(datasets, loader)(n_samples=n, random_state=0, return_X_y=True)
    return list(X), np.asarray(y), max_length


def fitted(model, X, max_length, precision="float32", cache=None):
    from skloes import HiddenStatesTransformer

    hst = HiddenStatesTransformer(
        MODELS[model],
        max_length=max_length,
        device="cpu",
        precision=precision,
        cache=cache,
    )
    return hst.fit(X[:1])


def machine():
    import torch

    load1 = os.getloadavg()[0]
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **cpu_record(),
        "threads": torch.get_num_threads(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "loadavg": round(load1, 2),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def save(name, payload):
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(payload, indent=1))
    print(f"wrote {OUT / name}.json", flush=True)


# ---------------------------------------------------------------- peak
def peak(args):
    import torch

    shapes = [(2048, 384, 1536), (2048, 576, 1536), (2048, 1536, 576)]
    arms = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        ai = torch.randint(-127, 127, (m, k), dtype=torch.int8)
        bi = torch.randint(-127, 127, (k, n), dtype=torch.int8)
        key = f"{m}x{k}x{n}"
        arms[("float32", key)] = (lambda a=a, b=b: torch.mm(a, b), 2 * m * n * k)
        a16, b16 = a.bfloat16(), b.bfloat16()
        arms[("bfloat16", key)] = (lambda a=a16, b=b16: torch.mm(a, b), 2 * m * n * k)
        arms[("int8", key)] = (lambda a=ai, b=bi: torch._int_mm(a, b), 2 * m * n * k)
    rates = {arm: [] for arm in arms}
    for _ in range(args.repeats):
        for arm, (fn, flops) in arms.items():
            fn()
            count, start = 0, time.perf_counter()
            while time.perf_counter() - start < 0.3:
                fn()
                count += 1
            rates[arm].append(flops * count / (time.perf_counter() - start) / 1e9)
    out = {}
    for (precision, key), values in rates.items():
        out.setdefault(precision, {})[key] = {
            "median": statistics.median(values),
            "max": max(values),
        }
    best = {p: max(v["max"] for v in shapes_.values()) for p, shapes_ in out.items()}
    for p in out:
        print(
            f"{p:9s} best {best[p]:7.1f} GFLOP/s  "
            + "  ".join(f"{k}: {v['median']:.1f}" for k, v in out[p].items())
        )
    save(
        "peak",
        {"machine": machine(), "repeats": args.repeats, "shapes": out, "peak": best},
    )


# ---------------------------------------------------------------- speed
def linear_macs(model):
    import torch

    return sum(
        m.in_features * m.out_features
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "pooler" not in name
    )


def padded_tokens(hst, X):
    from skloes.models._inputs import tokenize_texts

    encoded = tokenize_texts(hst.processor_, X, hst.max_length)
    lengths = np.array([len(row) for row in encoded["input_ids"]])
    return int(sum(len(b) * lengths[b].max() for b in hst._batches(X, encoded)))


def speed_arms(model, X, max_length):
    """name -> (fitted HST with its model loaded, preparation seconds)."""
    from skloes.models._forward import find_blocks
    from skloes.models._precision import Bf16Linear, Int8Linear, replace_linears

    arms = {}
    for precision in ("float32", "int8", "bfloat16"):
        hst = fitted(model, X, max_length, precision)
        start = time.perf_counter()
        hst._load()
        arms[precision] = [hst, time.perf_counter() - start]
    base = arms["float32"][0]

    def int8_ffn_float(model):
        replace_linears(model, Int8Linear, keep=FFN_OUT)
        return model

    def bf16_linears(model):
        replace_linears(model, Bf16Linear)
        return model

    for name, build in (
        ("int8, FFN output in float32", int8_ffn_float),
        ("bfloat16, linear layers only", bf16_linears),
    ):
        hst = fitted(model, X, max_length)
        start = time.perf_counter()
        hst._model = build(copy.deepcopy(base._model))
        hst._processor, hst._blocks = base._processor, find_blocks(hst._model)
        arms[name] = [hst, time.perf_counter() - start]
    arms["float32"][1] = None  # preparation beyond loading: the others'
    return arms


def speed(args):
    X, _, max_length = load("rt", args.n)
    arms = speed_arms(args.model, X, max_length)
    base = arms["float32"][0]
    start = time.perf_counter()
    fitted(args.model, X, max_length)._load()
    load_s = time.perf_counter() - start
    for precision in ("int8", "bfloat16"):  # preparation = load with it - load
        arms[precision][1] -= load_s
    tokens = padded_tokens(base, X)
    flops = 2 * linear_macs(base._model) * tokens
    for hst, _ in arms.values():
        hst.transform(X[:16])  # warm-up
    names = list(arms)
    times = {name: [] for name in names}
    outputs = {}
    info = machine()
    for r in range(args.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            outputs[name] = arms[name][0].transform(X)
            times[name].append(time.perf_counter() - start)
            print(
                f"  repeat {r} {name:30s} {times[name][-1]:7.2f}s "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    rows = {}
    for name in names:
        med = statistics.median(times[name])
        paired = [a / b for a, b in zip(times["float32"], times[name], strict=True)]
        rows[name] = {
            "prep_s": arms[name][1],
            "times": times[name],
            "median": med,
            "texts_per_s": args.n / med,
            "speedup": statistics.median(times["float32"]) / med,
            "paired": [min(paired), max(paired)],
            "gflops": flops / med / 1e9,
            "cosine": cosine(outputs["float32"], outputs[name]).tolist(),
        }
        print(
            f"{name:30s} {args.n / med:7.1f} texts/s  x{rows[name]['speedup']:.2f} "
            f"(paired {min(paired):.2f}-{max(paired):.2f})  "
            f"{rows[name]['gflops']:.1f} GFLOP/s, cosine min layer "
            f"{min(rows[name]['cosine']):.4f}",
            flush=True,
        )
    info["loadavg_after"] = round(os.getloadavg()[0], 2)
    save(
        f"speed_{args.model}",
        {
            "machine": info,
            "model": args.model,
            "n": args.n,
            "repeats": args.repeats,
            "max_length": max_length,
            "padded_tokens": tokens,
            "load_s": load_s,
            "linear_flops": flops,
            "arms": rows,
        },
    )


# -------------------------------------------------------------- quality
def probe_scores(H, y, folds):
    """Per layer the mean 5-fold accuracy of the ridge probe, and the layers
    the default LOESSelector picks in each fold (``cross_val_score``, and
    ``cross_validate`` of a selector-and-probe pipeline on the flat table)."""
    from sklearn.model_selection import cross_val_score, cross_validate
    from sklearn.pipeline import make_pipeline

    from skloes.selection import LOESSelector, RidgeProbeClassifier

    L, n, d = H.shape
    acc = np.array(
        [
            cross_val_score(RidgeProbeClassifier(), H[l], y, cv=folds).mean()
            for l in range(L)
        ]
    )
    flat = np.ascontiguousarray(H.transpose(1, 0, 2)).reshape(n, L * d)
    out = cross_validate(
        make_pipeline(LOESSelector(layer_dim=d), RidgeProbeClassifier()),
        flat,
        y,
        cv=folds,
        return_estimator=True,
    )
    picks = [
        sorted(map(int, fitted[0].selected_layers_)) for fitted in out["estimator"]
    ]
    return acc, picks


def cosine(A, B):
    A, B = A.astype(np.float64), B.astype(np.float64)
    num = (A * B).sum(-1)
    return (
        num / (np.linalg.norm(A, axis=-1) * np.linalg.norm(B, axis=-1) + 1e-30)
    ).mean(axis=1)


def quality(args):
    from sklearn.model_selection import StratifiedKFold

    for dataset in args.datasets:
        X, y, max_length = load(dataset, args.n)
        folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
        stacks, seconds = {}, {}
        for precision in ("float32", "int8", "bfloat16"):
            hst = fitted(args.model, X, max_length, precision, cache=args.cache)
            start = time.perf_counter()
            stacks[precision] = np.asarray(hst.transform(X), dtype=np.float32)
            seconds[precision] = time.perf_counter() - start
        acc0, picks0 = probe_scores(stacks["float32"], y, folds)
        result = {
            "machine": machine(),
            "model": args.model,
            "dataset": dataset,
            "n": len(X),
            "max_length": max_length,
            "seconds": seconds,
            "float32": {"acc": acc0.tolist(), "picks": picks0},
        }
        for precision in ("int8", "bfloat16"):
            acc, picks = probe_scores(stacks[precision], y, folds)
            diff = 100 * (acc - acc0)
            row = {
                "acc": acc.tolist(),
                "diff_points": diff.tolist(),
                "diff_mean": float(np.abs(diff).mean()),
                "diff_worst": float(np.abs(diff).max()),
                "picks": picks,
                "same_picks": sum(map(list.__eq__, picks, picks0)),
                "cosine": cosine(stacks["float32"], stacks[precision]).tolist(),
            }
            result[precision] = row
            print(
                f"{args.model} {dataset} n={len(X)} {precision}: acc diff mean "
                f"{row['diff_mean']:.2f} worst {row['diff_worst']:.2f} points, "
                f"same picks {row['same_picks']}/5, cosine min "
                f"{min(row['cosine']):.4f}",
                flush=True,
            )
        save(f"quality_{args.model}_{dataset}", result)


# ---------------------------------------------------------------- table
def _read(name):
    path = OUT / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def table():
    lines = [
        "# Compute precision: speed and quality",
        "",
        "Written by `benchmarks/bench_precision.py --table` from "
        "`benchmarks/results/precision/*.json`.",
        "",
    ]
    peak_ = _read("peak")
    if peak_:
        m = peak_["machine"]
        lines += [
            f"## GEMM peak, one thread ({m['date']}, load average {m['loadavg']})",
            "",
            machine_line(m),
            "",
            "| precision | "
            + " | ".join(next(iter(peak_["shapes"].values())))
            + " | best |",
            "|---" * (len(next(iter(peak_["shapes"].values()))) + 2) + "|",
        ]
        for p, shapes in peak_["shapes"].items():
            lines.append(
                f"| {p} | "
                + " | ".join(f"{v['median']:.1f}" for v in shapes.values())
                + f" | {peak_['peak'][p]:.1f} |"
            )
        lines += [
            "",
            "GFLOP/s (median over repeats; best: the largest single repeat).",
            "",
        ]
    for model in MODELS:
        run = _read(f"speed_{model}")
        if not run:
            continue
        m = run["machine"]
        lines += [
            f"## Speed: {model}, {run['n']} Rotten Tomatoes texts, "
            f"max_length={run['max_length']}",
            "",
            machine_line(m),
            "",
            f"{m['date']}, {m['threads']} thread(s) on CPU "
            f"{m['affinity']}, load average {m['loadavg']} before and "
            f"{m['loadavg_after']} after (other jobs on the machine), torch "
            f"{m['torch']}; {run['repeats']} interleaved repeats, median; "
            f"loading the float32 model: {run['load_s']:.1f} s. " + run.get("note", ""),
            "",
            "| arm | texts/s | x float32 (paired range) | linear GFLOP/s "
            "| of peak | preparation (s) | cosine, min layer |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, row in run["arms"].items():
            kind = (
                "int8"
                if "int8" in name
                else ("bfloat16" if "bfloat16" in name else "float32")
            )
            top = peak_["peak"][kind] if peak_ else float("nan")
            prep = "-" if row["prep_s"] is None else f"{row['prep_s']:.1f}"
            lines.append(
                f"| {name} | {row['texts_per_s']:.1f} | {row['speedup']:.2f} "
                f"({row['paired'][0]:.2f}-{row['paired'][1]:.2f}) | "
                f"{row['gflops']:.1f} | {row['gflops'] / top:.0%} | {prep} | "
                f"{min(row['cosine']):.4f} |"
            )
        lines.append("")
    quality_rows = []
    for model in MODELS:
        for dataset in DATASETS:
            run = _read(f"quality_{model}_{dataset}")
            if run:
                quality_rows.append(run)
    if quality_rows:
        lines += [
            "## Quality (5-fold, ridge probe per layer, default LOESSelector)",
            "",
            "| model | data | n | precision | acc. diff mean (points) | "
            "worst | same picks | cosine min layer | cosine mean |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for run in quality_rows:
            for p in ("int8", "bfloat16"):
                r = run[p]
                lines.append(
                    f"| {run['model']} | {run['dataset']} | {run['n']} | {p} | "
                    f"{r['diff_mean']:.2f} | {r['diff_worst']:.2f} | "
                    f"{r['same_picks']}/5 | {min(r['cosine']):.4f} | "
                    f"{np.mean(r['cosine']):.4f} |"
                )
        m = quality_rows[0]["machine"]
        lines += [
            "",
            machine_lines(run["machine"] for run in quality_rows),
            "",
            f"{m['date']}, {m['threads']} thread(s), load "
            f"average {m['loadavg']}. Targets for int8: accuracy within "
            f"{TARGETS['acc_mean']} point on average and {TARGETS['acc_worst']} "
            f"at worst, the same picks in {TARGETS['same_picks']} of 5 folds.",
            "",
        ]
    lines += _targets(quality_rows)
    text = "\n".join(lines)
    (RESULTS / "precision.md").write_text(text)
    doc = Path(__file__).parent.parent / "doc" / "benchmarks_precision.md"
    doc.write_text(
        text.replace(
            "# Compute precision",
            "# Compute precision (copied from benchmarks/results/precision.md)",
            1,
        )
    )
    print(text)


def _targets(quality_rows):
    """The issue's int8 targets, each met or missed."""

    def verdict(ok):
        return "met" if ok else "**missed**"

    lines = [
        "## int8 against its targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    for model in MODELS:
        run = _read(f"speed_{model}")
        if run:
            x = run["arms"]["int8"]["speedup"]
            lines.append(
                f"| >= {TARGETS['speedup']}x float32, {model} | {x:.2f}x "
                f"| {verdict(x >= TARGETS['speedup'])} |"
            )
    for run in quality_rows:
        r, where = run["int8"], f"{run['model']}, {run['dataset']}"
        lines += [
            f"| accuracy diff. mean <= {TARGETS['acc_mean']}, {where} | "
            f"{r['diff_mean']:.2f} | "
            f"{verdict(r['diff_mean'] <= TARGETS['acc_mean'])} |",
            f"| accuracy diff. worst <= {TARGETS['acc_worst']}, {where} | "
            f"{r['diff_worst']:.2f} | "
            f"{verdict(r['diff_worst'] <= TARGETS['acc_worst'])} |",
            f"| same picks >= {TARGETS['same_picks']}/5, {where} | "
            f"{r['same_picks']}/5 | "
            f"{verdict(r['same_picks'] >= TARGETS['same_picks'])} |",
        ]
    return lines + [""]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=["peak", "speed", "quality"])
    parser.add_argument("--model", choices=list(MODELS), default="minilm")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument(
        "--cache", default=None, help="hidden-states cache folder of the quality part"
    )
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args(argv)
    if args.part:
        {"peak": peak, "speed": speed, "quality": quality}[args.part](args)
    if args.table:
        table()


if __name__ == "__main__":
    main()
