"""``skloes extract`` and ``skloes predict`` at scale: the engines from the shell.

``skloes extract`` writes a layer store (:func:`skloes.scale.extract_to_store`);
``skloes predict DIR --out preds.parquet`` (or with ``--engine``) predicts a
file or folder of any size with a saved probe
(:func:`skloes.scale.predict_to_parquet`). Both resume when run again.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
import time
from pathlib import Path

from skloes.cli._args import (
    UserError,
    _quiet_libraries,
    option_values,
)
from skloes.core._contract import first_line

__all__ = ["at_scale", "run_extract", "run_predict_at_scale"]


def at_scale(args) -> bool:
    """Whether ``skloes predict`` runs at scale: an engine, or a Parquet out."""
    out = getattr(args, "out", None) or ""
    return args.engine is not None or out.lower().endswith((".parquet", ".pq"))


# The options that extract_to_store and predict_to_parquet take as they are.
_EXTRACT_OPTIONS = (
    "model",
    "text_column",
    "id_column",
    "pooling",
    "max_length",
    "batch_size",
    "dtype",
    "shard_size",
    "device",
    "precision",
)
_PREDICT_OPTIONS = (
    "text_column",
    "id_column",
    "runtime",
    "batch_size",
    "trust_remote_code",
)


def _engine_kw(args):
    return {
        "engine": args.engine or "local",
        **option_values(args, "address", "n_workers", "threads_per_worker", "num_gpus"),
    }


def _layers(text):
    """``--layers``: all, a list of ints, or a saved probe's folder."""
    if text == "all":
        return "all"
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        pass
    if not Path(text).expanduser().is_dir():
        raise UserError(
            f"--layers must be 'all', a list like 6,14,22, or a saved probe folder; "
            f"got {text!r}"
        )
    return str(Path(text).expanduser())


def _call_engine(function, *args, **kwargs):
    """``function(*args, **kwargs)``, its errors as one-line user errors."""
    try:
        return function(*args, **kwargs)
    except (ValueError, TypeError, OSError, ImportError, RuntimeError) as exc:
        text = first_line(exc)
        for prefix in ("extract_to_store: ", "predict_to_parquet: "):
            text = text.removeprefix(prefix)
        raise UserError(text) from None


def run_extract(args):
    """Run ``skloes extract`` for parsed arguments."""
    from skloes.scale import extract_to_store

    _quiet_libraries()  # sets TOKENIZERS_PARALLELISM too
    start = time.perf_counter()
    columns = [c for c in (args.columns or "").split(",") if c]
    store = _call_engine(
        extract_to_store,
        args.data,
        args.store,
        layers=_layers(args.layers),
        columns=columns,
        **option_values(args, *_EXTRACT_OPTIONS),
        **_engine_kw(args),
    )
    print(
        f"{store.n_rows} rows, layers {store.layers.tolist()} of width {store.dim}, "
        f"in {store.n_shards} shards ({store.nbytes() / 2**20:.1f} MiB) written to "
        f"{args.store} in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )


def run_predict_at_scale(args):
    """Run ``skloes predict`` with a Parquet ``--out`` or an ``--engine``."""
    from skloes.scale import predict_to_parquet

    if args.out is None or not args.out.lower().endswith((".parquet", ".pq")):
        raise UserError("--engine writes a .parquet file; give --out FILE.parquet")
    if args.device is not None:
        raise UserError("--device: at scale each worker uses the probe's device")
    from skloes.core._atomic import foreign_problem

    if Path(args.out).expanduser().is_dir():
        raise UserError(f"--out {args.out!r} is a folder; give a file name")
    problem = foreign_problem(Path(args.out).expanduser())
    if problem:  # never written through a link, nor into a pipe
        raise UserError(
            f"--out {args.out!r} {problem}; skloes writes only regular files: give "
            "another file name"
        )
    if Path(args.out).expanduser().exists() and not args.force:
        raise UserError(f"--out {args.out!r} exists; pass --force to overwrite it")
    _quiet_libraries()  # sets TOKENIZERS_PARALLELISM too
    start = time.perf_counter()
    kw = _engine_kw(args)
    if args.threads is not None and kw["threads_per_worker"] is None:
        kw["threads_per_worker"] = args.threads
    out = _call_engine(
        predict_to_parquet,
        args.probe_dir,
        args.data,
        args.out,
        overwrite=args.force,
        **option_values(args, *_PREDICT_OPTIONS),
        **kw,
    )
    print(
        f"predictions written to {out} in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
