"""Scale benchmark (issues 35, 45): the layer store, its engines, resume, chosen layers,
the streaming head, and the constants of the cost model.

The arm ``forward`` is the floor a store is held to: a plain transformers
forward of the same batches, nothing pooled or written.

Every arm runs in a fresh process (``--arm``), so that its peak resident memory
(``ru_maxrss``) is its own; the driver runs the arms in turn, interleaved where
they are compared, records the load average before and after each, and appends
one JSON line per arm to ``benchmarks/results/scale/runs.jsonl``.
``--summarize`` writes ``benchmarks/results/scale.md`` from those lines.

The corpus: every text of the packaged, non-reserved data sets (Rotten
Tomatoes, BBC News split into sentences, chatterbot language ID, TREC-6, SMS
spam, the three VADER sets), labelled ``<set>:<label>``, in a fixed shuffled
order, repeated from the start to reach 100,000 rows (86,936 distinct texts);
a repeat gets its occurrence number appended (``"... [2]"``) so that no arm
saves forward passes by deduplicating.

Usage::

    python benchmarks/bench_scale.py --corpus
    python benchmarks/bench_scale.py --throughput 10000 100000
    python benchmarks/bench_scale.py --resume 100000
    python benchmarks/bench_scale.py --chosen 100000 [--model smollm2 --n 10000]
    python benchmarks/bench_scale.py --throughput 10000 --arms forward,local \
        --model qwen2
    python benchmarks/bench_scale.py --resume 10000 --resume-engines local \
        --model smollm2
    python benchmarks/bench_scale.py --head 10000 100000
    python benchmarks/bench_scale.py --summarize
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _machine import machine, machine_lines

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = Path(os.environ.get("SKLOES_BENCH_SCALE", HERE / ".cache" / "scale"))
STARTED_FORMAT = "%Y-%m-%d %H:%M:%S"  # a run's "started", written by spawn()
RUNS = Path(
    os.environ.get("SKLOES_BENCH_SCALE_RUNS", HERE / "results" / "scale" / "runs.jsonl")
)
REPORT = HERE / "results" / "scale.md"
SETS = (
    "rotten_tomatoes",
    "bbc_news",
    "chatterbot_langid",
    "trec6",
    "sms_spam",
    "vader_tweets3",
    "vader_nyt3",
    "vader_amazon3",
)
MODELS = {
    "minilm": ("sentence-transformers/all-MiniLM-L6-v2", 64),
    "smollm2": ("HuggingFaceTB/SmolLM2-135M-Instruct", 64),
    "qwen2": ("Qwen/Qwen2.5-Coder-0.5B-Instruct", 64),
}
N_TOTAL = 100_000
# Every arm's process: this checkout, and OpenMP threads that sleep when they
# wait (the machine is shared: spinning threads cost 4x here, measured on 500
# texts at a load average of 8.7: 2 threads 16.3 s passive, 66.0 s active).
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}


# ------------------------------------------------------------------ corpus
def build_corpus():
    """The scale corpus as ``WORK/corpus.parquet`` (id, text, label)."""
    import pandas as pd

    from skloes.datasets import load_dataset

    texts, labels = [], []
    for name in SETS:
        bunch = load_dataset(name)
        names = np.asarray(bunch.target_names)[bunch.target]
        for text, label in zip(bunch.data, names, strict=True):
            parts = [text]
            if name == "bbc_news":  # articles into sentences
                parts = [
                    s.strip()
                    for s in re.split(r"(?<=[.!?])\s+|\n+", text)
                    if len(s.split()) >= 3
                ]
            texts += parts
            labels += [f"{name}:{label}"] * len(parts)
    order = np.random.RandomState(0).permutation(len(texts))
    texts = [texts[i] for i in order]
    labels = [labels[i] for i in order]
    distinct, base = len(set(texts)), len(texts)
    reps = -(-N_TOTAL // len(texts))
    texts, labels = (texts * reps)[:N_TOTAL], (labels * reps)[:N_TOTAL]
    # A repeated text gets its occurrence number appended, so that no
    # extraction saves work by computing it once: the in-memory extractor
    # deduplicates over all rows, a store's workers over one shard.
    seen = {}
    for i, text in enumerate(texts):
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1:
            texts[i] = f"{text} [{seen[text]}]"
    frame = pd.DataFrame(
        {"id": [f"t{i:06d}" for i in range(N_TOTAL)], "text": texts, "label": labels}
    )
    WORK.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(WORK / "corpus.parquet", row_group_size=8192)
    info = {
        "rows": N_TOTAL,
        "rows_distinct_after_marking": len(set(texts)),
        "texts_before_repeats": base,
        "distinct_texts": distinct,
        "classes": len(set(labels)),
        "sets": list(SETS),
    }
    (WORK / "corpus.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info))


def corpus_file(n):
    """The first ``n`` rows of the corpus as their own Parquet file."""
    import pyarrow.parquet as pq

    path = WORK / f"corpus_{n}.parquet"
    if not path.exists():
        table = pq.read_table(WORK / "corpus.parquet").slice(0, n)
        pq.write_table(table, path, row_group_size=8192)
    return path


# -------------------------------------------------------------------- arms
def _model(name):
    from skloes.models._loading import resolve_model_path

    ref, length = MODELS[name]
    return resolve_model_path(ref), length


def _threads(n):
    from skloes.core._torch import torch

    torch.set_num_threads(n)


def arm_plain(args):
    """One HiddenStatesTransformer over every text, in memory (the baseline)."""
    import pyarrow.parquet as pq

    from skloes import HiddenStatesTransformer

    _threads(args.threads)
    texts = pq.read_table(corpus_file(args.n), columns=["text"]).column(0).to_pylist()
    model, length = _model(args.model)
    hst = HiddenStatesTransformer(model, max_length=length, device="cpu")
    start, cpu = time.perf_counter(), time.process_time()
    stack = hst.fit_transform(texts)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_s": time.process_time() - cpu,
        "shape": list(stack.shape),
    }


def arm_forward(args):
    """The floor: a plain transformers forward of the batches a local store
    runs, and nothing else (no pooling, no copy out, no file).

    The model's own tokenizer and ``AutoModel`` from the folder the library
    converted, every hidden state returned (``output_hidden_states=True``);
    the corpus is cut into the local engine's shards, and each shard into the
    library's longest-first batches under its token budget, so that both arms
    pad the same tokens. Timed from loading the model, as the store's call is.
    """
    import pyarrow.parquet as pq
    import transformers

    from skloes.core._batching import token_batches
    from skloes.core._torch import torch
    from skloes.extraction._hidden_states import AUTO_BATCH_TOKENS
    from skloes.scale._extract import _shard_size

    _threads(args.threads)
    texts = pq.read_table(corpus_file(args.n), columns=["text"]).column(0).to_pylist()
    path, length = _model(args.model)
    # Timed from the load, as the store's call loads its model itself.
    start, cpu, batches = time.perf_counter(), time.process_time(), 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = transformers.AutoModel.from_pretrained(path).eval()
    config = model.config.get_text_config()
    size = _shard_size(
        None,
        config.num_hidden_layers + 1,
        config.hidden_size,
        "float32",
        "bench",
    )
    with torch.inference_mode():
        for first in range(0, len(texts), size):
            ids = tokenizer(
                texts[first : first + size], truncation=True, max_length=length
            )["input_ids"]
            lengths = np.fromiter(map(len, ids), dtype=np.int64)
            order = np.argsort(-lengths, kind="stable")
            for index in token_batches(
                order, lengths[order].tolist(), 32, AUTO_BATCH_TOKENS["cpu"]
            ):
                inputs = tokenizer.pad(
                    {"input_ids": [ids[i] for i in index]}, return_tensors="pt"
                )
                model(**inputs, output_hidden_states=True)
                batches += 1
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_s": time.process_time() - cpu,
        "shard_rows": size,
        "batches": batches,
    }


def _store_arm(args, engine, extra=None, store=None, layers="all"):
    from skloes.scale import extract_to_store

    results = []
    model, length = _model(args.model)
    store = store or WORK / "stores" / f"{args.model}_{engine}_{args.n}_{args.tag}"
    shutil.rmtree(store, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    out = extract_to_store(
        corpus_file(args.n),
        store,
        model=model,
        layers=layers,
        engine=engine,
        max_length=length,
        device="cpu",
        columns=["label"],
        id_column="id",
        threads_per_worker=args.threads if engine == "local" else 1,
        n_workers=None if engine == "local" else 2,
        verbose=0,
        callback=results.append,
        **(extra or {}),
    )
    seconds, driver_cpu = time.perf_counter() - start, time.process_time() - cpu
    workers, worker_cpu = {}, {}
    for r in results:
        workers[r["worker"]] = max(workers.get(r["worker"], 0), r["peak_rss"])
        worker_cpu[r["worker"]] = max(worker_cpu.get(r["worker"], 0), r["cpu_s"])
    return {
        "seconds": seconds,
        "driver_cpu_s": driver_cpu,
        "worker_cpu_s": worker_cpu,
        "store": str(store),
        "bytes": out.nbytes(),
        "layers": out.layers.tolist(),
        "n_hidden_states": out.model["n_hidden_states"],
        "shards": out.n_shards,
        "worker_peak_rss": workers,
    }


def arm_local(args):
    return _store_arm(args, "local")


def arm_ray(args):
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    init = time.perf_counter() - start
    try:
        out = _store_arm(args, "ray")
    finally:
        ray.shutdown()
    return {**out, "cluster_start_s": init}


def arm_dask(args):
    import dask
    import distributed

    if "noprofile" in args.tag:  # Dask's worker profiler samples every 10 ms
        dask.config.set({"distributed.worker.profile.enabled": False})
    start = time.perf_counter()
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=50,
    )
    client = distributed.Client(cluster)
    init = time.perf_counter() - start
    try:
        out = _store_arm(args, "dask")
    finally:
        client.close()
        cluster.close()
    return {**out, "cluster_start_s": init}


def arm_chosen(args):
    """Layers chosen on a 2,000-row calibration sample, then only those."""
    import pyarrow.parquet as pq

    from skloes import LOESSelector
    from skloes.scale import extract_to_store
    from skloes.scale._workflow import draw_calibration

    model, length = _model(args.model)
    labels = pq.read_table(corpus_file(args.n), columns=["label"]).column(0)
    labels = np.asarray(labels.to_pylist(), dtype=object)
    rows = draw_calibration(labels, np.arange(len(labels)), 2000, 0)
    cal_dir = WORK / "stores" / f"{args.model}_calibration_{args.n}"
    shutil.rmtree(cal_dir, ignore_errors=True)
    start = time.perf_counter()
    cal = extract_to_store(
        corpus_file(args.n),
        cal_dir,
        model=model,
        rows=rows,
        max_length=length,
        device="cpu",
        columns=["label"],
        threads_per_worker=args.threads,
        verbose=0,
    )
    cal_s = time.perf_counter() - start
    start = time.perf_counter()
    selector = LOESSelector(random_state=0).fit(cal, cal.column("label"))
    select_s = time.perf_counter() - start
    chosen = cal.layers[selector.selected_layers_].tolist()
    out = _store_arm(args, "local", layers=chosen)
    return {**out, "calibration_s": cal_s, "selection_s": select_s, "chosen": chosen}


def arm_head(args):
    """A head on the chosen layers of a store: out of core (streamed), or
    scikit-learn's own fit in memory (StandardScaler and RidgeClassifier at
    the same GCV penalty, or LogisticRegression at the same C)."""
    from skloes.scale import (
        LayerStore,
        StreamingLogisticRegression,
        StreamingRidgeClassifier,
    )
    from skloes.scale._workflow import HEAD_ALPHAS

    store = LayerStore(args.store)
    n = min(args.n, store.n_rows)
    labels = store.column("label")[:n]
    test = np.arange(n) % 10 == 0
    train_rows, test_rows = np.flatnonzero(~test), np.flatnonzero(test)
    out = {
        "rows": int(n),
        "train": int(train_rows.size),
        "layers": store.layers.tolist(),
    }
    start = time.perf_counter()
    if args.in_memory:
        predict = _in_memory_fit(args.head, store, train_rows, labels, out)
    else:
        if args.head == "ridge":
            head = StreamingRidgeClassifier(alphas=HEAD_ALPHAS)
        else:
            head = StreamingLogisticRegression(C=0.01, max_iter=300)
        head.fit(store.select(rows=train_rows), labels[train_rows])
        out["n_passes"], out["alpha"] = (
            int(head.n_passes_),
            getattr(head, "alpha_", None),
        )
        predict = lambda rows: head.predict(store.select(rows=rows))  # noqa: E731
    out["fit_s"] = time.perf_counter() - start
    out["accuracy"] = float(np.mean(predict(test_rows) == labels[test_rows]))
    return out


def _in_memory_fit(head, store, train_rows, labels, out):
    from sklearn.linear_model import LogisticRegression, RidgeClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes.scale import StreamingRidgeClassifier
    from skloes.scale._workflow import HEAD_ALPHAS

    def flat(rows):
        stack = store.select(rows=rows).read(np.float32)
        return stack.transpose(1, 0, 2).reshape(len(rows), -1)

    X = flat(train_rows)
    if head == "ridge":  # the GCV penalty, then scikit-learn's own ridge
        stack = X.reshape(len(train_rows), len(store.layers), -1).transpose(1, 0, 2)
        gcv = StreamingRidgeClassifier(alphas=HEAD_ALPHAS, batch_size=len(train_rows))
        out["alpha"] = gcv.fit(stack, labels[train_rows]).alpha_
        del stack
        model = RidgeClassifier(alpha=out["alpha"])
    else:
        model = LogisticRegression(C=0.01, max_iter=300)
    pipe = make_pipeline(StandardScaler(), model).fit(X, labels[train_rows])
    del X
    return lambda rows: pipe.predict(flat(rows))


ARMS = {
    "forward": arm_forward,
    "plain": arm_plain,
    "local": arm_local,
    "ray": arm_ray,
    "dask": arm_dask,
    "chosen": arm_chosen,
    "head": arm_head,
}


def run_arm(args):
    """Run one arm in this (fresh) process; print its JSON record."""

    import torch

    record = {"arm": args.arm, "n": args.n, "model": args.model, "tag": args.tag}
    record["threads"] = args.threads
    out = ARMS[args.arm](args)
    record.update(out)
    record["driver_peak_rss"] = (
        int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    )
    record["torch"] = torch.__version__
    record["machine"] = machine()
    print("RESULT " + json.dumps(record))


# ------------------------------------------------------------------ driver
def loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]


def spawn(arm, n, model="minilm", threads=2, tag="", extra=()):
    """Run an arm in a fresh process; return its record with the loads."""
    env = {**ENV, "OMP_NUM_THREADS": str(threads)}
    command = [sys.executable, __file__, "--arm", arm, "--n", str(n), "--model", model]
    command += ["--threads", str(threads), "--tag", tag, *extra]
    before = loadavg()
    started = time.strftime(STARTED_FORMAT)
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    after = loadavg()
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"arm {arm} failed")
    record = json.loads(lines[-1][7:])
    record.update(load_before=before, load_after=after, started=started)
    RUNS.parent.mkdir(parents=True, exist_ok=True)
    with RUNS.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(
        json.dumps(
            {k: record[k] for k in ("arm", "n", "seconds") if k in record}
            | {"load": before + after}
        ),
        flush=True,
    )
    return record


def throughput(sizes, repeats, arms, model):
    for n in sizes:
        for r in range(repeats):
            for arm in arms:
                spawn(arm, n, model=model, tag=f"r{r}")


# ------------------------------------------------------------------ resume
KILL_JOB = """
import sys
from skloes.scale import extract_to_store
data, store, model, length = sys.argv[1:5]
extract_to_store(data, store, model=model, max_length=int(length), device="cpu",
                 columns=["label"], id_column="id", threads_per_worker=2, verbose=0)
"""


def kill_driver(n, model="minilm"):
    """SIGKILL the driver (local engine) half way, re-run, compare bitwise."""
    path, length = _model(model)
    store = WORK / "stores" / f"{model}_killed_driver_{n}"
    shutil.rmtree(store, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"}
    argv = [
        sys.executable,
        "-c",
        KILL_JOB,
        str(corpus_file(n)),
        str(store),
        path,
        str(length),
    ]
    reference = WORK / "stores" / f"{model}_local_{n}_r0"
    before = loadavg()
    child = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    total = _n_shards(reference)
    while len(list(store.glob("part-*.parquet"))) < total // 2:
        if child.poll() is not None:
            raise SystemExit(child.stderr.read())
        time.sleep(0.2)
    child.send_signal(signal.SIGKILL)
    child.wait()
    written = len(list(store.glob("part-*.parquet")))
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True)
    rerun = time.perf_counter() - start
    record = _compare(store, reference)
    record.update(
        arm="kill_driver",
        n=n,
        model=model,
        killed_after_shards=written,
        shards=total,
        rerun_s=rerun,
        load_before=before,
        load_after=loadavg(),
    )
    _append(record)


def _n_shards(reference):
    """Shards of the uninterrupted run's store (the run to compare with)."""
    from skloes.scale import LayerStore

    return LayerStore(reference).n_shards


def kill_worker(n, model="minilm"):
    """SIGKILL one Ray actor half way, re-run, compare bitwise."""
    env = {**ENV, "OMP_NUM_THREADS": "1"}
    before = loadavg()
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--kill-worker-job",
            "--n",
            str(n),
            "--model",
            model,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        raise SystemExit(out.stderr[-3000:])
    record = json.loads(lines[-1][7:])
    store = Path(record["store"])
    record.update(_compare(store, WORK / "stores" / f"{model}_ray_{n}_r0"))
    record.update(
        arm="kill_worker", n=n, model=model, load_before=before, load_after=loadavg()
    )
    _append(record)


def kill_worker_job(args):
    """In a fresh process: a Ray job whose callback SIGKILLs an actor half way,
    then the same call again."""
    import ray

    from skloes.scale import extract_to_store

    path, length = _model(args.model)
    store = WORK / "stores" / f"{args.model}_killed_worker_{args.n}"
    shutil.rmtree(store, ignore_errors=True)
    total = _n_shards(WORK / "stores" / f"{args.model}_ray_{args.n}_r0")
    seen, killed = [], {}

    def kill(result):
        seen.append(result)
        if len(seen) == total // 2:
            killed["pid"] = int(result["worker"].rsplit(":", 1)[1])
            os.kill(killed["pid"], signal.SIGKILL)

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    kw = dict(
        model=path,
        max_length=length,
        device="cpu",
        columns=["label"],
        id_column="id",
        engine="ray",
        n_workers=2,
        threads_per_worker=1,
        verbose=0,
    )
    first_error = None
    try:
        try:
            extract_to_store(corpus_file(args.n), store, callback=kill, **kw)
        except Exception as exc:
            first_error = f"{type(exc).__name__}: {str(exc)[:200]}"
        start = time.perf_counter()
        extract_to_store(corpus_file(args.n), store, **kw)
        rerun = time.perf_counter() - start
    finally:
        ray.shutdown()
    print(
        "RESULT "
        + json.dumps(
            {
                "store": str(store),
                "killed_pid": killed.get("pid"),
                "shards": total,
                "first_run_error": first_error,
                "rerun_s": rerun,
            }
        )
    )


def _compare(store, reference):
    from skloes.scale import LayerStore

    a, b = LayerStore(store).verify(), LayerStore(reference)
    ids = a.row_ids()
    same = True
    for x, y in zip(a.iter_batches(8192), b.iter_batches(8192), strict=True):
        same &= bool(np.array_equal(x.stack, y.stack)) and bool(
            np.array_equal(x.row_ids, y.row_ids)
        )
    return {
        "rows": int(len(ids)),
        "unique_row_ids": int(len(np.unique(ids))),
        "bitwise_equal": same,
        "reference": str(reference),
    }


def _append(record):
    record.setdefault("machine", machine())
    with RUNS.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="store_true")
    parser.add_argument("--throughput", nargs="*", type=int)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--arms", default="plain,local,ray,dask")
    parser.add_argument("--resume", type=int)
    parser.add_argument(
        "--resume-engines",
        default="local,ray",
        help="with --resume: kill the driver (local), and one Ray actor (ray)",
    )
    parser.add_argument("--chosen", type=int)
    parser.add_argument("--head", nargs="*", type=int)
    parser.add_argument("--summarize", action="store_true")
    parser.add_argument("--plan", action="store_true")
    parser.add_argument("--arm")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tag", default="")
    parser.add_argument("--store")
    parser.add_argument("--in-memory", action="store_true")
    parser.add_argument("--head-kind", default="ridge", choices=["ridge", "logistic"])
    parser.add_argument("--kill-worker-job", action="store_true")
    args, _ = parser.parse_known_args()
    if args.arm:
        args.head = args.head_kind
        return run_arm(args)
    if args.kill_worker_job:
        return kill_worker_job(args)
    if args.corpus:
        return build_corpus()
    if args.throughput:
        return throughput(
            args.throughput, args.repeats, args.arms.split(","), args.model
        )
    if args.resume:
        kill_driver(args.resume, args.model)
        if "ray" in args.resume_engines.split(","):
            kill_worker(args.resume, args.model)
        return None
    if args.chosen:
        return spawn("chosen", args.chosen, model=args.model, tag="chosen")
    if args.plan:
        return plan()
    if args.head:
        return heads(args.head, args.model)
    if args.summarize:
        return summarize()
    parser.print_help()


def plan():
    """Every measurement of the results page, in the order run for it."""
    throughput([10_000], 1, ["plain", "local", "ray", "dask"], "minilm")
    throughput([100_000], 1, ["local", "ray", "dask"], "minilm")
    kill_driver(100_000)
    kill_worker(100_000)
    spawn("chosen", 100_000, tag="chosen")
    heads([10_000, 100_000], "minilm")
    throughput([100_000], 1, ["plain"], "minilm")
    spawn("local", 10_000, model="smollm2", tag="r0")
    spawn("chosen", 10_000, model="smollm2", tag="chosen")
    throughput([10_000], 2, ["plain", "local", "ray", "dask"], "minilm")


# ----------------------------------------------------------------- summary
def corpus_tokens(model, n):
    """Tokens of the first ``n`` corpus texts through ``model``'s tokenizer,
    truncated as the arms truncate them (cached in ``WORK/tokens.json``)."""
    cache = WORK / "tokens.json"
    known = json.loads(cache.read_text()) if cache.exists() else {}
    key = f"{model}:{n}"
    if key not in known:
        import pyarrow.parquet as pq

        from skloes.models._loading import load_processor

        path, length = _model(model)
        tokenizer = load_processor(path, "text")
        texts = pq.read_table(corpus_file(n), columns=["text"]).column(0).to_pylist()
        ids = tokenizer(texts, truncation=True, max_length=length)["input_ids"]
        known[key] = int(sum(map(len, ids)))
        cache.write_text(json.dumps(known, indent=1))
    return known[key]


def _runs():
    return [json.loads(line) for line in RUNS.read_text().splitlines() if line]


def _cpu(r):
    """CPU seconds of an arm: the driver's, plus each worker process's (for
    Ray and Dask, whose workers are other processes)."""
    if r["arm"] in ("ray", "dask"):
        return r.get("driver_cpu_s", 0.0) + sum(r.get("worker_cpu_s", {}).values())
    return r.get("driver_cpu_s", r.get("cpu_s"))


def _med(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return "n/a"
    mid = float(np.median(values))
    if len(values) == 1:
        return f"{mid:.1f}"
    return f"{mid:.1f} [{values[0]:.1f}, {values[-1]:.1f}]"


def _mib(x):
    return f"{x / 2**20:.0f}"


def _loads(rs):
    return "; ".join(
        f"{' '.join(r['load_before'])} -> {' '.join(r['load_after'])}" for r in rs
    )


def _row(*cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(title, header):
    return ["", title, "", _row(*header), _row(*["---"] * len(header))]


def _throughput_lines(runs):
    arms = ("plain", "local", "ray", "dask")
    lines = _table(
        "## Throughput (MiniLM, all 7 layers, max_length 64)",
        [
            "texts",
            "arm",
            "wall s, median [min, max]",
            "texts/s",
            "CPU s",
            "runs",
            "load average before -> after (1/5/15 min)",
        ],
    )
    speed = {}
    for n in sorted({r["n"] for r in runs if r["arm"] in arms}):
        for arm in arms:
            rs = [r for r in runs if r["arm"] == arm and r["n"] == n]
            rs = [r for r in rs if r.get("model") == "minilm"]
            if rs:
                speed[(n, arm)] = wall = [r["seconds"] for r in rs]
                lines.append(
                    _row(
                        f"{n:,}",
                        arm,
                        _med(wall),
                        f"{n / np.median(wall):.1f}",
                        _med([_cpu(r) for r in rs]),
                        len(rs),
                        _loads(rs),
                    )
                )
    lines += _table("", ["texts", "throughput ratio", "median", "target", "met"])
    pairs = (("local", "plain", 0.9), ("ray", "local", 0.85), ("dask", "local", None))
    for n in sorted({k[0] for k in speed}):
        for a, b, target in pairs:
            if (n, a) in speed and (n, b) in speed:
                ratio = np.median(speed[(n, b)]) / np.median(speed[(n, a)])
                met = "n/a" if target is None else ("yes" if ratio >= target else "NO")
                goal = f">= {target}" if target else "reported"
                lines.append(_row(f"{n:,}", f"{a} / {b}", f"{ratio:.3f}", goal, met))
    return lines


DECODERS = ("smollm2", "qwen2")


def _peak(run):
    """The peak resident memory of a run's processes, driver or worker."""
    return max([run["driver_peak_rss"], *run.get("worker_peak_rss", {}).values()])


def _decoder_lines(runs):
    """Decoder stores (every layer, local engine) against the floor, a plain
    transformers forward of the same batches (``forward``), and their peak
    memory at each size."""
    lines = _table(
        "## Decoders: every layer, local engine, against a plain forward",
        [
            "model",
            "texts",
            "plain forward s (texts/s)",
            "store s (texts/s)",
            "store / forward throughput",
            "target >= 0.9",
            "store peak RSS MiB",
            "forward peak RSS MiB",
            "load (1 min) forward / store",
            "started (store)",
        ],
    )
    peaks = {}
    for r in runs:
        if r["arm"] == "local" and r.get("model") in DECODERS:
            key = (r["model"], r["n"])
            peaks[key] = max(peaks.get(key, 0), _peak(r))
    for model in DECODERS:
        for n in sorted({r["n"] for r in runs if r.get("model") == model}):
            arms = {
                arm: [
                    r
                    for r in runs
                    if r["arm"] == arm and r["n"] == n and r.get("model") == model
                ]
                for arm in ("forward", "local")
            }
            # one row per pair, in the order they ran: the k-th forward beside
            # the k-th store (run one after the other on the same machine)
            for f, s in zip(arms["forward"], arms["local"], strict=False):
                ratio = f["seconds"] / s["seconds"]
                lines.append(
                    _row(
                        model,
                        f"{n:,}",
                        f"{f['seconds']:.0f} ({n / f['seconds']:.1f})",
                        f"{s['seconds']:.0f} ({n / s['seconds']:.1f})",
                        f"{ratio:.3f}",
                        "yes" if ratio >= 0.9 else "NO",
                        _mib(_peak(s)),
                        _mib(f["driver_peak_rss"]),
                        f"{f['load_before'][0]} / {s['load_before'][0]}",
                        s.get("started", ""),
                    )
                )
    lines += _table(
        "",
        ["model", "store peak RSS MiB, 2,000 -> 10,000", "growth", "target <= 10 %"],
    )
    for model in DECODERS:
        if (model, 2000) in peaks and (model, 10_000) in peaks:
            a, b = peaks[(model, 2000)], peaks[(model, 10_000)]
            growth = 100 * (b / a - 1)
            lines.append(
                _row(
                    model,
                    f"{_mib(a)} -> {_mib(b)}",
                    f"{growth:+.1f} %",
                    "yes" if growth <= 10 else "NO",
                )
            )
    return lines


def _memory_lines(runs):
    lines = _table(
        "## Peak resident memory (MiB)",
        [
            "arm",
            "10,000 texts: driver / workers",
            "100,000 texts: driver / workers",
            "growth 10k -> 100k (largest process)",
            "< 1,536 MiB",
        ],
    )
    for arm in ("local", "ray", "dask", "plain"):
        at = {}
        for n in (10_000, 100_000):
            rs = [r for r in runs if r["arm"] == arm and r["n"] == n]
            rs = [r for r in rs if r.get("model") == "minilm"]
            if rs:
                r = rs[0]
                at[n] = (
                    r["driver_peak_rss"],
                    list(r.get("worker_peak_rss", {}).values()),
                )
        if len(at) < 2:
            continue
        cells = [
            f"{_mib(d)} / {', '.join(_mib(w) for w in ws) or '-'}"
            for d, ws in at.values()
        ]
        peak = {n: max([d] + ws) for n, (d, ws) in at.items()}
        growth = f"{100 * (peak[100_000] / peak[10_000] - 1):+.1f} %"
        below = "yes" if peak[100_000] < 1.5 * 2**30 else "NO"
        lines.append(_row(arm, cells[0], cells[1], growth, below))
    return lines


def _resume_lines(runs):
    lines = _table(
        "## Kill -9 half way, then the same call again",
        [
            "model",
            "texts",
            "killed",
            "shards before the kill",
            "rows",
            "unique row ids",
            "bitwise equal to the uninterrupted run",
            "re-run s",
            "first run",
            "load",
        ],
    )
    for r in runs:
        if r["arm"] == "kill_driver":
            lines.append(
                _row(
                    r.get("model", "minilm"),
                    f"{r['n']:,}",
                    "driver (local engine)",
                    f"{r['killed_after_shards']} of {r['shards']}",
                    f"{r['rows']:,}",
                    f"{r['unique_row_ids']:,}",
                    r["bitwise_equal"],
                    f"{r['rerun_s']:.0f}",
                    "killed",
                    _loads([r]),
                )
            )
        if r["arm"] == "kill_worker":
            first = (
                r.get("first_run_error") or "completed (Ray Data restarted the actor)"
            )
            lines.append(
                _row(
                    r.get("model", "minilm"),
                    f"{r['n']:,}",
                    f"one Ray actor (pid {r['killed_pid']})",
                    f"result {r['shards'] // 2} of {r['shards']}",
                    f"{r['rows']:,}",
                    f"{r['unique_row_ids']:,}",
                    r["bitwise_equal"],
                    f"{r['rerun_s']:.0f}",
                    first,
                    _loads([r]),
                )
            )
    return lines


def _started(run):
    """A run's start as seconds since the epoch (0 when it was not recorded)."""
    stamp = run.get("started")
    return time.mktime(time.strptime(stamp, STARTED_FORMAT)) if stamp else 0.0


def _chosen_lines(runs):
    lines = _table(
        "## Chosen layers only",
        [
            "model",
            "texts",
            "chosen (K of L)",
            "deepest",
            "bytes: chosen / all",
            "target K/L + 0.05",
            "time: chosen / full pass",
            "target (deepest+1)/L + 0.10",
            "calibration s",
            "selection s",
            "load (1 min) full pass / chosen",
        ],
    )
    for r in runs:
        full = [
            x
            for x in runs
            if x["arm"] == "local" and x["n"] == r["n"] and x.get("model") == r["model"]
        ]
        if r["arm"] != "chosen" or not full:
            continue
        # the full pass that started nearest to it (the same machine and load)
        f = min(full, key=lambda x: abs(_started(x) - _started(r)))
        K, L, D = len(r["chosen"]), r["n_hidden_states"], max(r["chosen"])
        size, ratio = r["bytes"] / f["bytes"], r["seconds"] / f["seconds"]
        size_goal, time_goal = K / L + 0.05, (D + 1) / L + 0.1
        lines.append(
            _row(
                r["model"],
                f"{r['n']:,}",
                f"{r['chosen']} ({K} of {L})",
                D,
                f"{size:.3f}",
                f"{size_goal:.3f} ({'yes' if size <= size_goal else 'NO'})",
                f"{ratio:.3f}",
                f"{time_goal:.3f} ({'yes' if ratio <= time_goal else 'NO'})",
                f"{r['calibration_s']:.0f}",
                f"{r['selection_s']:.1f}",
                f"{f['load_before'][0]} / {r['load_before'][0]}",
            )
        )
    return lines


def _head_lines(runs):
    lines = _table(
        "## Head on the chosen layers: out of core against in memory",
        [
            "head",
            "rows (train / test)",
            "accuracy out of core %",
            "accuracy in memory (scikit-learn) %",
            "difference, points",
            "passes",
            "fit s out of core / in memory",
            "peak RSS MiB out of core / in memory",
        ],
    )
    heads = [r for r in runs if r["arm"] == "head"]
    for n in sorted({r["n"] for r in heads}):
        for head in ("ridge", "logistic"):
            tags = (head, head + "_memory")  # on the chosen layers' store
            out, mem = (
                [r for r in heads if r["n"] == n and r["tag"] == t] for t in tags
            )
            if not (out and mem):  # else on every layer of the full store
                tags = (head + "_all7", head + "_memory_all7")
                out, mem = (
                    [r for r in heads if r["n"] == n and r["tag"] == t] for t in tags
                )
            if not (out and mem):
                continue
            o, m = out[-1], mem[-1]
            lines.append(
                _row(
                    f"{head} (layers {', '.join(map(str, o['layers']))})",
                    f"{o['train']:,} / {o['rows'] - o['train']:,}",
                    f"{100 * o['accuracy']:.2f}",
                    f"{100 * m['accuracy']:.2f}",
                    f"{100 * (o['accuracy'] - m['accuracy']):+.2f}",
                    o.get("n_passes"),
                    f"{o['fit_s']:.0f} / {m['fit_s']:.0f}",
                    f"{_mib(o['driver_peak_rss'])} / {_mib(m['driver_peak_rss'])}",
                )
            )
    return lines


def summarize():
    runs = _runs()
    corpus = json.loads((WORK / "corpus.json").read_text())
    head = [
        "# Scale benchmark (issues 35 and 45)",
        "",
        "Written by `python benchmarks/bench_scale.py --summarize` from",
        "`benchmarks/results/scale/runs.jsonl` (one line per arm, each arm in a",
        "fresh process).",
        f"Corpus: {corpus['rows']:,} rows from {', '.join(corpus['sets'])} (BBC",
        f"News split into sentences); {corpus['distinct_texts']:,} distinct texts,",
        "repeats marked with their occurrence number so that no arm saves work by",
        f"deduplicating; {corpus['classes']} classes (`<set>:<label>`).",
        "Machine: 2 cores, shared with other jobs for some arms (each row gives",
        "the load averages before and after it); OMP_WAIT_POLICY=PASSIVE in every",
        "arm; torch threads: forward, plain and local 2, Ray and Dask 2 workers of",
        "1 thread. `forward` is the floor: a plain transformers forward of the",
        "batches a local store runs (the same shards, longest-first batches under",
        "the same token budget), with no pooling and no file.",
        "",
        machine_lines(r.get("machine") for r in runs),
    ]
    sections = (_throughput_lines, _decoder_lines, _memory_lines, _resume_lines)
    sections += (_chosen_lines, _head_lines)
    lines = head + [line for part in sections for line in _or_none(part(runs))]
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _or_none(lines):
    """A section with no run says so instead of an empty table."""
    if len(lines) == 5:  # the title and the table's header only
        return [*lines[:3], "Not measured yet (no run in runs.jsonl)."]
    return lines


def heads(sizes, model):
    store = WORK / "stores" / f"{model}_local_{max(sizes)}_chosen"
    for n in sizes:
        for head in ("ridge", "logistic"):
            for memory in (False, True):
                extra = ["--store", str(store), "--head-kind", head]
                extra += ["--in-memory"] if memory else []
                spawn(
                    "head",
                    n,
                    model=model,
                    tag=f"{head}{'_memory' if memory else ''}",
                    extra=extra,
                )


if __name__ == "__main__":
    main()
