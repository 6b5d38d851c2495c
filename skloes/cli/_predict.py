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


def _load(folder, trust_remote_code):
    from skloes.models._loading import RemoteCodeError
    from skloes.probe import load_probe

    try:
        return load_probe(folder, trust_remote_code=trust_remote_code)
    except RemoteCodeError as exc:  # the option, not the Python parameter
        raise UserError(
            exc.message(None, "pass --trust-remote-code only if you trust it")
        ) from None
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UserError(_first_line(exc).removeprefix("load_probe: ")) from None


def _configure(probe, args):
    """Show a progress bar; the user's batch size and device, if given (a
    probe gives its settings to its extractor, which resolves the device
    again and reloads the model when needed)."""
    params = {"verbose": 1}
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    if args.device is not None:
        params["device"] = args.device
    if hasattr(probe, "pipeline_"):
        probe.set_params(**params)
    else:
        probe[0].set_params(**params)


def _rows(probe, texts):
    """Header and rows: the prediction, then each class's probability when
    the probe's head gives probabilities (a note says when it does not)."""
    prediction = probe.predict(texts)
    header, columns = ["prediction"], [prediction]
    if hasattr(probe, "classes_"):
        if hasattr(probe, "predict_proba"):
            proba = probe.predict_proba(texts)
            header += [f"proba_{c}" for c in np.asarray(probe.classes_).tolist()]
            columns += list(proba.T)
        else:
            print(
                f"{PROG}: note: the probe's final estimator "
                f"({type(_final_step(probe)).__name__}) gives no probabilities; "
                "writing predictions only",
                file=sys.stderr,
            )
    values = [np.asarray(c).tolist() for c in columns]
    return header, zip(*values, strict=True)


def _final_step(probe):
    return probe.estimator_ if hasattr(probe, "estimator_") else probe[-1]


def run_predict(args):
    """Run ``skloes predict`` for parsed arguments."""
    start = time.perf_counter()
    out = _check_out(args.out, args.force)
    texts = read_texts(args.data, args.text_column)
    probe = _load(args.probe_dir, args.trust_remote_code)
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
