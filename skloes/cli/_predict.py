"""``skloes predict``: a saved probe's predictions for every text of a file."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import io
import os
import sys
import time
from pathlib import Path

import numpy as np

from skloes.cli._args import UserError, _quiet_libraries
from skloes.cli._data import read_texts
from skloes.core._contract import first_line

PROG = "skloes predict"


def _check_out(out, force):
    if out is None:
        return None
    from skloes.core._atomic import foreign_problem

    path = Path(out).expanduser()
    if path.is_dir() and not path.is_symlink():
        raise UserError(f"--out {out!r} is a folder; give a file name")
    problem = foreign_problem(path)
    if problem:  # never written through a link, nor into a pipe
        raise UserError(
            f"--out {out!r} {problem}; skloes writes only regular files: give "
            "another file name"
        )
    if path.exists() and not force:
        raise UserError(f"--out {out!r} exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise UserError(f"--out {out!r}: folder {str(path.parent)!r} does not exist")
    return path


def _load(args):
    """The saved probe: its exported graph (no torch, no scikit-learn for a
    linear head) or the torch pipeline, as the folder's manifest says."""
    import skloes.probe_folder as probe_folder

    try:
        manifest = probe_folder.read_manifest(args.probe_dir, "load_probe")
    except ValueError as exc:
        raise UserError(first_line(exc).removeprefix("load_probe: ")) from None
    exported = args.runtime == "onnx" or (
        args.runtime == "auto" and "export" in manifest
    )
    if exported:
        return _load_exported(args, manifest)
    probe = _load_torch(args)
    _configure(probe, args)
    return probe


def _load_exported(args, manifest):
    import skloes.probe_folder as probe_folder
    from skloes.serving import open_exported

    if args.device is not None:
        raise UserError("--device applies to the torch runtime only")
    try:
        export = probe_folder.export_entry(manifest, args.probe_dir, "load_probe")
        return open_exported(
            args.probe_dir,
            export,
            n_threads=args.threads,
            batch_size=args.batch_size,
            owner="load_probe",
        )
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UserError(first_line(exc).removeprefix("load_probe: ")) from None


def _load_torch(args):
    from skloes.models._loading import RemoteCodeError
    from skloes.probe import load_probe

    _quiet_libraries()
    try:
        return load_probe(
            args.probe_dir, runtime="torch", trust_remote_code=args.trust_remote_code
        )
    except RemoteCodeError as exc:  # the option, not the Python parameter
        raise UserError(
            exc.message(None, "pass --trust-remote-code only if you trust it")
        ) from None
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UserError(first_line(exc).removeprefix("load_probe: ")) from None


def _configure(probe, args):
    """Show a progress bar; the user's batch size, device and threads, if
    given (a probe gives its settings to its extractor, which resolves the
    device again and reloads the model when needed)."""
    params = {"verbose": 1}
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    if args.device is not None:
        params["device"] = args.device
    if hasattr(probe, "pipeline_"):
        probe.set_params(**params)
    else:
        probe[0].set_params(**params)
    if args.threads is not None:
        from skloes.core._torch import torch

        torch.set_num_threads(args.threads)


def _rows(probe, texts):
    """Header and rows: the prediction, then each class's probability when
    the probe's head gives probabilities (a note says when it does not)."""
    if hasattr(probe, "predict_with_proba"):  # one pass of the graph
        prediction, proba = probe.predict_with_proba(texts)
        if proba is None and probe.classes_ is not None:
            _no_proba_note(probe.head_.name)
    else:
        prediction = probe.predict(texts)
        proba = None
        if getattr(probe, "classes_", None) is not None:
            if hasattr(probe, "predict_proba"):
                proba = probe.predict_proba(texts)
            else:
                _no_proba_note(type(_final_step(probe)).__name__)
    header, columns = ["prediction"], [prediction]
    if proba is not None:
        header += [f"proba_{c}" for c in np.asarray(probe.classes_).tolist()]
        columns += list(proba.T)
    values = [np.asarray(c).tolist() for c in columns]
    return header, zip(*values, strict=True)


def _no_proba_note(name):
    print(
        f"{PROG}: note: the probe's final estimator ({name}) gives no "
        "probabilities; writing predictions only",
        file=sys.stderr,
    )


def _final_step(probe):
    return probe.estimator_ if hasattr(probe, "estimator_") else probe[-1]


def run_predict(args):
    """Run ``skloes predict`` for parsed arguments."""
    from skloes.cli._scale import at_scale, run_predict_at_scale

    if at_scale(args):  # a .parquet --out, or an --engine: skloes.scale
        return run_predict_at_scale(args)
    if args.id_column is not None:
        raise UserError("--id-column needs a .parquet --out (or an --engine)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    out = _check_out(args.out, args.force)
    texts = read_texts(args.data, args.text_column)
    probe = _load(args)
    try:
        header, rows = _rows(probe, list(texts))
    except (ValueError, TypeError) as exc:
        raise UserError(first_line(exc)) from None
    handle = sys.stdout if out is None else io.StringIO(newline="")
    writer = csv.writer(handle)
    writer.writerow(header)
    writer.writerows(rows)
    if out is not None:  # written whole: never half a file, never through a link
        from skloes.core._atomic import ForeignFile, write_bytes_whole

        try:
            data = handle.getvalue().encode("utf-8")
            write_bytes_whole(out, data)
        except (ForeignFile, UnicodeEncodeError) as exc:
            raise UserError(f"--out {args.out!r}: {first_line(exc)}") from None
        except OSError as exc:
            raise UserError(
                f"--out {args.out!r} cannot be written "
                f"({exc.strerror or type(exc).__name__})"
            ) from None
    if out is not None:
        print(
            f"{len(texts)} predictions written to {out} in "
            f"{time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
