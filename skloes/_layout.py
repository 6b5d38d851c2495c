"""The floors of the package: the one statement of which package may import which.

Bottom up, a package may import its own floor and the floors below it, never one
above. Four modules hang off the side: they import only ``utils`` and
``core``, and only the floors (or side modules) :data:`SIDE` names import
them (``report``, ``cli`` and the top-level API; ``probe`` too for
``serving``, the torch-free server of exported probes, which must not pull in
the floors that need torch, and for ``probe_folder``, the saved probe
folder's format, which the writer, the server and the command line share;
``scale`` for both, its batch prediction opening saved probes).
The import test (``tests/test_imports.py``) reads :data:`FLOORS` and
:data:`SIDE`, and the layout table of the user guide (:ref:`package_layout`)
is :func:`layout_table`'s output, checked by the same test; so code, test and
docs cannot disagree.
Run ``python -m skloes._layout`` to print the table.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FLOORS", "SIDE", "Floor", "floor_of", "layout_table", "may_import"]


@dataclass(frozen=True)
class Floor:
    """One floor: its name, the modules it holds and what they own."""

    name: str
    modules: tuple
    holds: str


FLOORS = (
    Floor(
        "utils",
        ("skloes.utils",),
        "parameter validation, shared docstring paragraphs, optional imports, "
        "deprecation helpers: nothing that knows about layers or models",
    ),
    Floor(
        "core",
        ("skloes.core",),
        "the layer-data contract, folds, geometry, ridge, pooling, whole files, "
        "the folder lock, digests, sealed folders, the layer store, the cache, "
        "torch",
    ),
    Floor(
        "models",
        ("skloes.models",),
        "offline bundles, model resolution and loading, input encoding, the "
        "truncated forward pass, tiny test models",
    ),
    Floor(
        "extraction",
        ("skloes.extraction",),
        "HiddenStatesTransformer: cache, encode, forward, pool, store",
    ),
    Floor(
        "metrics",
        ("skloes.metrics",),
        "the Layer-by-Layer metrics and their name registry (numerical core)",
    ),
    Floor(
        "selection",
        ("skloes.selection",),
        "every layer selector (LOES, its path, the baselines) and the ridge "
        "probes; no torch",
    ),
    Floor(
        "heads",
        ("skloes.heads",),
        "every torch-trained head: ScalarMix, GeoReg's loss, classifier and "
        "fine-tuner, the shared modules and training loop",
    ),
    Floor(
        "probe",
        ("skloes.probe",),
        "the text-in probe estimators, pruning a fitted pipeline to its "
        "layers, saving without the weights",
    ),
    Floor(
        "report",
        ("skloes.report",),
        "LayerReport: per-layer scores, metrics and the selection summary",
    ),
    Floor(
        "scale",
        ("skloes.scale",),
        "past one machine: the layer store's extraction on Ray or Dask, choosing "
        "layers on a sample, heads that stream a store, batch prediction",
    ),
    Floor(
        "cli",
        ("skloes.cli", "skloes.__main__"),
        "the skloes command (probe, predict, extract, models, cache)",
    ),
    Floor(
        "api",
        ("skloes", "skloes.baselines", "skloes._layout"),
        "the public shortcuts (imported on first use) and deprecated aliases",
    ),
)

# Modules off the side: what they may import, and who may import them.
SIDE = {
    "skloes.datasets": (("utils", "core"), ("report", "cli", "api")),
    "skloes.plotting": (("utils", "core"), ("report", "cli", "api")),
    "skloes.serving": (("utils", "core"), ("probe", "report", "scale", "cli", "api")),
    "skloes.probe_folder": (
        ("utils", "core"),
        ("probe", "report", "scale", "cli", "api", "skloes.serving"),
    ),
}


def _owner(module: str):
    """The floor name or side module that holds ``module`` (longest prefix)."""
    best, size = None, -1
    for name, prefixes in [(f.name, f.modules) for f in FLOORS] + [
        (side, (side,)) for side in SIDE
    ]:
        for prefix in prefixes:
            hit = module == prefix or module.startswith(prefix + ".")
            if (
                hit
                and len(prefix) > size
                and not (prefix == "skloes" and module != "skloes")
            ):
                best, size = name, len(prefix)
    return best


def floor_of(module: str):
    """The floor (or side module) ``module`` belongs to, or None if unplaced."""
    return _owner(module)


def may_import(importer: str, imported: str) -> bool:
    """Whether module ``importer`` may import module ``imported``."""
    a, b = _owner(importer), _owner(imported)
    if a is None or b is None:
        return False
    rank = {f.name: i for i, f in enumerate(FLOORS)}
    if b in SIDE:
        return a == b or a in SIDE[b][1]
    if a in SIDE:
        return b in SIDE[a][0]
    return rank[b] <= rank[a]


def layout_table() -> str:
    """The user guide's layout table (reStructuredText), top floor first."""
    rows = [
        (f.name, ", ".join(f"``{m}``" for m in f.modules), f.holds)
        for f in reversed(FLOORS)
    ]
    rows += [
        (
            f"side: {m.split('.')[-1]}",
            f"``{m}``",
            f"imports {' and '.join(imp)}; imported by {', '.join(by)}",
        )
        for m, (imp, by) in SIDE.items()
    ]
    widths = [
        max(len(r[i]) for r in rows + [("floor", "modules", "holds")]) for i in range(3)
    ]
    rule = "  ".join("=" * w for w in widths)

    def line(row):
        cells = (c.ljust(w) for c, w in zip(row, widths, strict=True))
        return "  ".join(cells).rstrip()

    return "\n".join(
        [rule, line(("floor", "modules", "holds")), rule, *map(line, rows), rule]
    )


if __name__ == "__main__":
    print(layout_table())
