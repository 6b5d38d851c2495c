"""``skloes predict``: a saved probe's predictions for every text of a file."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

from skloes.cli._args import UserError, _first_line
from skloes.cli._data import read_texts

PROG = "skloes predict"


def _check_out(out, force):
    if out is None:
        return None
    path = Path(out).expanduser()
    if path.is_dir():
        raise UserError(f"--out {out!r} is a folder; give a file name")
    if path.exists() and not force:
        raise UserError(f"--out {out!r} exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise UserError(f"--out {out!r}: folder {str(path.parent)!r} does not exist")
    return path


def _load(folder):
    from skloes.probe import load_probe

    try:
        return load_probe(folder)
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UserError(_first_line(exc)) from None


def _configure(probe, args):
    """Show a progress bar; the user's batch size and device, if given."""
    extractor = getattr(probe, "pipeline_", probe)[0]
    params = {"verbose": 1}
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    if args.device is not None:
        params["device"] = args.device
    extractor.set_params(**params)
    if args.device is not None:  # resolved again, as fit would
        from skloes.core._torch import resolve_device

        try:
            extractor.device_ = resolve_device(args.device, owner=PROG)
        except ValueError as exc:
            raise UserError(_first_line(exc)) from None
        extractor._drop_loaded()


def _rows(probe, texts):
    """Header and rows: the prediction, then each class's probability."""
    prediction = probe.predict(texts)
    header, columns = ["prediction"], [prediction]
    if hasattr(probe, "predict_proba") and hasattr(probe, "classes_"):
        proba = probe.predict_proba(texts)
        header += [f"proba_{c}" for c in np.asarray(probe.classes_).tolist()]
        columns += list(proba.T)
    values = [np.asarray(c).tolist() for c in columns]
    return header, zip(*values, strict=True)


def run_predict(args):
    """Run ``skloes predict`` for parsed arguments."""
    start = time.perf_counter()
    out = _check_out(args.out, args.force)
    texts = read_texts(args.data, args.text_column)
    probe = _load(args.probe_dir)
    _configure(probe, args)
    try:
        header, rows = _rows(probe, list(texts))
    except (ValueError, TypeError) as exc:
        raise UserError(_first_line(exc)) from None
    handle = sys.stdout if out is None else open(out, "w", newline="", encoding="utf-8")
    try:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    finally:
        if out is not None:
            handle.close()
    if out is not None:
        print(
            f"{len(texts)} predictions written to {out} in "
            f"{time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
