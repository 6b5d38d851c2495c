"""What the store's checks cost (issue 42): ``LayerStore.verify()`` and reads
of a 100,000-row store, this checkout against ``main``, side by side.

The store is synthetic (random float32 layers written through the store's own
shard writer, :func:`skloes.scale._sink.write_shard`; no model), in the
format both versions read. Each arm runs in a fresh process pinned to one CPU
(``taskset -c 0``, one thread for BLAS and OpenMP) that imports its own copy
of skloes (``main`` exported with ``git archive`` into a temporary folder);
the arms alternate round by round (old first in even rounds, new first in
odd ones). Each round times ``LayerStore(path).verify()``
cold (the first call of the process, with an empty digest record: every byte
hashed) and warm (the median of 5 more calls: the hashes memoised, so the
footers, schemas and manifest are what is checked), opening the store, and
the reads (``read()`` of every row, and of 2,000 scattered rows) after one
warm-up, and one shard's opening for a read (its footer checked, the median of
50). The files are in the page cache for both arms (written just
before). The load average is recorded before and after.

Usage::

    python benchmarks/bench_store_verify.py [--rows 100000] [--layers 2]
        [--dim 384] [--rounds 7] [--base main]

Prints the machine (``benchmarks/_machine.py``), then one JSON line per
measure: the median and the spread (min, max) of each arm in seconds, and the
ratio new/old of the medians.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _machine import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARD = 8192

ARM = r"""
import json, sys, time
import numpy as np
from _machine import machine
from skloes.scale import LayerStore
path = sys.argv[1]
def once(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start
def verify():
    LayerStore(path).verify()
# cold: the first verify of this process, with an empty digest record
# (SKLOES_HOME is a fresh folder), hashes every byte; warm: verify again,
# the hashes memoised, so only the footers, schemas and manifest are checked
cold = once(verify)
warm = float(np.median([once(verify) for _ in range(5)]))
store = LayerStore(path)
rows = np.sort(np.random.default_rng(0).choice(store.n_rows, 2000, replace=False))
store.read()  # warm-up
print(json.dumps({
    "verify_cold": cold,
    "verify_warm": warm,
    "read_all": once(store.read),
    "read_rows": once(lambda: store.select(rows=rows).read()),
    "open": float(np.median([once(lambda: LayerStore(path)) for _ in range(5)])),
    # what each read adds per shard it opens: the footer (and, new, the
    # schema's layout and column types) checked against the manifest
    "open_shard": float(np.median(
        [once(lambda: store._open(store._shards[1])) for _ in range(50)]
    )),
}))
"""


def build_store(folder, n_rows, n_layers, dim):
    """A complete store of random float32 layers, written shard by shard."""
    sys.path.insert(0, str(ROOT))
    from skloes.core._store import new_manifest, shard_table, write_manifest
    from skloes.scale._sink import write_shard

    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    layers = list(range(n_layers))
    manifest = new_manifest(
        model={"reference": "synthetic", "fingerprint": "0" * 64, "n_hidden_states": 7},
        extraction={"pooling": "mean"},
        layers=layers,
        dim=dim,
        dtype="float32",
        columns=["label"],
        id_column=None,
        shard_size=SHARD,
    )
    manifest["layer_dtypes"] = ["float32"] * n_layers
    import pyarrow as pa

    for i, start in enumerate(range(0, n_rows, SHARD)):
        stop = min(start + SHARD, n_rows)
        stack = rng.normal(size=(n_layers, stop - start, dim)).astype(np.float32)
        labels = {"label": pa.array([f"c{j % 5}" for j in range(start, stop)])}
        table = shard_table(
            np.arange(start, stop), stack, layers, ["float32"] * n_layers, labels
        )
        footer = {"digest": manifest["digest"], "index": i, "input": f"in{i}"}
        footer["first_row"] = start
        record = write_shard(folder, i, table, footer)
        record.update(input=f"in{i}", first_row=start)
        manifest["shards"].append(record)
    manifest.update(complete=True, n_rows=n_rows)
    write_manifest(folder, manifest)


def export_base(base, into):
    """``base``'s skloes package, exported into ``into`` (no worktree)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", base, "skloes"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def run_arm(code_root, store):
    home = tempfile.mkdtemp(prefix="skloes-bench-home-")
    env = {
        **os.environ,
        "SKLOES_HOME": home,
        "PYTHONPATH": str(code_root),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    out = subprocess.run(
        [*pin, sys.executable, "-c", ARM, str(store)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stdout
    shutil.rmtree(home, ignore_errors=True)
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--base", default="main")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skloes-bench-verify-") as tmp:
        tmp = Path(tmp)
        store = tmp / "store"
        build_store(store, args.rows, args.layers, args.dim)
        (tmp / "old").mkdir()
        export_base(args.base, tmp / "old")
        arms = {"old": tmp / "old", "new": ROOT}
        times = {arm: [] for arm in arms}
        load_before = os.getloadavg()
        for i in range(args.rounds):  # ABBA: neither arm always runs first
            for arm in ("old", "new") if i % 2 == 0 else ("new", "old"):
                times[arm].append(run_arm(arms[arm], store))
        load_after = os.getloadavg()
        size = sum(p.stat().st_size for p in store.iterdir())
    print(json.dumps({"machine": machine()}))
    measures = ("verify_cold", "verify_warm", "open", "open_shard", "read_all")
    for measure in (*measures, "read_rows"):
        row = {"measure": measure, "rows": args.rows, "layers": args.layers}
        row.update(dim=args.dim, store_mib=round(size / 2**20, 1))
        for arm in arms:
            values = [t[measure] for t in times[arm]]
            row[arm] = {
                "median_s": round(float(np.median(values)), 6),
                "min_s": round(min(values), 6),
                "max_s": round(max(values), 6),
            }
        row["ratio_new_old"] = round(row["new"]["median_s"] / row["old"]["median_s"], 3)
        row["rounds"] = args.rounds
        row["loadavg_before_after"] = [
            round(load_before[0], 2),
            round(load_after[0], 2),
        ]
        print(json.dumps(row))


if __name__ == "__main__":
    main()
