"""The saved probe folder: its one definition, below every writer and reader.

A probe folder is what :func:`skloes.probe.save_probe` writes and what
:func:`skloes.probe.load_probe`, :mod:`skloes.serving` and ``skloes predict``
read. Its files:

=====================  ====================================================
``manifest.json``      the format, the model reference and its fingerprint,
                       the files the save wrote (``files``) with their
                       SHA-256 (``sha256``), and the ``export`` entry
``estimator.skops``    the fitted estimator in skops' format (no pickle)
``README.md``          the model card, written last
``graph.onnx`` or      with ``export``: the model cut at its deepest
``graph-int8.onnx``    selected block, pooling the selected layers
``tokenizer.json``     with ``export`` of a text model: its tokenizer (an
                       image model's processor is a spec in the manifest)
``head.npz`` or        with ``export``: the head as plain arrays, or as a
``head.skops``         skops archive for other heads
=====================  ====================================================

This module owns the file names, the manifest's schema and format numbers,
the record of the files a save wrote and their hashes (read, written and
checked by :mod:`skloes.core._sealed`, which the layer store shares), which
of them a later save may replace, and the one trust rule for the types a
saved estimator or head may hold. Nothing else spells a file name of the
folder. It imports only the standard library, numpy and skloes' core (no
scikit-learn at import time), so the torch-free server loads fast.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
import importlib
import os
import sys
import warnings
from numbers import Integral
from pathlib import Path

import skloes.core._sealed as sealed
from skloes.core._atomic import writable_problem
from skloes.core._digests import setting_digest

__all__ = [
    "CARD",
    "ESTIMATOR",
    "EXPORT_FORMAT",
    "FORMAT",
    "GRAPHS",
    "HEADS",
    "MANIFEST",
    "SAVED_OPTIMIZATION",
    "TOKENIZER",
    "allowed_types",
    "changed_files",
    "check_folder_arg",
    "check_trusted",
    "checked_file",
    "export_digest",
    "export_entry",
    "file_hashes",
    "folder_state",
    "is_skloes_estimator",
    "read_export",
    "read_manifest",
    "recorded_files",
    "remove_saved_files",
    "seal_export",
    "target_problem",
    "write_manifest",
]

# ------------------------------------------------------------------ names
MANIFEST = "manifest.json"
ESTIMATOR = "estimator.skops"
CARD = "README.md"
TOKENIZER = "tokenizer.json"
# The exported graph by its arithmetic, and the head by how it is stored.
GRAPHS = {"float32": "graph.onnx", "int8": "graph-int8.onnx"}
HEADS = {
    "logistic": "head.npz",
    "linear": "head.npz",
    "average": "head.npz",
    "stack": "head.npz",
    "skops": "head.skops",
}
# What a folder saved before the manifest recorded its files holds.
LEGACY_FILES = (ESTIMATOR,)

# --------------------------------------------------------------- versions
FORMAT = 1  # the manifest's
EXPORT_FORMAT = 1  # the ``export`` entry's
# The manifest's record of a graph saved already optimized (ONNX Runtime's
# extended level, which does not depend on the machine): loaded as it is.
SAVED_OPTIMIZATION = "extended"
PADDING_SIDES = ("left", "right")

# ------------------------------------------------------------------ trust
# Beyond skops' own trusted types (scikit-learn, numpy, scipy, builtins), a
# saved estimator or exported head may hold skloes' estimator classes and the
# extractor's device (``torch.device(str)`` runs no user code).
EXTRA_TRUSTED = ("torch.device",)
# The packages whose estimator classes a saved probe may hold, imported by
# these fixed names: a type name read from a file never imports a module.
ESTIMATOR_PACKAGES = (
    "skloes.extraction",
    "skloes.selection",
    "skloes.probe",
    "skloes.heads",
    "skloes.metrics",
)


def is_skloes_estimator(name):
    """Whether ``module.Class`` names an estimator class of skloes itself.

    Trusted: the public estimator classes of :data:`ESTIMATOR_PACKAGES`
    (loaded by the names those packages declare), and any class deriving
    from scikit-learn's ``BaseEstimator`` in a module of those packages that
    is imported already. A name read from a saved file never imports a
    module, and never names a function or a command-line module; only the
    package the name belongs to is looked into, so that a head of
    scikit-learn's estimators imports no skloes package, and a lazily
    imported class (a torch head) is imported only when it is the one named.
    """
    from sklearn.base import BaseEstimator

    module, _, attr = name.rpartition(".")
    package = next(
        (p for p in ESTIMATOR_PACKAGES if module == p or module.startswith(p + ".")),
        None,
    )
    if package is None:
        return False
    if name in _public_estimators(package):
        return True
    lazy = _lazy_estimators(package).get(name)
    if lazy is not None:  # the package's own declaration, never the file's name
        cls = getattr(importlib.import_module(lazy), attr, None)
        return (
            isinstance(cls, type)
            and issubclass(cls, BaseEstimator)
            and f"{cls.__module__}.{cls.__qualname__}" == name
        )
    cls = getattr(sys.modules.get(module), attr, None)
    return isinstance(cls, type) and issubclass(cls, BaseEstimator)


def _declared(package):
    """``(module, lazy)``: the imported package and what it imports lazily
    (its ``_LAZY`` map of a public name to its module), by its fixed name."""
    module = importlib.import_module(package)
    return module, dict(getattr(module, "_LAZY", {}))


@functools.cache
def _public_estimators(package):
    """``module.Class`` of every public estimator of ``package`` that it
    imports eagerly (a lazily imported one, such as a torch head, is in
    :func:`_lazy_estimators`, and is not imported to be listed)."""
    from sklearn.base import BaseEstimator

    module, lazy = _declared(package)
    names = set()
    for attr in getattr(module, "__all__", ()):
        if attr in lazy:
            continue
        obj = getattr(module, attr)
        if isinstance(obj, type) and issubclass(obj, BaseEstimator):
            names.add(f"{obj.__module__}.{obj.__qualname__}")
    return frozenset(names)


@functools.cache
def _lazy_estimators(package):
    """``{"module.Class": module}`` of the public names ``package`` imports
    lazily, read from its declaration without importing them."""
    _, lazy = _declared(package)
    return {f"{module}.{attr}": module for attr, module in lazy.items()}


def check_trusted(trusted, owner):
    """``trusted`` as a caller gives it: a list of type names, or None."""
    valid = trusted is None or (
        isinstance(trusted, (list, tuple))
        and all(isinstance(name, str) for name in trusted)
    )
    if not valid:
        raise TypeError(
            f"{owner}: `trusted` must be a list of type names ('module.Class') or "
            f"None; got {trusted!r}."
        )
    return trusted


def check_folder_arg(value, owner, param="path"):
    """A folder argument (``path``, ``cache``): a str or os.PathLike without
    a NUL character, the one rule of every reader and writer of a folder."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(
            f"{owner}: `{param}` must be a folder (a str or os.PathLike); got "
            f"{value!r}."
        )
    if "\x00" in os.fspath(value):  # the OS refuses it, in words of its own
        raise ValueError(f"{owner}: `{param}` holds a NUL character; got {value!r}.")
    return value


def allowed_types(untrusted, trusted, owner):
    """The types of a skops archive to construct: skloes' estimators, the
    device and those the caller trusts; any other is an error naming it."""
    extra = set(trusted or ())
    allowed = [
        t
        for t in untrusted
        if t in EXTRA_TRUSTED or t in extra or is_skloes_estimator(t)
    ]
    refused = sorted(set(untrusted) - set(allowed))
    if refused:
        raise ValueError(
            f"{owner}: the saved estimator holds types that are not trusted: "
            f"{refused}. Load it only if you trust its source, with "
            f"trusted={refused}."
        )
    return allowed


# ---------------------------------------------------------------- reading
def damaged(folder, file, why, owner="load_probe"):
    """The error of a folder whose ``file`` is not as a save wrote it."""
    return ValueError(
        f"{owner}: {os.fspath(folder)!r} is a damaged saved probe: {file} {why}."
    )


def read_manifest(folder, owner):
    """The manifest of a saved probe folder, checked.

    Its required keys, its format, its record of files (each present, as a
    file) and, when there is one, its ``export`` entry (:func:`export_entry`)
    are checked; a folder that fails is one error naming the folder and the
    file or field.
    """
    folder = Path(folder)

    def fail(problem, exc):
        if problem == "no folder":
            return ValueError(
                f"{owner}: {os.fspath(folder)!r} is not a saved probe (no such folder)."
            )
        if problem == "no manifest":
            return ValueError(
                f"{owner}: {os.fspath(folder)!r} is not a saved probe (it has no "
                f"{MANIFEST}; save_probe writes {MANIFEST} and {ESTIMATOR})."
            )
        return damaged(folder, MANIFEST, f"is not valid JSON ({exc})", owner)

    manifest = sealed.read_manifest(folder, MANIFEST, fail)
    missing = [
        key
        for key in ("format", "model", "model_path", "model_fingerprint")
        if not isinstance(manifest, dict) or key not in manifest
    ]
    if missing:
        raise damaged(folder, MANIFEST, f"lacks {', '.join(missing)}", owner)
    if manifest["format"] != FORMAT:
        raise ValueError(
            f"{owner}: {os.fspath(folder)!r} was saved in format "
            f"{manifest['format']!r}; this skloes reads format {FORMAT}."
        )
    _check_recorded(folder, owner)
    if "export" in manifest:
        export_entry(manifest, folder, owner)
    return manifest


def _check_recorded(folder, owner):
    """Every file the save recorded is there, as a file; the card is the
    user's to delete (it documents the probe, nothing reads it)."""
    recorded = recorded_files(folder)
    if recorded is None:
        raise damaged(folder, MANIFEST, "has an invalid `files` record", owner)
    for name in recorded:
        path = folder / name
        if name == CARD and not path.exists() and not path.is_symlink():
            continue
        if not path.is_file():
            what = "is not a file" if path.exists() else "is missing"
            raise damaged(folder, name, f"(recorded in {MANIFEST}) {what}", owner)


def read_export(folder, owner):
    """The checked ``export`` entry of an exported folder's manifest (what
    the torch-free server reads), the manifest read as :func:`read_manifest`
    reads it for every reader; the files it names are checked as they are
    opened (:func:`checked_file`)."""
    folder = Path(folder)
    return export_entry(read_manifest(folder, owner), folder, owner)


def export_digest(entry):
    """The SHA-256 of an ``export`` entry (every field but ``digest``, as
    canonical JSON): a field edited by hand since the save is told from the
    entry the save wrote and checked."""
    return setting_digest({key: val for key, val in entry.items() if key != "digest"})


def seal_export(entry):
    """``entry`` with its ``digest`` (:func:`export_digest`), as a save
    writes it."""
    entry["digest"] = export_digest(entry)
    return entry


def export_entry(manifest, folder, owner):
    """The manifest's ``export`` entry, its schema checked field by field.

    Every value the server acts on is checked here, so that a manifest
    skloes did not write is refused by name rather than served wrongly (an
    unknown head kind would return scores in place of labels).
    """
    export = manifest.get("export") if isinstance(manifest, dict) else None
    if not isinstance(export, dict):
        raise ValueError(
            f"{owner}: {os.fspath(folder)!r} holds no exported graph; save it with "
            "save_probe(..., export='onnx-int8') (or load it with "
            "skloes.probe.load_probe, which runs the model with torch)."
        )
    if export.get("format") != EXPORT_FORMAT:
        raise ValueError(
            f"{owner}: {os.fspath(folder)!r} holds an exported graph of format "
            f"{export.get('format')!r}; this skloes reads format {EXPORT_FORMAT}."
        )
    _ExportSchema(folder, owner).check(export)
    return export


class _ExportSchema:
    """The ``export`` entry's fields: what each must be, checked in turn."""

    def __init__(self, folder, owner):
        self.folder, self.owner = folder, owner

    def fail(self, field, expected, value):
        raise damaged(
            self.folder,
            MANIFEST,
            f"has an invalid export field `{field}` (expected {expected}; got "
            f"{value!r:.80})",
            self.owner,
        )

    def require(self, entry, field, ok, expected, prefix="export"):
        value = entry.get(field) if isinstance(entry, dict) else None
        if not ok(value):
            self.fail(f"{prefix}.{field}", expected, value)
        return value

    def check(self, export):
        precision = self.require(
            export, "precision", lambda v: v in GRAPHS, f"one of {list(GRAPHS)}"
        )
        self.require(
            export,
            "layers",
            lambda v: isinstance(v, list) and v and all(map(_is_count, v)),
            "a non-empty list of layer indices",
        )
        self.require(export, "pooling", lambda v: isinstance(v, str), "a pooling name")
        batching = self.require(
            export, "batching", lambda v: isinstance(v, dict), "a dict"
        )
        self.require(
            batching, "batch_size", _is_positive, "a positive int", "export.batching"
        )
        self.require(
            batching,
            "max_batch_tokens",
            lambda v: v is None or _is_positive(v),
            "a positive int or null",
            "export.batching",
        )
        modality = self.require(
            export,
            "modality",
            lambda v: v in (None, "text", "image"),
            "'text', 'image' or absent (text)",
        )
        if modality == "image":  # the image processor's spec, no tokenizer
            self.image_processor(export)
        else:
            self.tokenizer(self.file_entry(export, "tokenizer", {TOKENIZER}))
        self.graph(self.file_entry(export, "graph", {GRAPHS[precision]}))
        self.head(self.file_entry(export, "head", set(HEADS.values())))
        if export.get("digest") != export_digest(export):
            raise damaged(
                self.folder,
                MANIFEST,
                "has an `export` entry that is not the one the save wrote and "
                "checked (a field was edited since: `export.digest` no longer "
                "matches); save the probe again to change how it is served",
                self.owner,
            )

    def file_entry(self, export, field, names):
        entry = self.require(export, field, lambda v: isinstance(v, dict), "a dict")
        self.require(
            entry,
            "file",
            lambda v: v in names,
            " or ".join(sorted(names)),
            f"export.{field}",
        )
        self.require(
            entry,
            "sha256",
            lambda v: isinstance(v, str) and len(v) == 64,
            "a SHA-256 hex digest",
            f"export.{field}",
        )
        return entry

    def image_processor(self, export):
        from skloes.core._pixels import check_spec

        self.require(export, "n_prefix_tokens", _is_count, "a count")
        spec = export.get("image_processor")
        problem = check_spec(spec)
        if problem is not None:
            self.fail("export.image_processor", problem, spec)

    def tokenizer(self, entry):
        where = "export.tokenizer"
        self.require(entry, "max_length", _is_positive, "a positive int", where)
        self.require(
            entry,
            "padding_side",
            lambda v: v in PADDING_SIDES,
            f"one of {list(PADDING_SIDES)}",
            where,
        )
        self.require(entry, "pad_token_id", _is_count, "a token id", where)

    def graph(self, entry):
        self.require(
            entry,
            "optimized",
            lambda v: v in (None, SAVED_OPTIMIZATION),
            f"{SAVED_OPTIMIZATION!r} or absent",
            "export.graph",
        )
        self.require(  # absent: 8-bit weights (before 0.4)
            entry,
            "weight_max",
            lambda v: v is None or (_is_positive(v) and v <= 127),
            "an int from 1 to 127, or absent",
            "export.graph",
        )

    def head(self, entry):
        kind = self.require(
            entry,
            "kind",
            lambda v: v in HEADS,
            f"one of {list(HEADS)}",
            "export.head",
        )
        if entry["file"] != HEADS[kind]:
            self.fail("export.head.file", HEADS[kind], entry["file"])
        classes = entry.get("classes")
        valid = classes is None or (
            isinstance(classes, dict)
            and isinstance(classes.get("values"), list)
            and len(classes["values"]) >= 2
            and all(_is_label(v) for v in classes["values"])
            and _labels_convert(classes["values"], classes.get("dtype"))
        )
        if not valid:
            self.fail(
                "export.head.classes",
                "null or {values: [2 or more labels], dtype: their numpy dtype}",
                classes,
            )
        if kind == "logistic" and classes is None:
            self.fail("export.head.classes", "the classes of a classifier", classes)
        if kind == "linear" and classes is not None:
            self.fail("export.head.classes", "null for a linear model", classes)


def _is_label(value):
    return value is None or isinstance(value, (str, bool, int, float))


def _labels_convert(values, dtype):
    """Whether ``values`` read as ``dtype`` (a numpy dtype string or
    ``"object"``), as the server reads them."""
    import numpy as np

    if not isinstance(dtype, str):
        return False
    try:
        np.asarray(values, dtype=object if dtype == "object" else np.dtype(dtype))
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _is_count(value):
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= 0


def _is_positive(value):
    return _is_count(value) and value > 0


def checked_file(folder, entry, owner):
    """The file an ``{"file", "sha256"}`` entry names, refused when its bytes
    are not those the save wrote."""
    folder = Path(folder)
    name = entry.get("file") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not is_plain_name(name):
        raise ValueError(f"{owner}: {str(folder)!r} has an invalid manifest entry.")
    path = folder / name
    if not path.is_file():
        raise ValueError(
            f"{owner}: {str(folder)!r} lacks {name}, which its manifest lists; "
            "the folder is incomplete."
        )
    if not sealed.as_recorded(folder, name, entry.get("sha256")):
        raise ValueError(
            f"{owner}: {name} in {str(folder)!r} does not hash as when it was "
            "saved (tampered with, or from another save); refusing to run it. "
            "Save the probe again."
        )
    return path


def recorded_files(folder):
    """The files a save recorded in ``folder``'s manifest, or None when the
    folder holds no readable probe manifest (then nothing there is ours)."""
    manifest = _probe_manifest(Path(folder))
    if manifest is None:
        return None
    files = manifest.get("files", list(LEGACY_FILES))
    if not isinstance(files, list) or not all(map(is_plain_name, files)):
        return None  # a record we did not write: trust none of it
    return files


def _probe_manifest(folder):
    """The folder's probe manifest (one with a ``model_fingerprint``), or None."""
    manifest = sealed.read_manifest(folder, MANIFEST)
    if not isinstance(manifest, dict) or "model_fingerprint" not in manifest:
        return None
    return manifest


def is_plain_name(name):
    """A file name inside the folder: no separator, no ``..``, no hidden name."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not name.startswith(".")
        and os.path.basename(name) == name
        and "/" not in name
        and "\\" not in name
    )


def changed_files(folder):
    """The recorded files whose bytes are no longer those the save wrote (a
    card the user edited): a later save must not replace them. A folder
    saved before the hashes were recorded cannot tell: its card, the one
    file a user edits, counts as changed (kept, with the save's warning)."""
    folder = Path(folder)
    hashes = (_probe_manifest(folder) or {}).get("sha256")
    if not isinstance(hashes, dict):
        card = folder / CARD
        recorded = recorded_files(folder) or ()
        return [CARD] if CARD in recorded and card.is_file() else []
    return sealed.changed_files(folder, hashes, recorded_files(folder) or ())


def folder_state(folder):
    """What a save saw at ``folder``: None where no probe is, else its
    manifest's bytes. A save swaps in only if the state is still the one its
    check saw, so that of two writers one wins and the other is told."""
    try:
        return (Path(folder) / MANIFEST).read_bytes()
    except OSError:
        return None


# ---------------------------------------------------------------- writing
def file_hashes(folder, names):
    """``{name: sha256}`` of the files a save wrote (for ``sha256``)."""
    return sealed.file_hashes(folder, names)


def write_manifest(folder, manifest):
    """Write ``manifest.json`` into ``folder`` whole, in a sealed folder's
    JSON style (the bytes every skloes wrote)."""
    sealed.write_manifest(folder, MANIFEST, manifest)


def target_problem(path, *, overwrite, replace_hint, reserved=None):
    """Why ``path`` cannot take a saved probe now, or None.

    The one check of a save's target, run by
    :func:`~skloes.probe.save_probe` and, before any work, by
    ``skloes probe --save``.

    Parameters
    ----------
    path : str or os.PathLike
        The target folder.
    overwrite : bool
        Whether a probe saved there may be replaced.
    replace_hint : str
        How the caller's user allows it (``"overwrite"``, ``"--force"``).
    reserved : dict of str to path-like or None, default=None
        Folders the save must neither be, nor hold, nor sit above (the
        report folder of the same command), by the name of their option.

    Returns
    -------
    problem : str or None
        The end of a sentence that starts with the target's name.
    """
    folder = Path(path).expanduser()
    if folder.is_symlink() and not folder.exists():
        return "is a broken symbolic link"
    if folder.exists() and not folder.is_dir():
        return "is a file; give a folder"
    place = _place_problem(folder, reserved or {})
    if place:
        return place
    if folder.is_dir():
        held = _held_problem(folder, overwrite, replace_hint)
        if held:
            return held
    return writable_problem(folder)


def _place_problem(folder, reserved):
    """The current folder, one above it, or a reserved folder's place."""
    target, here = folder.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        return (
            "is the current folder or one above it; a probe needs a folder of "
            "its own, e.g. my_probe"
        )
    inside = next((p for p in target.parents if recorded_files(p) is not None), None)
    if inside is not None:
        return (
            f"is inside the saved probe {os.fspath(inside)!r}; a probe needs a "
            "folder of its own, outside another probe's (whose next save would "
            "then be refused)"
        )
    for option, other in reserved.items():
        if other is None:
            continue
        other = Path(other).expanduser().resolve()
        if target == other or target in other.parents:
            return (
                f"is the {option} folder {os.fspath(other)!r} of the same command "
                "or one above it; save the probe in a folder of its own, e.g. "
                f"{os.fspath(other / 'probe')!r}"
            )
    return None


def _held_problem(folder, overwrite, replace_hint):
    """What the existing folder holds that stops the save."""
    names = sorted(os.listdir(folder))
    if not names:
        return None
    recorded = recorded_files(folder)
    if recorded is None:
        return (
            f"is not empty and holds no saved probe ({_some(names)}); choose "
            "a new folder (a save never writes into a folder it did not make)"
        )
    foreign = [name for name in names if name not in {*recorded, MANIFEST}]
    foreign += [name for name in recorded if _is_entry_folder(folder / name)]
    if foreign:
        return (
            f"holds a saved probe and files that no save wrote ({_some(foreign)}); "
            "move them, or choose a new folder (a save replaces only its own files)"
        )
    edited = changed_files(folder)
    if edited and not isinstance((_probe_manifest(folder) or {}).get("sha256"), dict):
        return (
            f"holds a probe saved by an earlier skloes, which recorded no hashes, "
            f"so its {_some(edited)} may hold your edits; move or delete it to "
            "replace the probe, or choose a new folder (a save never replaces a "
            "file it did not write)"
        )
    if edited:
        return (
            f"holds a saved probe whose {_some(edited)} changed since the save "
            "wrote it (your edits?); move or delete it to replace the probe, or "
            "choose a new folder (a save never replaces a file it did not write)"
        )
    if not overwrite:
        hint = (
            "pass overwrite=True"
            if replace_hint == "overwrite"
            else f"pass {replace_hint}"
        )
        return (
            f"already holds a saved probe; {hint} to replace it or choose a new folder"
        )
    return None


def _is_entry_folder(path):
    return path.is_dir() and not path.is_symlink()


def _some(names, n=5):
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def remove_saved_files(old, folder, owner):
    """Remove the files a save recorded in ``old`` (the folder swapped out of
    ``folder``), then ``old`` if empty. Anything else is kept there, with a
    warning that says where and why: a file that appeared meanwhile, a
    recorded file changed since (a card the user edited), a file the system
    would not remove. The new probe is in place by then, so nothing here
    raises."""
    old = Path(old)
    keep = set(changed_files(old))
    failed = []
    for name in [*(recorded_files(old) or []), MANIFEST]:
        path = old / name
        if name not in keep and (path.is_file() or path.is_symlink()):
            try:
                path.unlink()
            except OSError as exc:
                failed.append(f"{name} ({exc.strerror or type(exc).__name__})")
    try:
        old.rmdir()
    except OSError:
        if failed:
            why = f"the old probe's {', '.join(failed)} could not be removed"
        elif keep:
            why = f"the old probe's {', '.join(sorted(keep))} changed since its save"
        else:
            why = "files that no save wrote appeared in it while it was being replaced"
        warnings.warn(
            f"{owner}: {os.fspath(folder)!r} holds the new probe; {why}: they are "
            f"kept in {os.fspath(old)!r}.",
            UserWarning,
            stacklevel=4,
        )
