"""The ``skloes`` command line: ``skloes probe`` runs the main job,
``skloes cache info|prune`` shows or bounds a hidden-states cache.

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
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]

BUILTIN_DATA = ("rotten_tomatoes", "bbc_news", "chatterbot_langid")
# The main job: the offline SmolLM2 decoder, where intermediate layers matter most
# (about 50 s for 500 texts on 2 idle cores once the GGUF file is converted).
DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_MAX_SAMPLES = 500
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


def _positive_int(option):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{option} must be a positive int; got {text!r}"
            )
        return value
    return parse


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
            "SmolLM2-135M-Instruct decoder (31 hidden states) on a Rotten "
            "Tomatoes subsample."
        ),
    )
    probe.add_argument("--model", default=DEFAULT_MODEL, metavar="ID_OR_PATH",
                       help="Hugging Face id, local folder or .gguf file; ids of "
                       "installed offline bundles need no network "
                       f"(default: {DEFAULT_MODEL})")
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
    probe.add_argument("--force", action="store_true",
                       help="overwrite a report (layers.csv, profile.png, "
                       "selection.json) already in --out")
    probe.add_argument("--device", default="auto", metavar="D",
                       help="torch device: auto, cpu, cuda, mps (default: auto)")
    probe.add_argument("--batch-size", type=_positive_int("--batch-size"), default=32,
                       metavar="B",
                       help="texts per forward pass (default: 32)")
    probe.add_argument("--max-length", type=_positive_int("--max-length"), default=128,
                       metavar="T",
                       help="tokens kept per text (default: 128)")
    probe.add_argument("--seed", type=int, default=0,
                       help="random seed of the subsample, folds and selection")
    _add_cache_parser(sub)
    models = sub.add_parser(
        "models", help="list the offline model bundles; --prepare readies them",
        description="List the model bundles that run offline (installed or not, "
        "with the pip line that installs them). With --prepare, convert or "
        "reassemble every installed bundle into the user cache now (once; "
        "otherwise this happens on first use).",
    )
    models.add_argument("--prepare", action="store_true",
                        help="prepare every installed bundle now")
    return parser


def _add_cache_parser(sub):
    cache = sub.add_parser(
        "cache", help="show the size of a hidden-states cache or prune it",
        description="Show the size of a hidden-states cache folder (the `cache` "
        "of HiddenStatesTransformer) per settings, or prune it.",
    )
    actions = cache.add_subparsers(dest="action", parser_class=_Parser)
    info = actions.add_parser("info", help="entries and bytes per settings")
    info.add_argument("path", metavar="DIR", help="the cache folder")
    prune = actions.add_parser(
        "prune", help="remove old entries, then the oldest down to a size",
        description="Remove entries written more than --older-than ago, then the "
        "oldest until the cache holds at most --max-bytes.",
    )
    prune.add_argument("path", metavar="DIR", help="the cache folder")
    prune.add_argument("--max-bytes", type=_size, default=None, metavar="SIZE",
                       help="size bound, e.g. 500M, 2G (suffixes K, M, G, T: "
                       "powers of 1024)")
    prune.add_argument("--older-than", type=_age, default=None, metavar="AGE",
                       help="age bound, e.g. 3600, 12h, 30d, 2w")


_SIZE_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _quantity(text, units, option, example):
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([A-Za-z]?)\s*", text)
    unit = match and match.group(2)
    if unit is not None and unit not in units:
        unit = unit.upper() if unit.upper() in units else None
    if not match or unit is None:
        raise argparse.ArgumentTypeError(
            f"{option} must be a non-negative number with an optional unit "
            f"({', '.join(u for u in units if u)}), e.g. {example}; got {text!r}"
        )
    return int(float(match.group(1)) * units[unit])


def _size(text):
    return _quantity(text, _SIZE_UNITS, "--max-bytes", "500M")


def _age(text):
    return _quantity(text, _AGE_UNITS, "--older-than", "30d")


def run_models(args):
    """Run ``skloes models [--prepare]`` for parsed arguments."""
    from skloes._registry import bundle_path, offline_models, skloes_home

    if args.prepare:
        _quiet_libraries()
    for model in offline_models():
        state = "installed" if model.installed else f"not installed: {model.install}"
        print(f"{model.name:8} {model.hub_id:42} {state}")
        if args.prepare and model.installed:
            start = time.perf_counter()
            path = bundle_path(model, owner="skloes models")
            print(f"{'':8} ready in {path} ({time.perf_counter() - start:.1f} s)")
    if args.prepare:
        print(f"user cache: {skloes_home()}")


def run_cache(args):
    """Run ``skloes cache info|prune`` for parsed arguments."""
    from skloes._cache import cache_info, prune_cache

    if args.action is None:
        raise UserError("say which action: skloes cache info or prune DIR")
    try:
        if args.action == "prune":
            if args.max_bytes is None and args.older_than is None:
                raise UserError("prune needs --max-bytes or --older-than (or both)")
            removed = prune_cache(args.path, max_bytes=args.max_bytes,
                                  older_than=args.older_than)
            print(f"removed {removed['n_entries']} entries "
                  f"({_human(removed['n_bytes'])}) from {args.path}")
        info = cache_info(args.path)
    except ValueError as exc:
        raise UserError(_first_line(exc)) from None
    print(f"{info['path']}: {info['n_entries']} entries, {_human(info['n_bytes'])}")
    for group in sorted(info["settings"], key=lambda g: -g["n_bytes"]):
        s = group["settings"] or {}
        what = ", ".join(f"{k}={s[k]}" for k in ("pooling", "max_length", "dtype")
                         if k in s)
        layers = s.get("layers")
        if layers is not None:
            what += f", {len(layers)} layers"
        print(f"  {group['digest']}  {group['n_entries']:>8} entries  "
              f"{_human(group['n_bytes']):>9}  {what}")


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


# --------------------------------------------------------------------------
# The report folder
# --------------------------------------------------------------------------
REPORT_FILES = ("layers.csv", "profile.png", "selection.json")


def check_out(out, force):
    """Fail before any work when the report cannot be written to ``out``.

    ``out`` must be a folder or not exist yet (it is created only when the
    report is written); its parent chain must be writable; a report already
    there is never overwritten without ``force``.
    """
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--out {out!r} is a file, not a folder")
    existing = [name for name in REPORT_FILES if (folder / name).exists()]
    if existing and not force:
        raise UserError(
            f"--out {out!r} already holds {', '.join(existing)}; pass --force to "
            "overwrite them or choose another --out"
        )
    probe = folder
    while not probe.exists():  # the nearest existing folder must take files
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"--out {out!r}: {str(probe)!r} is a file, not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".skloes-write-test-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise UserError(f"--out {out!r} is not writable: {exc}") from None
    for name in existing if force else ():
        if not os.access(folder / name, os.W_OK):
            raise UserError(f"--out {out!r}: {name} is not writable")


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
    classes = classes.tolist()  # 'a' and 1, not np.str_('a') and np.int64(1)
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
        max_length=args.max_length, device=args.device, verbose=1,
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
    check_out(args.out, args.force)
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
        if args.command == "cache":
            run_cache(args)
            return 0
        if args.command == "models":
            run_models(args)
            return 0
        _quiet_libraries()
        run_probe(args)
    except UserError as exc:
        command = argv_command(argv)
        prog = f"skloes {command}" if command in ("cache", "models") else PROG
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def argv_command(argv):
    """The sub-command named in ``argv`` (``sys.argv`` when None), or None."""
    words = sys.argv[1:] if argv is None else argv
    return next((w for w in words if not w.startswith("-")), None)


def _quiet_libraries():
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass
