"""What every ``skloes`` command shares: its options, the one-line user error,
and quieting the libraries' own output."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import os

from skloes.core._fusion import DEFAULT_FUSION, FUSIONS
from skloes.core._pooling import POOLINGS

BUILTIN_DATA = (
    "rotten_tomatoes",
    "bbc_news",
    "chatterbot_langid",
    "trec6",
    "sms_spam",
    "vader_tweets3",
    "vader_nyt3",
    "vader_amazon3",
)
# The group column of the built-in sets that have one (``--group-column``).
BUILTIN_GROUPS = {"rotten_tomatoes": "movie", "vader_amazon3": "review"}


# The main job: the offline SmolLM2 decoder, where intermediate layers matter most
# (its time: the README's "Two commands").
DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


DEFAULT_MAX_SAMPLES = 500
# The LOES budget of ``skloes probe`` (``--n-layers-to-select``).
DEFAULT_N_LAYERS = 4


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


def _usable_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# The files ``--data`` reads (a folder holds them too, for predict and extract).
_DATA_FILES = ".csv/.tsv/.jsonl/.parquet"


# Every option that more than one command takes, declared once: a command adds
# it with ``_add_option(parser, name, **what_differs)``, what differs being
# mostly its default and its help (``%(default)s`` quotes the command's
# default). ``--out`` is not here: probe's is a report folder, predict's a
# file, two options under one name.
_SHARED_OPTIONS = {
    "--model": {"metavar": "ID_OR_PATH"},
    "--data": {
        "required": True,
        "metavar": "FILE_OR_FOLDER",
        "help": f"a {_DATA_FILES} file of texts, or a folder of them",
    },
    "--text-column": {
        "default": "text",
        "metavar": "C",
        "help": "text column (default: %(default)s)",
    },
    "--id-column": {"default": None, "metavar": "C"},
    "--pooling": {
        "default": "mean",
        "choices": list(POOLINGS),
        "help": "token pooling (default: %(default)s)",
    },
    "--max-length": {
        "type": _positive_int("--max-length"),
        "metavar": "T",
        "help": "tokens kept per text (default: %(default)s)",
    },
    "--batch-size": {
        "type": _positive_int("--batch-size"),
        "default": 32,
        "metavar": "B",
        "help": "texts per forward pass (default: %(default)s)",
    },
    "--device": {"default": "auto", "metavar": "D"},
    "--precision": {
        "default": "float32",
        "choices": ["float32", "bfloat16", "int8"],
        "help": "arithmetic of the forward pass (default: %(default)s)",
    },
    "--force": {"action": "store_true"},
    # the positional of ``skloes cache info`` and ``skloes cache prune``
    "path": {
        "metavar": "DIR",
        "nargs": "?",
        "default": None,
        "help": "the cache folder (default: the user model cache)",
    },
}


def _add_option(parser, name, **what_differs):
    """Add the shared option ``name`` (``_SHARED_OPTIONS``) to ``parser``."""
    parser.add_argument(name, **{**_SHARED_OPTIONS[name], **what_differs})


def build_parser():
    """The argument parser of the ``skloes`` command.

    Returns
    -------
    parser : argparse.ArgumentParser
        With the ``probe`` sub-command.

    Examples
    --------
    >>> from skloes.cli._args import build_parser
    >>> args = build_parser().parse_args(["probe", "--n-layers-to-select", "3"])
    >>> args.n_layers_to_select, args.data, args.pooling
    (3, 'rotten_tomatoes', None)
    """
    parser = _Parser(
        prog="skloes",
        description="skloes: scikit-learn tools for the intermediate layers of "
        "foundation models.",
    )
    from skloes.utils._version import VERSION

    parser.add_argument("--version", action="version", version=f"skloes {VERSION}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_probe_parser(sub)
    _add_predict_parser(sub)
    _add_extract_parser(sub)
    _add_cache_parser(sub)
    _add_models_parser(sub)
    return parser


def _add_probe_parser(sub):
    probe = sub.add_parser(
        "probe",
        help="probe every layer of a model on a labelled data set",
        description=(
            "Probe every layer of a model on a labelled data set, select layers "
            "with LOES and write a report. With no arguments: the offline "
            "SmolLM2-135M-Instruct decoder (31 hidden states) on a Rotten "
            "Tomatoes subsample."
        ),
    )
    _add_option(
        probe,
        "--model",
        default=DEFAULT_MODEL,
        help="Hugging Face id, local folder or .gguf file; ids of "
        "installed offline bundles need no network "
        f"(default: {DEFAULT_MODEL})",
    )
    _add_option(
        probe,
        "--data",
        required=False,
        default="rotten_tomatoes",
        metavar="NAME_OR_FILE",
        help=f"built-in data set ({', '.join(BUILTIN_DATA)}), a "
        f"{_DATA_FILES} file, or a folder of images with one subfolder per "
        "class (default: rotten_tomatoes)",
    )
    _add_probe_data_options(probe)
    _add_probe_method_options(probe)
    _add_probe_run_options(probe)
    _add_probe_output_options(probe)


def _add_probe_data_options(probe):
    """The columns of ``skloes probe``'s data and what its labels are."""
    _add_option(
        probe,
        "--text-column",
        help="text column of a data file; a column of image file names "
        "(relative to the file's folder) is read as images (default: text)",
    )
    probe.add_argument(
        "--label-column",
        default="label",
        metavar="C",
        help="label column of a data file (default: label)",
    )
    probe.add_argument(
        "--task",
        default="auto",
        choices=["auto", "classification", "regression"],
        help="what the labels are: classes, or a continuous target; auto "
        "(default) reads non-integer numbers and float labels with 10 or more "
        "distinct values as a target, anything else as classes",
    )
    probe.add_argument(
        "--group-column",
        default=None,
        metavar="C",
        help="column of each text's group (its speaker, author, document...): "
        "every outer and inner fold keeps a group on one side of the split; "
        "the built-in sets' group columns: "
        + ", ".join(f"{c} ({d})" for d, c in BUILTIN_GROUPS.items())
        + " (default: none)",
    )


def _add_probe_method_options(probe):
    """What ``skloes probe`` computes: pooling, selection, subsample, fusion."""
    _add_option(
        probe,
        "--pooling",
        default=None,
        choices=["auto", *POOLINGS],
        help="token pooling; auto is the model family's (the class token of a "
        "ViT, DeiT or DINOv2, the mean of the patches of a CLIP, SigLIP, MAE or "
        "BEiT) (default: mean for texts, auto for images)",
    )
    probe.add_argument(
        "--n-layers-to-select",
        type=_n_layers_value,
        default=DEFAULT_N_LAYERS,
        metavar="K|auto",
        help="number of layers LOES selects, or 'auto' for "
        "cross-validated (default: 4)",
    )
    probe.add_argument(
        "--k",
        dest="k_deprecated",
        type=_n_layers_value,
        default=None,
        help=argparse.SUPPRESS,
    )  # renamed in 0.2
    probe.add_argument(
        "--max-samples",
        type=_max_samples,
        default=DEFAULT_MAX_SAMPLES,
        metavar="N",
        help=f"stratified subsample size, or 'all' (default: {DEFAULT_MAX_SAMPLES})",
    )
    probe.add_argument(
        "--token-metrics",
        action="store_true",
        help="also compute prompt entropy and curvature (token level, "
        "same forward pass)",
    )
    probe.add_argument(
        "--fusion",
        choices=FUSIONS,
        default=DEFAULT_FUSION,
        help="how multi-layer answers combine their layers: 'average' the "
        "probabilities of one probe per layer, 'stack' them with a meta "
        "model, or 'concatenate' the layers under one probe; every method "
        f"is scored and saved with it (default: {DEFAULT_FUSION})",
    )
    probe.add_argument(
        "--nested",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="select layers inside each CV fold, so LOES and the best "
        "single layer are scored alike and the report shows each "
        "fold's picks and their stability (default); --no-nested "
        "selects once on all rows (faster, optimistic)",
    )


def _add_probe_run_options(probe):
    """How ``skloes probe`` runs the model: device, batches, precision, seed."""
    _add_option(
        probe,
        "--device",
        help="torch device: auto, cpu, cuda, mps (default: %(default)s)",
    )
    _add_option(probe, "--batch-size")
    _add_option(probe, "--max-length", default=128)
    _add_option(
        probe,
        "--precision",
        help="arithmetic of the forward pass: int8 and "
        "bfloat16 are faster on CPUs with int8/bfloat16 units and "
        "move the features slightly (default: %(default)s)",
    )
    probe.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random seed of the subsample, folds and selection",
    )
    probe.add_argument(
        "--n-jobs",
        type=_positive_int("--n-jobs"),
        default=_usable_cores(),
        metavar="N",
        help="processes that score the layers and the compared answers, with "
        "the same results as one (default: one per usable core, %(default)s)",
    )


def _add_probe_output_options(probe):
    """Where ``skloes probe`` writes its report and its fitted probe."""
    probe.add_argument(
        "--out",
        default="skloes_report",
        metavar="DIR",
        help="report folder (default: ./skloes_report)",
    )
    _add_option(
        probe,
        "--force",
        help="overwrite a report (layers.csv, profile.png, "
        "selection.json) already in --out, and a probe already "
        "saved in --save",
    )
    probe.add_argument(
        "--save",
        default=None,
        metavar="DIR",
        help="also fit a probe on every row with the reported layers "
        "and save it to DIR (for skloes predict)",
    )
    probe.add_argument(
        "--export",
        default=None,
        choices=["onnx-int8", "onnx"],
        help="with --save: also write the model cut at the deepest selected "
        "layer as an ONNX graph (int8 or float32; the folder then holds "
        "those weights), checked on the fitted texts, so that skloes predict "
        "runs it without torch (pip install skloes[serve])",
    )


def _add_predict_parser(sub):
    predict = sub.add_parser(
        "predict",
        help="predict new texts with a probe saved by probe --save",
        description="Predict every text of a data file with a probe saved by "
        "`skloes probe --save DIR`; writes one row per text: the prediction and, "
        "for a classifier, the probability of each class.",
    )
    predict.add_argument(
        "probe_dir", metavar="DIR", help="folder written by skloes probe --save"
    )
    _add_option(
        predict,
        "--data",
        help=f"a {_DATA_FILES} file of texts, or (with --engine, or "
        "--out a .parquet file) a folder of them",
    )
    _add_option(
        predict, "--text-column", help="text column of the data file (default: text)"
    )
    predict.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="CSV file to write (default: standard output); a .parquet file is "
        "written at scale: in shards, resumable, by --engine",
    )
    _add_scale_options(predict, "the prediction")
    _add_option(
        predict,
        "--id-column",
        help="with a .parquet --out: the data's id column, kept beside each "
        "prediction (default: row_id, the row's position, only)",
    )
    _add_option(predict, "--force", help="overwrite --out if it exists")
    _add_predict_runtime_options(predict)


def _add_predict_runtime_options(predict):
    """What computes ``skloes predict``'s features, and how."""
    _add_option(
        predict,
        "--batch-size",
        default=None,
        help="texts per forward pass (default: the probe's)",
    )
    _add_option(
        predict, "--device", default=None, help="torch device (default: the probe's)"
    )
    predict.add_argument(
        "--runtime",
        default="auto",
        choices=["auto", "torch", "onnx"],
        help="what computes the features: the folder's exported graph "
        "(onnx, no torch needed), the model with torch, or auto: the "
        "exported graph when the folder has one (default: auto)",
    )
    predict.add_argument(
        "--threads",
        type=_positive_int("--threads"),
        default=None,
        metavar="N",
        help="threads of the exported graph's runtime (default: one per core)",
    )
    predict.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow a model whose folder ships its own Python code (never "
        "read from the saved probe; only if you trust the model)",
    )


def _add_scale_options(parser, what):
    """The engine options of the commands that run at scale."""
    parser.add_argument(
        "--engine",
        default=None,
        choices=["local", "ray", "dask"],
        help=f"where {what} runs: this process (local, the default), a Ray "
        "Data actor pool or a Dask cluster; resumable",
    )
    parser.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help="the cluster: a Ray address (ray://head:10001, auto) or a Dask "
        "scheduler (tcp://host:8786); default: a local one",
    )
    parser.add_argument(
        "--n-workers",
        type=_positive_int("--n-workers"),
        default=None,
        metavar="N",
        help="Ray actors or local Dask workers (default: from the resources)",
    )
    parser.add_argument(
        "--threads-per-worker",
        type=_positive_int("--threads-per-worker"),
        default=None,
        metavar="N",
        help="torch threads per worker (default: 1 on Ray and Dask)",
    )
    parser.add_argument(
        "--num-gpus",
        type=float,
        default=0,
        metavar="G",
        help="GPUs per Ray actor (default: 0)",
    )


def _add_extract_parser(sub):
    extract = sub.add_parser(
        "extract",
        help="extract layers of many texts into a layer store (resumable)",
        description="Extract the pooled hidden states of every text of a data "
        "file or folder into a layer store: Parquet shards, one row per text, "
        "one column per layer, and a manifest. Re-run the same command to "
        "resume a killed job.",
    )
    _add_option(
        extract,
        "--model",
        default=None,
        help="the model (default: the bundled all-MiniLM-L6-v2)",
    )
    _add_option(extract, "--data")
    extract.add_argument(
        "--store",
        required=True,
        metavar="DIR",
        help="the store folder (new, or the store of the same command to resume)",
    )
    extract.add_argument(
        "--layers",
        default="all",
        metavar="all|L1,L2,...|PROBE_DIR",
        help="hidden states to keep (0 = embeddings), or a saved probe's "
        "selected layers; the forward pass stops at the deepest (default: all)",
    )
    _add_option(extract, "--text-column")
    _add_option(
        extract,
        "--id-column",
        help="the data's id column, kept in the store beside row_id",
    )
    extract.add_argument(
        "--columns",
        default=None,
        metavar="C1,C2",
        help="further columns to keep (labels, groups)",
    )
    _add_extract_forward_options(extract)


def _add_extract_forward_options(extract):
    """How ``skloes extract`` pools, runs and stores each layer."""
    _add_option(extract, "--pooling")
    _add_option(extract, "--max-length", default=512)
    _add_option(extract, "--batch-size")
    extract.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "float16"],
        help="storage dtype; float16 checks each layer for overflow (default: float32)",
    )
    extract.add_argument(
        "--shard-size",
        type=_positive_int("--shard-size"),
        default=None,
        metavar="N",
        help="rows per shard (default: about 32 MiB of layers)",
    )
    _add_option(
        extract,
        "--device",
        help="torch device of each worker (default: %(default)s)",
    )
    _add_option(extract, "--precision")
    _add_scale_options(extract, "the extraction")


def _add_models_parser(sub):
    models = sub.add_parser(
        "models",
        help="list the offline model bundles; --prepare readies them",
        description="List the model bundles that run offline (installed or not, "
        "with the pip line that installs them). With --prepare, convert or "
        "reassemble every installed bundle (or the NAMEs given) into the user "
        "cache now (once; otherwise this happens on first use).",
    )
    models.add_argument(
        "--prepare",
        nargs="*",
        metavar="NAME",
        help="prepare the named bundles now (smollm2, gemma3...), or every "
        "installed one when no NAME is given",
    )


def _add_cache_parser(sub):
    cache = sub.add_parser(
        "cache",
        help="show the size of a hidden-states cache or prune it",
        description="Show the size of a hidden-states cache folder (the `cache` "
        "of HiddenStatesTransformer) per settings, or prune it.",
    )
    actions = cache.add_subparsers(dest="action", parser_class=_Parser)
    info = actions.add_parser(
        "info",
        help="entries and bytes per settings",
        description="Entries and bytes per settings of a hidden-states cache "
        "folder; without DIR, the folders of the user model cache (SKLOES_HOME).",
    )
    _add_option(info, "path")
    prune = actions.add_parser(
        "prune",
        help="remove old entries, then the oldest down to a size",
        description="Remove entries written more than --older-than ago, then the "
        "oldest until the cache holds at most --max-bytes. Without DIR, remove "
        "what killed preparations left in the user model cache (SKLOES_HOME).",
    )
    _add_option(prune, "path")
    prune.add_argument(
        "--max-bytes",
        type=_size,
        default=None,
        metavar="SIZE",
        help="size bound, e.g. 500M, 2G (suffixes K, M, G, T: powers of 1024)",
    )
    prune.add_argument(
        "--older-than",
        type=_age,
        default=None,
        metavar="AGE",
        help="age bound, e.g. 3600, 12h, 30d, 2w",
    )


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


_n_layers_value = _int_or_word("--n-layers-to-select", 1, "auto", "auto")


_max_samples = _int_or_word("--max-samples", 10, "all", None)


# Estimator parameters that a probe option sets: an estimator's error names
# the option instead (``as_options``).
_OPTION_OF = {
    "max_length": "--max-length",
    "batch_size": "--batch-size",
    "pooling": "--pooling",
    "device": "--device",
    "n_layers_to_select": "--n-layers-to-select",
}


def option_values(args, *names):
    """The parsed options ``names`` (their dests) as keyword arguments: an
    option sets the Python parameter of its name (``--max-length`` sets
    ``max_length``)."""
    return {name: getattr(args, name) for name in names}


def as_options(message):
    """``message`` with the estimator parameters that options set named as
    those options (```max_length``` -> ```--max-length```)."""
    for param, option in _OPTION_OF.items():
        message = message.replace(f"`{param}`", f"`{option}`")
    return message


def _quiet_libraries():
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass
