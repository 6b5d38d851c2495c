"""Sphinx configuration for the skloes documentation.

Build: ``make -C doc html`` (warnings are errors). The build never touches the
network: intersphinx inventories are read only when ``SKLOES_DOCS_INTERSPHINX=1``
is set. The examples gallery runs every ``examples/plot_*.py`` unless
``SKLOES_DOCS_RUN_EXAMPLES=0`` (or ``-D plot_gallery=0``) is given; the tests
build with execution off because ``tests/test_examples.py`` runs the examples
(on half their samples, sharing one MiniLM cache with the quick start test).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

import os
import re
import sys
from datetime import date

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "sphinxext"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

import skloes

project = "skloes"
author = "The skloes developers"
copyright = f"{date.today().year}, {author}"
version = release = skloes.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "md_include",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/README.md"]
source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
default_role = "literal"
pygments_style = "sphinx"

# -- API reference ------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"  # numpydoc types are authoritative
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# Type lines such as "ndarray of shape (n_selected_ * dim,)" must not be parsed
# as reST (a trailing underscore is a hyperlink reference there).
numpydoc_xref_param_type = True
# Words left as text; every other word becomes an :obj: reference, which renders
# as plain text when it does not resolve (the build is not nitpicky).
numpydoc_xref_ignore = {
    "of",
    "or",
    "and",
    "shape",
    "default",
    "instance",
    "optional",
    "in",
    "to",
    "the",
    "a",
    "an",
    "with",
    "for",
    "each",
    "one",
    "per",
    "if",
    "is",
    "not",
    "n_samples",
    "n_features",
    "n_layers",
    "dim",
    "object",
}
# numpydoc's default aliases point at intersphinx targets (python:, numpy:)
# that an offline build cannot resolve; map them to plain object roles, which
# render as text when unresolved instead of warning.
numpydoc_xref_aliases = {
    name: name
    for name in (
        "None bool True False list tuple str dict float int callable iterable "
        "sequence generator scalar"
    ).split()
}
numpydoc_xref_aliases.update(
    {
        "boolean": "bool",
        "string": "str",
        "array-like": "numpy.ndarray",
        "array_like": "numpy.ndarray",
    }
)

# -- Offline-safe intersphinx ------------------------------------------------
# No inventory is fetched by default (the build machines have no internet).
# Unresolved external references then render as plain text, without warnings.
intersphinx_mapping = {}
if os.environ.get("SKLOES_DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "sklearn": ("https://scikit-learn.org/stable", None),
        "torch": ("https://pytorch.org/docs/stable", None),
        "dask": ("https://docs.dask.org/en/stable", None),
    }
intersphinx_timeout = 5

# -- Examples gallery -------------------------------------------------------
_run_examples = os.environ.get("SKLOES_DOCS_RUN_EXAMPLES", "1") != "0"
sphinx_gallery_conf = {
    "examples_dirs": os.path.join(HERE, "..", "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "plot_gallery": "True" if _run_examples else "False",
    "download_all_examples": False,
    "within_subsection_order": "FileNameSortKey",
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "reference_url": {"skloes": None},
    "doc_module": ("skloes",),
    "backreferences_dir": "gen_modules",
    "show_memory": False,
    "min_reported_time": 1,
    "write_computation_times": False,  # no generated sg_execution_times.rst
}

# -- HTML --------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skloes {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_prev_next": True,
    "header_links_before_dropdown": 7,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": []}
html_show_sourcelink = False
html_last_updated_fmt = None

# Keep the API pages' signatures readable.
python_maximum_signature_line_length = 88


def _skip_metadata_request_methods(app, what, name, obj, skip, options):
    """Hide the ``set_*_request`` methods scikit-learn generates on every class."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w\\])([A-Za-z]\w*?)_(?=[,)\s]|$)")


def _escape_fitted_names_in_types(app, what, name, obj, options, lines):
    """Escape ``n_selected_``-style names in numpydoc type lines.

    ``ndarray of shape (n_selected_,)`` is the scikit-learn convention, but a
    trailing underscore makes a reST hyperlink reference. Runs after numpydoc
    (priority 600) on its rendered ``**name** : type`` lines only.
    """
    for i, line in enumerate(lines):
        head, sep, tail = line.partition("** : ")
        if sep and head.lstrip().startswith("**"):
            lines[i] = head + sep + _TRAILING_UNDERSCORE.sub(r"\1\\_", tail)


def _write_cli_help():
    """``skloes probe --help`` as text, included by the API page."""
    import contextlib
    import io

    from skloes.cli._args import build_parser

    os.environ["COLUMNS"] = "80"  # argparse wraps to the terminal width
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        build_parser().parse_args(["probe", "--help"])
    os.makedirs(os.path.join(HERE, "gen_modules"), exist_ok=True)
    with open(os.path.join(HERE, "gen_modules", "cli_probe_help.txt"), "w") as fh:
        fh.write(buffer.getvalue())


_write_cli_help()


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_request_methods)
    app.connect("autodoc-process-docstring", _escape_fitted_names_in_types, 600)
