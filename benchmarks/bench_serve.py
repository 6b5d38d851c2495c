"""Serving a probe: exported graph (ONNX Runtime) against the torch pipeline.

Four parts, each writing a JSON file under ``benchmarks/results/serve/``;
``--table`` turns them into ``benchmarks/results/serve.md``:

``speed``
    Texts/s of ``predict_proba`` on Rotten Tomatoes texts (``max_length=64``)
    for a probe fitted on ``--fit`` texts: the torch float32 pruned pipeline,
    the exported float32 graph and the exported int8 graph, in one process,
    in rotated order, ``--repeats`` times, at ``--threads`` threads; the
    max. abs. difference of the pooled features (float32 graph against torch)
    and the share of identical predictions (int8 against torch).
``quality``
    On Rotten Tomatoes, BBC News and lang-ID (``--n`` texts each), 5-fold CV
    of the probe's default selection and head fitted on float32 features;
    each fold's test texts predicted from the float32 torch features and from
    the int8 graph's: accuracy of both, their difference and the share of
    identical predictions. The int8 features come from one export of the
    model through its last layer with every layer pooled: a layer's int8
    value depends only on the blocks below it (each matrix product quantizes
    its own input), so it equals what a graph cut at any deeper block gives.
``coldstart``
    Seconds from launching a fresh ``python`` to the first prediction of one
    text (load the saved probe, predict, exit), one thread on one core,
    arms alternated ``--repeats`` times: the torch path of ``--baseline``
    (another checkout, e.g. ``main``, on the same weight-free folder;
    ``none`` for none, as for a model that checkout does not know), the
    torch path here, and the exported graph here.
``fusions``
    The default probe and one probe of each fusion (``concatenate``,
    ``average``, ``stack``) fitted on ``--fit`` texts, exported in int8:
    the share of ``--n`` new texts given the torch probe's class, the
    largest probability drift, a text's probabilities alone against in its
    batch, int8 against the torch float32 pruned pipeline at ``--threads``
    (interleaved, ``--repeats`` times) and each folder's cold start.
``sizes``
    Disk size of two fresh virtual environments under ``/tmp``: ``pip
    install .[serve]`` against ``pip install torch==2.13.0`` then
    ``.[torch]``.

Usage::

    python benchmarks/bench_serve.py speed --model minilm --threads 1
    python benchmarks/bench_serve.py quality --model smollm2 --n 500
    python benchmarks/bench_serve.py quality --model qwen2 --n 1000 --datasets bbc_news
    python benchmarks/bench_serve.py coldstart --model smollm2 --baseline /work/main
    python benchmarks/bench_serve.py coldstart --model gemma3 --baseline none
    python benchmarks/bench_serve.py fusions --model minilm --threads 1
    python benchmarks/bench_serve.py sizes
    python benchmarks/bench_serve.py --table
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from _machine import machine as cpu_record  # noqa: E402
from _machine import machine_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "serve"
MODELS = {
    "minilm": None,
    "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "gemma3": "google/gemma-3-270m",
    "qwen2": "Qwen/Qwen2.5-Coder-0.5B-Instruct",
}
DATASETS = ("rotten_tomatoes", "bbc_news", "chatterbot_langid")
WORK = Path(os.environ.get("SKLOES_BENCH_WORK", "/work/cache/issue29/serve"))
TARGETS = {"speedup": 2.5, "acc_mean": 0.5, "acc_worst": 1.5, "same": 0.99}


def machine():
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **cpu_record(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def save(name, payload):
    OUT.mkdir(parents=True, exist_ok=True)
    payload["machine_end"] = machine()
    (OUT / f"{name}.json").write_text(json.dumps(payload, indent=1))
    print(f"wrote {OUT / name}.json", flush=True)


def texts_of(name, n, seed=0):
    from skloes.datasets import load_dataset

    X, y = load_dataset(name, n_samples=n, random_state=seed, return_X_y=True)
    return [str(x) for x in X], np.asarray(y)


# ----------------------------------------------------------------- speed
def fitted_probe(model, n_fit):
    """A probe on ``n_fit`` RT texts, saved weight-free and with both exports
    under WORK (reused when present)."""
    from skloes.probe import LayerProbeClassifier, load_probe, save_probe

    base = WORK / model
    X, y = texts_of("rotten_tomatoes", n_fit)
    if not (base / "probe" / "manifest.json").is_file():
        probe = LayerProbeClassifier(
            MODELS[model], max_length=64, random_state=0, device="cpu"
        ).fit(X, y)
        save_probe(probe, base / "probe", overwrite=True)
    probe = load_probe(base / "probe", runtime="torch")
    for export in ("onnx", "onnx-int8"):
        if not (base / export / "manifest.json").is_file():
            save_probe(probe, base / export, export=export, check_texts=X)
    return probe


def speed(args):
    import torch

    from skloes.serving import load_exported

    torch.set_num_threads(args.threads)
    probe = fitted_probe(args.model, args.fit)
    new, _ = texts_of("rotten_tomatoes", args.n, seed=1)
    arms = {"torch float32 (pruned)": probe}
    for export, name in (("onnx", "exported float32"), ("onnx-int8", "exported int8")):
        arms[name] = load_exported(WORK / args.model / export, n_threads=args.threads)
    for arm in arms.values():
        arm.predict_proba(new[:8])  # loaded and warm outside the timings
    begin = machine()
    times, probas = {k: [] for k in arms}, {}
    names = list(arms)
    for rep in range(args.repeats):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            start = time.perf_counter()
            probas[name] = arms[name].predict_proba(new)
            times[name].append(time.perf_counter() - start)
    torch_features = probe.pipeline_[0].transform(new)
    base = np.array(times["torch float32 (pruned)"])
    out = {
        "model": args.model,
        "threads": args.threads,
        "n": len(new),
        "layers": probe.selected_layers_.tolist(),
        "machine": begin,
        "arms": {},
    }
    for name in names:
        ratio = base / np.array(times[name])
        row = {
            "texts_per_s": len(new) / statistics.median(times[name]),
            "speedup_median": float(np.median(ratio)),
            "speedup_min": float(ratio.min()),
            "speedup_max": float(ratio.max()),
            "same_prediction": float(
                np.mean(
                    probas[name].argmax(1) == probas["torch float32 (pruned)"].argmax(1)
                )
            ),
            "max_proba_diff": float(
                np.abs(probas[name] - probas["torch float32 (pruned)"]).max()
            ),
        }
        if name != names[0]:
            row["max_abs_feature_diff"] = float(
                np.abs(arms[name].transform(new) - torch_features).max()
            )
        out["arms"][name] = row
    save(f"speed_{args.model}_t{args.threads}", out)


# --------------------------------------------------------------- fusions
FUSIONS = ("auto", "concatenate", "average", "stack")


def fusion_probes(model, n_fit):
    """The default probe and one of each fusion on ``n_fit`` RT texts (one
    extraction: ``fit_stack``), each exported in int8 under WORK."""
    from skloes.extraction import HiddenStatesTransformer
    from skloes.probe import LayerProbeClassifier, save_probe

    X, y = texts_of("rotten_tomatoes", n_fit)
    stack = HiddenStatesTransformer(
        MODELS[model], max_length=64, device="cpu"
    ).fit_transform(X)
    probes, folders = {}, {}
    for fusion in FUSIONS:
        params = {} if fusion == "auto" else {"fusion": fusion}
        probe = LayerProbeClassifier(
            MODELS[model], max_length=64, random_state=0, device="cpu", **params
        ).fit_stack(X, stack, y)
        probes[fusion] = probe
        folders[fusion] = save_probe(
            probe,
            WORK / model / f"fusion-{fusion}-int8",
            export="onnx-int8",
            check_texts=X,
            overwrite=True,
        )
    return probes, folders


def fusions(args):
    """Default exported probes of every fusion: the same class as the torch
    probe on new texts, a text's probabilities alone and in a batch, int8
    against torch float32 at ``--threads``, and the cold start of each."""
    import torch

    from skloes.serving import load_exported

    torch.set_num_threads(args.threads)
    probes, folders = fusion_probes(args.model, args.fit)
    new, _ = texts_of("rotten_tomatoes", args.n, seed=1)
    served = {f: load_exported(folders[f], n_threads=args.threads) for f in FUSIONS}
    out = {
        "model": args.model,
        "threads": args.threads,
        "n": len(new),
        "machine": machine(),
        "chosen": probes["auto"].fusion_,
        "layers": probes["auto"].selected_layers_.tolist(),
        "fusions": {},
    }
    arms = {"torch float32 (pruned)": probes["auto"]}
    arms.update({f"int8 {f}": served[f] for f in FUSIONS})
    for arm in arms.values():
        arm.predict_proba(new[:8])
    times = {k: [] for k in arms}
    names = list(arms)
    for rep in range(args.repeats):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            start = time.perf_counter()
            arms[name].predict_proba(new)
            times[name].append(time.perf_counter() - start)
    base = np.array(times["torch float32 (pruned)"])
    for fusion in FUSIONS:
        torch_proba = probes[fusion].predict_proba(new)
        proba = served[fusion].predict_proba(new)
        alone = np.concatenate([served[fusion].predict_proba([t]) for t in new[:40]])
        ratio = base / np.array(times[f"int8 {fusion}"])
        cold = []
        for _ in range(args.repeats):
            cold.append(_launch(COLD["exported"], folders[fusion], ROOT)["wall_s"])
        out["fusions"][fusion] = {
            "fusion_": probes[fusion].fusion_,
            "same_prediction": float(
                np.mean(
                    probes[fusion].classes_[proba.argmax(1)]
                    == probes[fusion].predict(new)
                )
            ),
            "max_proba_diff": float(np.abs(proba - torch_proba).max()),
            "batch_dependence": float(np.abs(alone - proba[:40]).max()),
            "speedup_median": float(np.median(ratio)),
            "speedup_min": float(ratio.min()),
            "coldstart_median": statistics.median(cold),
            "coldstart_max": max(cold),
        }
        print(fusion, out["fusions"][fusion], flush=True)
    save(f"fusions_{args.model}_t{args.threads}", out)


# --------------------------------------------------------------- quality
def full_graph(model, texts):
    """The int8 graph of every layer (0..L) of ``model``, exported once."""
    from skloes.extraction import HiddenStatesTransformer
    from skloes.probe._export import (
        _float_reference,
        _sample_batch,
        _write_graph,
    )

    folder = WORK / model / "full-int8"
    if not (folder / "graph-int8.onnx").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        hst = HiddenStatesTransformer(MODELS[model], max_length=64, device="cpu")
        reference = _float_reference(hst.fit(texts[:2]))
        sample = _sample_batch(reference, texts)
        sample.pop("special_tokens_mask")
        entry = _write_graph(
            reference, reference.layers_, "int8", folder, sample, "bench"
        )
        (folder / "graph.json").write_text(json.dumps(entry))
    return folder / "graph-int8.onnx"


def int8_stack(graph, model, texts):
    """Every layer of ``texts`` through the int8 graph (one thread per core)."""
    from skloes.extraction import HiddenStatesTransformer
    from skloes.probe._export import _write_tokenizer
    from skloes.serving import ExportedProbe, _session, _tokenizer

    hst = HiddenStatesTransformer(MODELS[model], max_length=64, device="cpu")
    hst.fit(texts[:2])
    folder = graph.parent
    spec = _write_tokenizer(hst.processor_, folder, hst.max_length_, "bench")
    export = {
        "tokenizer": spec,
        "batching": {"batch_size": 32, "max_batch_tokens": hst.max_batch_tokens_},
        "layers": hst.layers_.tolist(),
        "precision": "int8",
    }
    head = type("NoHead", (), {"classes_": None})()
    served = ExportedProbe(
        folder,
        export,
        _session(graph, None),
        _tokenizer(folder / spec["file"], spec),
        head,
    )
    return served.transform(texts)


def float_stack(model, name, texts):
    from _features import CACHE  # the benchmarks' shared hidden-states cache

    from skloes.extraction import HiddenStatesTransformer

    hst = HiddenStatesTransformer(
        MODELS[model], max_length=64, device="cpu", cache=str(CACHE / "hidden_states")
    )
    return hst.fit_transform(texts)


def cv_agreement(f32, i8, y, seed=0):
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes.probe._estimators import default_head
    from skloes.selection import LOESSelector

    folds = []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=seed).split(
        f32[0], y
    ):
        selector = LOESSelector(random_state=seed).fit(f32[:, train], y[train])
        head = make_pipeline(StandardScaler(), default_head("classification"))
        head.fit(selector.transform(f32[:, train]), y[train])
        p32 = head.predict(selector.transform(f32[:, test]))
        p8 = head.predict(selector.transform(i8[:, test]))
        folds.append(
            {
                "layers": selector.selected_layers_.tolist(),
                "acc_float32": float(np.mean(p32 == y[test])),
                "acc_int8": float(np.mean(p8 == y[test])),
                "same_prediction": float(np.mean(p32 == p8)),
            }
        )
    return folds


def _int8_rule(graph):
    """The int8 rule a quality record was measured with, in words."""
    if graph is None:
        return "int8 rule not recorded (before 0.3: 8-bit weights)."
    if graph.get("weight_max"):
        return f"int8 rule: weights within ±{graph['weight_max']} (no saturation)."
    return "int8 rule: 8-bit weights (exact only on a CPU with VNNI)."


def quality(args):
    out = {"model": args.model, "n": args.n, "machine": machine(), "sets": {}}
    if tuple(args.datasets) != DATASETS:
        out["partial"] = "measured on " + ", ".join(args.datasets) + " only"
    graph = None
    for name in args.datasets:
        texts, y = texts_of(name, args.n)
        graph = graph or full_graph(args.model, texts)
        f32 = float_stack(args.model, name, texts)
        i8 = int8_stack(graph, args.model, texts)
        out["graph"] = json.loads((graph.parent / "graph.json").read_text())
        folds = cv_agreement(f32, i8, y)
        diff = [100 * (f["acc_float32"] - f["acc_int8"]) for f in folds]
        out["sets"][name] = {
            "folds": folds,
            "acc_diff_mean": float(np.mean(np.abs(diff))),
            "acc_diff_worst": float(np.max(np.abs(diff))),
            "same_prediction": float(np.mean([f["same_prediction"] for f in folds])),
        }
        print(name, out["sets"][name], flush=True)
    save(f"quality_{args.model}", out)


# ------------------------------------------------------------- coldstart
COLD = {
    "torch": (
        "import time, sys; t0 = time.perf_counter()\n"
        "from skloes.probe import load_probe\n"
        "p = load_probe(sys.argv[1]{RUNTIME}); p.predict(['a warm, funny film'])\n"
        "print(time.perf_counter() - t0)\n"
    ),
    "exported": (
        "import time, sys; t0 = time.perf_counter()\n"
        "from skloes.serving import load_exported\n"
        "p = load_exported(sys.argv[1], n_threads=1)\n"
        "p.predict(['a warm, funny film'])\n"
        "print(time.perf_counter() - t0)\n"
    ),
}


def _launch(code, folder, pythonpath):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = str(pythonpath)
    start = time.perf_counter()
    before = os.times()
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    after = os.times()
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return {
        "wall_s": time.perf_counter() - start,
        "cpu_s": (after.children_user - before.children_user)
        + (after.children_system - before.children_system),
        "inner_s": float(done.stdout.split()[-1]),
    }


def coldstart(args):
    fitted_probe(args.model, args.fit)
    start = machine()
    base = WORK / args.model
    arms = {
        "torch path, baseline": (
            COLD["torch"].replace("{RUNTIME}", ""),
            base / "probe",
            args.baseline,
        ),
        "torch path": (
            COLD["torch"].replace("{RUNTIME}", ", runtime='torch'"),
            base / "probe",
            ROOT,
        ),
        "exported int8": (COLD["exported"], base / "onnx-int8", ROOT),
    }
    if args.baseline == "none":  # e.g. a model the baseline checkout cannot load
        del arms["torch path, baseline"]
    runs = {name: [] for name in arms}
    for arm in arms.values():  # warm the disk cache and the hash records
        _launch(*arm)
    for rep in range(args.repeats):
        names = list(arms)
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            runs[name].append(_launch(*arms[name]))
    out = {"model": args.model, "machine": start, "arms": {}}
    for name, values in runs.items():
        wall = [v["wall_s"] for v in values]
        cpu = [v["cpu_s"] for v in values]
        out["arms"][name] = {
            "wall_median": statistics.median(wall),
            "wall_min": min(wall),
            "wall_max": max(wall),
            "cpu_median": statistics.median(cpu),
            "runs": values,
        }
    save(f"coldstart_{args.model}", out)


# ------------------------------------------------------------------ sizes
def _venv_size(folder):
    total = 0
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def sizes(args):
    out = {"machine": machine(), "envs": {}}
    for name, steps in (
        ("serve", [[".[serve]"]]),
        ("torch", [["torch==2.13.0"], [".[torch]"]]),
    ):
        folder = Path(tempfile.mkdtemp(prefix=f"skloes-venv-{name}-", dir="/tmp"))
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q"]
        for step in steps:
            subprocess.run(pip + step, check=True, cwd=ROOT)
        freeze = subprocess.run(
            [str(folder / "bin" / "python"), "-m", "pip", "freeze"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        out["envs"][name] = {"bytes": _venv_size(folder), "packages": freeze}
        shutil.rmtree(folder, ignore_errors=True)
    out["ratio"] = out["envs"]["serve"]["bytes"] / out["envs"]["torch"]["bytes"]
    save("sizes", out)


# ------------------------------------------------------------------ table
def table():
    lines = ["# Serving a probe: exported graph against torch", ""]
    for file in sorted(OUT.glob("speed_*.json")):
        r = json.loads(file.read_text())
        lines.append(
            f"## Speed: {r['model']}, {r['threads']} thread(s), {r['n']} texts, "
            f"layers {r['layers']} ({r['machine']['date']}, load "
            f"{r['machine']['loadavg'][0]}-{r['machine_end']['loadavg'][0]})"
        )
        lines += [
            "",
            machine_line(r.get("machine")),
            "",
            "| arm | texts/s | x torch (range) | same prediction | max abs. "
            "feature diff. |",
            "|---|---|---|---|---|",
        ]
        for name, a in r["arms"].items():
            lines.append(
                f"| {name} | {a['texts_per_s']:.1f} | {a['speedup_median']:.2f} "
                f"({a['speedup_min']:.2f}-{a['speedup_max']:.2f}) | "
                f"{a['same_prediction']:.3f} | "
                f"{a.get('max_abs_feature_diff', 0):.1e} |"
            )
        lines.append("")
    for file in sorted(OUT.glob("quality_*.json")):
        r = json.loads(file.read_text())
        lines += [
            f"## int8 quality: {r['model']}, {r['n']} texts per set, 5 folds",
            "",
            *([f"Partial: {r['partial']}.", ""] if r.get("partial") else []),
            machine_line(r.get("machine")),
            "",
            _int8_rule(r.get("graph")),
            "",
            "| data | acc. float32 | acc. int8 | diff. mean / worst (points) | "
            "same prediction |",
            "|---|---|---|---|---|",
        ]
        for name, s in r["sets"].items():
            a32 = np.mean([f["acc_float32"] for f in s["folds"]])
            a8 = np.mean([f["acc_int8"] for f in s["folds"]])
            lines.append(
                f"| {name} | {a32:.4f} | {a8:.4f} | {s['acc_diff_mean']:.2f} / "
                f"{s['acc_diff_worst']:.2f} | {s['same_prediction']:.4f} |"
            )
        lines.append("")
    for file in sorted(OUT.glob("coldstart_*.json")):
        r = json.loads(file.read_text())
        lines += [
            f"## Cold start to the first prediction: {r['model']} "
            f"({r['machine']['date']}, load {r['machine']['loadavg'][0]}-"
            f"{r['machine_end']['loadavg'][0]})",
            "",
            machine_line(r.get("machine")),
            "",
            "| arm | wall s, median (min-max) | CPU s, median |",
            "|---|---|---|",
        ]
        for name, a in r["arms"].items():
            lines.append(
                f"| {name} | {a['wall_median']:.2f} ({a['wall_min']:.2f}-"
                f"{a['wall_max']:.2f}) | {a['cpu_median']:.2f} |"
            )
        lines.append("")
    for file in sorted(OUT.glob("fusions_*.json")):
        r = json.loads(file.read_text())
        lines += [
            f"## Every fusion, default exported int8 probes: {r['model']}, "
            f"{r['threads']} thread(s), {r['n']} new texts, layers {r['layers']}, "
            f"the default chose {r['chosen']!r} ({r['machine']['date']}, load "
            f"{r['machine']['loadavg'][0]}-{r['machine_end']['loadavg'][0]})",
            "",
            machine_line(r.get("machine")),
            "",
            "| fusion | same class as torch | max. proba diff. | alone vs batch | "
            "int8 x torch f32 (min) | cold start s, median (max) |",
            "|---|---|---|---|---|---|",
        ]
        for name, f in r["fusions"].items():
            lines.append(
                f"| {name} ({f['fusion_']}) | {f['same_prediction']:.4f} | "
                f"{f['max_proba_diff']:.3f} | {f['batch_dependence']:.1e} | "
                f"{f['speedup_median']:.2f} ({f['speedup_min']:.2f}) | "
                f"{f['coldstart_median']:.2f} ({f['coldstart_max']:.2f}) |"
            )
        lines.append("")
    file = OUT / "sizes.json"
    if file.is_file():
        r = json.loads(file.read_text())
        lines += ["## Install size", "", "| environment | MB |", "|---|---|"]
        for name, e in r["envs"].items():
            lines.append(f"| {name} | {e['bytes'] / 1e6:.0f} |")
        lines += ["", f"serve / torch: {r['ratio']:.3f}", ""]
    (RESULTS / "serve.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "part",
        nargs="?",
        choices=["speed", "quality", "coldstart", "sizes", "fusions"],
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm")
    parser.add_argument("--fit", type=int, default=300)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baseline", default="/work/main")
    parser.add_argument(
        "--datasets", nargs="+", default=list(DATASETS), choices=DATASETS
    )
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    if args.part:
        parts = {
            "speed": speed,
            "quality": quality,
            "coldstart": coldstart,
            "sizes": sizes,
            "fusions": fusions,
        }
        parts[args.part](args)
    if args.table:
        table()


if __name__ == "__main__":
    main()
