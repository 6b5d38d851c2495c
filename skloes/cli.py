"""The ``skloes`` command line: ``skloes probe`` runs the main job.

``skloes probe`` extracts every layer of a model over a labelled data set,
cross-validates a probe on each layer, computes the layer metrics, selects
layers with LOES, compares the fused layers with the last layer, the best
single layer and other baselines, prints the tables and writes a report
folder (``layers.csv``, ``profile.png``, ``selection.json``).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]

BUILTIN_DATA = ("rotten_tomatoes", "bbc_news", "chatterbot_langid")
DEFAULT_MAX_SAMPLES = 1000
PROG = "skloes probe"


class UserError(Exception):
    """A mistake in the command line or its inputs: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError(message)


def _int_or_word(flag, minimum, word, word_value):
    """An argparse type: an int ``>= minimum``, or ``word`` (read as ``word_value``)."""

    def parse(text):
        if text == word:
            return word_value
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be an int >= {minimum} or {word!r}; got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"{flag} must be >= {minimum}; got {value}"
            )
        return value

    return parse


_n_layers_value = _int_or_word("--n-layers-to-select", 1, "auto", "auto")
_max_samples = _int_or_word("--max-samples", 10, "all", None)


def build_parser():
    """The argument parser of the ``skloes`` command.

    Returns
    -------
    parser : argparse.ArgumentParser
        With the ``probe`` sub-command.

    Examples
    --------
    >>> from skloes.cli import build_parser
    >>> args = build_parser().parse_args(["probe", "--n-layers-to-select", "3"])
    >>> args.n_layers_to_select, args.data, args.pooling
    (3, 'rotten_tomatoes', 'mean')
    """
    parser = _Parser(
        prog="skloes",
        description="skloes: scikit-learn tools for the intermediate layers of "
        "foundation models.",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    probe = sub.add_parser(
        "probe", help="probe every layer of a model on a labelled data set",
        description=(
            "Probe every layer of a model on a labelled data set, select layers "
            "with LOES and write a report. With no arguments: the offline "
            "all-MiniLM-L6-v2 on a Rotten Tomatoes subsample."
        ),
    )
    probe.add_argument("--model", default=None, metavar="ID_OR_PATH",
                       help="Hugging Face id or local folder (default: offline MiniLM)")
    probe.add_argument("--data", default="rotten_tomatoes", metavar="NAME_OR_FILE",
                       help=f"built-in data set ({', '.join(BUILTIN_DATA)}) or a "
                       ".csv/.tsv/.jsonl/.parquet file (default: rotten_tomatoes)")
    probe.add_argument("--text-column", default="text", metavar="C",
                       help="text column of a data file (default: text)")
    probe.add_argument("--label-column", default="label", metavar="C",
                       help="label column of a data file (default: label)")
    probe.add_argument("--pooling", default="mean",
                       choices=["mean", "cls", "first", "last", "max"],
                       help="token pooling (default: mean)")
    probe.add_argument("--n-layers-to-select", type=_n_layers_value, default=4,
                       metavar="K|auto",
                       help="number of layers LOES selects, or 'auto' for "
                       "cross-validated (default: 4)")
    probe.add_argument("--max-samples", type=_max_samples, default=DEFAULT_MAX_SAMPLES,
                       metavar="N", help="stratified subsample size, or 'all' "
                       f"(default: {DEFAULT_MAX_SAMPLES})")
    probe.add_argument("--token-metrics", action="store_true",
                       help="also compute prompt entropy and curvature (token level, "
                       "same forward pass)")
    probe.add_argument("--nested", action="store_true",
                       help="select layers inside each CV fold (unbiased, slower)")
    probe.add_argument("--out", default="skloes_report", metavar="DIR",
                       help="report folder (default: ./skloes_report)")
    probe.add_argument("--device", default="auto", metavar="D",
                       help="torch device: auto, cpu, cuda, mps (default: auto)")
    probe.add_argument("--batch-size", type=int, default=32, metavar="B",
                       help="texts per forward pass (default: 32)")
    probe.add_argument("--max-length", type=int, default=128, metavar="T",
                       help="tokens kept per text (default: 128)")
    probe.add_argument("--seed", type=int, default=0,
                       help="random seed of the subsample, folds and selection")
    return parser


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
def _read_table(path, text_column, label_column):
    from skloes.utils._optional import import_optional

    pd = import_optional("pandas", extra="plot")
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
        elif suffix in (".jsonl", ".json"):
            frame = pd.read_json(path, lines=suffix == ".jsonl")
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            raise UserError(
                f"data file {str(path)!r} has an unknown extension {suffix!r}; use "
                ".csv, .tsv, .jsonl, .json or .parquet"
            )
    except UserError:
        raise
    except ImportError as exc:
        raise UserError(f"cannot read {str(path)!r}: {exc}") from None
    except Exception as exc:  # a malformed file: pandas' own message
        raise UserError(f"cannot read {str(path)!r}: {_first_line(exc)}") from None
    for column, option in ((text_column, "--text-column"),
                           (label_column, "--label-column")):
        if column not in frame.columns:
            raise UserError(
                f"{option} {column!r} is not a column of {str(path)!r}; columns: "
                f"{', '.join(map(str, frame.columns[:20]))}"
            )
    frame = frame[[text_column, label_column]].dropna()
    if len(frame) == 0:
        raise UserError(f"{str(path)!r} has no row with both a text and a label")
    texts = frame[text_column].astype(str).to_numpy(dtype=object)
    return texts, frame[label_column].to_numpy()


def _subsample(texts, labels, n, seed):
    from sklearn.model_selection import train_test_split
    from sklearn.utils.multiclass import type_of_target

    if n is None or n >= len(texts):
        return texts, labels
    stratify = labels if type_of_target(labels) in ("binary", "multiclass") else None
    try:
        index, _ = train_test_split(np.arange(len(texts)), train_size=n,
                                    stratify=stratify, random_state=seed)
    except ValueError:  # a class too small to stratify: uniform draw
        index = np.random.RandomState(seed).choice(len(texts), n, replace=False)
    index = np.sort(index)
    return texts[index], labels[index]


def load_data(data, text_column, label_column, max_samples, seed):
    """Texts and labels of a built-in data set or a data file.

    Returns
    -------
    texts : ndarray of str objects
    labels : ndarray
    label_names : ndarray or None
    """
    from skloes import datasets

    if data in BUILTIN_DATA:
        try:
            bunch = datasets.load_dataset(data)
        except ImportError as exc:
            raise UserError(f"data set {data!r} is not installed: {exc}") from None
        texts, labels = _subsample(bunch.data, bunch.target, max_samples, seed)
        names = bunch.target_names
    else:
        path = Path(data).expanduser()
        if not path.exists():
            if path.suffix == "":
                raise UserError(
                    f"unknown data set {data!r}; use one of {', '.join(BUILTIN_DATA)} "
                    "or a data file"
                )
            raise UserError(f"data file {data!r} does not exist")
        texts, labels = _read_table(path, text_column, label_column)
        texts, labels = _subsample(texts, labels, max_samples, seed)
        names = None
    _check_labels(labels)
    return texts, labels, names


def _check_labels(labels):
    from sklearn.utils.multiclass import type_of_target

    kind = type_of_target(labels)
    if kind == "continuous":
        if len(labels) < 10:
            raise UserError(f"only {len(labels)} labelled rows; need at least 10")
        return
    if kind not in ("binary", "multiclass"):
        raise UserError(
            f"labels must be classes or one continuous target; got {kind} labels"
        )
    classes, counts = np.unique(labels, return_counts=True)
    if len(classes) < 2:
        raise UserError(f"the labels hold a single class ({classes[0]!r}); need 2+")
    if counts.min() < 2:
        raise UserError(
            f"class {classes[counts.argmin()]!r} has {counts.min()} sample; every "
            "class needs at least 2 (use more --max-samples or drop it)"
        )


# --------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------
def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _log(message):
    print(message, flush=True)


def _extract(args, texts):
    """Layer stack (and token metrics) of ``texts``, one forward pass each."""
    from skloes._hidden_states import HiddenStatesTransformer
    from skloes.metrics import TokenMetricPooling

    pooling = args.pooling
    token = None
    if args.token_metrics:
        token = TokenMetricPooling(pooling=args.pooling)
        pooling = token
    hst = HiddenStatesTransformer(
        args.model, pooling=pooling, batch_size=args.batch_size,
        max_length=args.max_length, device=args.device, progress=True,
    )
    try:
        hst.fit(texts)  # resolves the model folder, its config and the device
    except (ValueError, TypeError, OSError, ImportError) as exc:
        message = _first_line(exc)
        if not message.startswith(type(hst).__name__):  # e.g. a raw JSON error
            message = f"cannot load model {args.model or 'default'}: {message}"
        raise UserError(message) from None
    try:
        _ = hst.model_  # load now, so that a broken model is a user error
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UserError(
            f"cannot load model {args.model or hst.model_path_!r}: {_first_line(exc)}"
        ) from None
    if hst.modality_ != "text":
        raise UserError(f"model {hst.model_path_!r} takes {hst.modality_}, not text")
    stack = hst.transform(list(texts))
    if token is None:
        return hst, stack, None
    stack, metrics = token.split(stack, random_state=args.seed)
    return hst, stack, metrics


def run_probe(args):
    """Run the probe job for parsed arguments; returns the fitted report."""
    from skloes.report import LayerReport

    start = time.perf_counter()
    texts, labels, names = load_data(args.data, args.text_column, args.label_column,
                                     args.max_samples, args.seed)
    n_classes = len(np.unique(labels))
    _log(f"data: {args.data}, {len(texts)} texts, {n_classes} classes"
         + (f" ({', '.join(map(str, names))})" if names is not None else ""))
    hst, stack, token_metrics = _extract(args, texts)
    t_extract = time.perf_counter() - start
    _log(f"model: {hst.model_path_} ({stack.shape[0]} hidden states of width "
         f"{stack.shape[2]}, pooling {args.pooling}); extracted in {t_extract:.1f} s")
    report = LayerReport(
        n_layers_to_select=args.n_layers_to_select, nested=args.nested,
        random_state=args.seed, verbose=1,
    )
    report.fit(stack, labels, extra_metrics=token_metrics)
    folder = report.save(args.out)
    print(f"\nPer-layer table ({report.n_splits_}-fold CV {report.scoring_}; layer 0 "
          "= embedding output)")
    print(report.format_table())
    how = ("selected inside each CV fold" if args.nested else
           "selected on all rows, scored by CV")
    print(f"\nSelection summary (layers {how})")
    print(report.format_summary())
    s = report.summary()
    print(f"\nLOES layers {s['selected_layers']}: {s['fused_score']:.4f}  |  last "
          f"layer {s['n_layers'] - 1}: {s['last_layer_score']:.4f}  |  best single "
          f"layer {s['best_layer']}: {s['best_layer_score']:.4f}")
    total = time.perf_counter() - start
    print(f"report written to {os.fspath(folder)}/ (layers.csv, profile.png, "
          f"selection.json) in {total:.1f} s")
    return report


def main(argv=None):
    """Entry point of the ``skloes`` console script and ``python -m skloes``.

    Parameters
    ----------
    argv : list of str or None, default=None
        Arguments without the program name; None reads ``sys.argv``.

    Returns
    -------
    status : int
        0 on success, 2 on a user error (reported on one line).

    Examples
    --------
    >>> from skloes.cli import main
    >>> main(["probe", "--data", "no_such_data"])  # doctest: +SKIP
    skloes probe: error: unknown data set 'no_such_data'; use one of ...
    2
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        _quiet_libraries()
        run_probe(args)
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _quiet_libraries():
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass
