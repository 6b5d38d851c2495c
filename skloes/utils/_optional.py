"""Lazy import of optional dependencies with an install hint."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib
import importlib

_EXTRA_OF = {
    "torch": "torch",
    "transformers": "torch",
    "tqdm": "torch",
    "matplotlib": "plot",
    "pandas": "plot",
    "dask": "dask",
    "distributed": "dask",
    "pyarrow": "store",
    "ray": "ray",
    "onnxruntime": "serve",
    "tokenizers": "serve",
    "onnx": "export",
    "PIL": "vision",
    "polars": "polars",
    "skrub": "skrub",
    "soundfile": "audio",
}


def import_optional(name: str, extra: str | None = None):
    """Import ``name`` or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        extra = extra or _EXTRA_OF.get(name.split(".")[0], "all")
        msg = (
            f"skloes needs `{name}` here; install it with "
            f"`pip install skloes[{extra}]`."
        )
        raise ImportError(msg) from exc


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' warnings and its "Loading weights" bars for a while."""
    logging = import_optional("transformers").logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
