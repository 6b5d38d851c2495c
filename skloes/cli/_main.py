"""The ``skloes`` command line: its entry point and the dispatch to a command.

``skloes probe`` runs the main job (:mod:`skloes.cli._probe`), ``skloes predict``
applies a saved probe (:mod:`skloes.cli._predict`; at scale
:mod:`skloes.cli._scale`), ``skloes extract`` writes a layer store
(:mod:`skloes.cli._scale`), ``skloes models``
and ``skloes cache`` manage the offline models and the hidden-states cache
(:mod:`skloes.cli._admin`); the options are declared in :mod:`skloes.cli._args`
and data files read in :mod:`skloes.cli._data`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys

from skloes.cli._admin import run_cache, run_models
from skloes.cli._args import (
    DEFAULT_N_LAYERS,
    PROG,
    UserError,
    _quiet_libraries,
    build_parser,
)
from skloes.cli._predict import run_predict
from skloes.cli._probe import run_probe
from skloes.cli._scale import run_extract

__all__ = ["main"]


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
        if args.command == "predict":  # quiets transformers only if it runs
            run_predict(args)
            return 0
        if args.command == "extract":
            run_extract(args)
            return 0
        _quiet_libraries()
        _honour_renamed_options(args)
        run_probe(args)
    except UserError as exc:
        command = argv_command(argv)
        prog = (
            f"skloes {command}"
            if command in ("cache", "models", "predict", "extract")
            else PROG
        )
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _honour_renamed_options(args):
    """Options renamed in 0.2 keep working until 0.4, with a FutureWarning."""
    if args.k_deprecated is not None:
        from skloes.utils._deprecation import warn_renamed

        if args.n_layers_to_select != DEFAULT_N_LAYERS:  # as the Python API
            raise UserError(
                "set --n-layers-to-select only; --k is its former name (got "
                f"--k {args.k_deprecated} and --n-layers-to-select "
                f"{args.n_layers_to_select})"
            )
        warn_renamed(PROG, "--k", "--n-layers-to-select", what="option")
        args.n_layers_to_select = args.k_deprecated


def argv_command(argv):
    """The sub-command named in ``argv`` (``sys.argv`` when None), or None."""
    words = sys.argv[1:] if argv is None else argv
    return next((w for w in words if not w.startswith("-")), None)
