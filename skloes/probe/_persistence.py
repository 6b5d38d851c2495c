"""Saving fitted probes without the model's weights; loading them without pickle.

A saved probe is a folder written by :func:`save_probe`: ``estimator.skops``,
the fitted estimator in skops' format (a zip of JSON and ``.npy`` files that
loads by constructing only types on an allow-list, never by unpickling), and
``manifest.json``, the model reference, the hash of its files and the list of
the files the save wrote (``files``), and ``README.md``, its model card. The
model's weights are never written:
loading finds them again from the reference and refuses when they changed or
are gone.

Trust (see :ref:`trust`): a save writes into a temporary sibling folder and
swaps it in, replacing only the files a save recorded; loading restores no
setting that runs code or chooses where files are written
(``trust_remote_code``, ``cache``): the caller passes them to
:func:`load_probe`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from skloes.extraction import HiddenStatesTransformer
from skloes.probe._card import CARD_FILE, model_card
from skloes.utils._optional import import_optional
from skloes.utils._version import VERSION

__all__ = ["load_probe", "save_probe"]

FORMAT = 1
ESTIMATOR_FILE, MANIFEST_FILE = "estimator.skops", "manifest.json"
RUNTIMES = ("auto", "torch", "onnx")
# What a folder saved before the manifest recorded its files holds.
_LEGACY_FILES = (ESTIMATOR_FILE,)
# Beyond skops' own trusted types (scikit-learn, numpy, scipy, builtins), a
# saved probe may hold skloes' estimator classes and the extractor's device
# (``torch.device(str)`` runs no user code). Nothing else without ``trusted``.
_EXTRA_TRUSTED = ("torch.device",)
# The packages whose estimator classes a saved probe may hold, imported here
# by their fixed names: a type name read from a file never imports a module.
_ESTIMATOR_PACKAGES = (
    "skloes.extraction",
    "skloes.selection",
    "skloes.probe",
    "skloes.heads",
    "skloes.metrics",
)


def _skops():
    return import_optional("skops.io")


def _is_skloes_estimator(name):
    """Whether ``module.Class`` names an estimator class of skloes itself.

    Only modules already imported (by :data:`_ESTIMATOR_PACKAGES`) are looked
    in: a name read from a saved file never imports anything.
    """
    for package in _ESTIMATOR_PACKAGES:
        importlib.import_module(package)
    module, _, attr = name.rpartition(".")
    if not module.startswith("skloes.") or module.startswith("skloes.cli"):
        return False
    cls = getattr(sys.modules.get(module), attr, None)
    return isinstance(cls, type) and issubclass(cls, BaseEstimator)


def _extractor_of(estimator, owner):
    """The fitted HiddenStatesTransformer a probe or pipeline starts with."""
    pipeline = getattr(estimator, "pipeline_", estimator)
    if isinstance(pipeline, Pipeline):
        first = pipeline.steps[0][1]
        if isinstance(first, HiddenStatesTransformer) and hasattr(first, "layers_"):
            return first
    raise TypeError(
        f"{owner}: `estimator` must be a fitted LayerProbeClassifier, "
        "LayerProbeRegressor or a fitted Pipeline that starts with a "
        f"HiddenStatesTransformer (see prune_layers); got {type(estimator).__name__}."
    )


# --------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------
def save_probe(
    estimator,
    path,
    *,
    overwrite=False,
    export=None,
    check_texts=None,
    report=None,
    data_name=None,
):
    """Save a fitted probe or pipeline to a folder, by default without the weights.

    The folder holds the fitted estimator in skops' format (no pickle), a
    manifest with the model reference, the hash of its files and the list of
    files the save wrote, and a model card (``README.md``: the model and its
    fingerprint, the layers and their stability, the training data, the
    cross-validated scores when ``report`` gives them, the precision and the
    limits); the model's weights stay where they are. :func:`load_probe`
    checks that hash. With ``export``, the folder also
    carries the model cut at the deepest selected block as an ONNX graph that
    pools the selected layers itself (so the folder then holds those blocks'
    weights), the tokenizer and the head: :func:`skloes.serving.load_exported`
    predicts from it without torch.

    The target is checked before anything is written: a file, the current
    folder or one above it, and a folder holding any file that a save did
    not write are refused, naming them. The probe is written into a
    temporary sibling folder, checked to load back, then swapped in, so that
    a crash leaves the old probe or the new one, never half of each.

    Read more in the :ref:`User Guide <probe>` and :ref:`trust`.

    Parameters
    ----------
    estimator : LayerProbeClassifier, LayerProbeRegressor or Pipeline
        Fitted; a pipeline must start with a fitted
        :class:`~skloes.extraction.HiddenStatesTransformer` (prune it first
        with :func:`prune_layers` so that predictions run only the layers it
        uses). Every object in it must load back: a lambda or a function
        defined inside another function is an error naming it.
    path : str or os.PathLike
        The folder to write (created).
    overwrite : bool, default=False
        Replace a probe already saved in ``path``. Only the files that save
        recorded are replaced; a folder holding anything else is never
        written to.

        .. versionchanged:: 0.3
           Replaces only the files a save recorded (it emptied any folder
           holding a ``manifest.json``).
    export : {"onnx-int8", "onnx"} or None, default=None
        Also write the exported graph: ``"onnx-int8"`` with int8 matrix
        products (ONNX Runtime's dynamic quantization: weights per output
        channel, activations at run time), ``"onnx"`` in float32. The graph
        is checked against the torch pipeline on ``check_texts`` and the
        check is stored in the manifest (a float32 graph that differs is
        refused; an int8 graph that predicts differently on more than 1 %
        of them warns). None writes no weights.

        .. versionadded:: 0.3
    check_texts : list of str or None, default=None
        Held-in texts (from the probe's fit) to check the export on, at most
        256 used; required with ``export``.

        .. versionadded:: 0.3
    report : LayerReport, dict or None, default=None
        A fitted :class:`~skloes.report.LayerReport` of the same data (or its
        ``summary()``): its cross-validated scores against the last layer and
        all layers, and the stability of the layers across its folds, go
        into the card (``skloes probe --save`` passes its own).

        .. versionadded:: 0.3
    data_name : str or None, default=None
        Where the training data came from, for the card.

        .. versionadded:: 0.3

    Returns
    -------
    path : pathlib.Path
        The folder written.

    See Also
    --------
    load_probe : Load it back.

    Examples
    --------
    >>> from skloes.probe import load_probe, save_probe
    >>> save_probe(probe, "my_probe")  # doctest: +SKIP
    PosixPath('my_probe')
    >>> load_probe("my_probe").predict(["a warm, funny film"])  # doctest: +SKIP
    array(['fresh'], dtype=object)
    """
    owner = "save_probe"
    _check_path(path, owner)
    _check_bool(overwrite, "overwrite", owner)
    extractor = _extractor_of(estimator, owner)
    _check_export_params(export, check_texts, owner)
    problem = save_target_problem(path, overwrite=overwrite, replace_hint="overwrite")
    if problem:
        raise ValueError(f"{owner}: `path` {os.fspath(path)!r} {problem}.")
    folder = _real_target(path)
    manifest = _manifest(estimator, extractor)
    manifest["carries_weights"] = export is not None
    staging = _staging_folder(folder, owner)
    try:
        files = []
        for writer in PROBE_WRITERS:
            files += writer(estimator, staging, manifest)
        files += _write_card(staging, estimator, extractor, report, data_name)
        if export is not None:
            manifest["export"] = _write_export(
                estimator, staging, export, check_texts, owner
            )
            files += [entry.name for entry in staging.iterdir()]
        manifest["files"] = sorted(set(files))
        _write_json(staging / MANIFEST_FILE, manifest)
        _check_loads_back(staging, owner)
        _swap_in(staging, folder, owner)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Path(path)


def _manifest(estimator, extractor):
    return {
        "format": FORMAT,
        "skloes_version": VERSION,
        "estimator": type(estimator).__name__,
        "model": None if extractor.model is None else os.fspath(extractor.model),
        "model_path": extractor.model_path_,
        "model_fingerprint": extractor.model_fingerprint_,
    }


def _write_estimator(estimator, folder, manifest):
    """The fitted estimator in skops' format."""
    _skops().dump(estimator, folder / ESTIMATOR_FILE)
    return [ESTIMATOR_FILE]


# What a save writes: each writer puts its files (plain files, no folders)
# into the staging folder, may add entries to the manifest, and returns the
# names it wrote; the manifest records them all in ``files``, and a later
# save replaces those and nothing else. A feature that saves more files
# appends its writer here.
PROBE_WRITERS = [_write_estimator]


def _write_card(folder, estimator, extractor, report, data_name):
    """The model card, ``README.md`` (see :func:`~skloes.probe._card.model_card`)."""
    card = model_card(estimator, extractor, report=report, data_name=data_name)
    (folder / CARD_FILE).write_text(card, encoding="utf-8")
    return [CARD_FILE]


def _check_export_params(export, check_texts, owner):
    from skloes.probe._export import EXPORTS

    if export is not None and export not in EXPORTS:
        raise ValueError(
            f"{owner}: `export` must be one of {', '.join(map(repr, EXPORTS))} or "
            f"None; got {export!r}."
        )
    if export is not None and (
        check_texts is None or isinstance(check_texts, str) or not len(check_texts)
    ):
        raise ValueError(
            f"{owner}: `check_texts` must be a non-empty list of held-in texts "
            f"when `export` is set (the export is checked on them); got "
            f"{check_texts!r}."
        )


def _write_export(estimator, staging, export, check_texts, owner):
    """The files of ``export`` written into ``staging``; the manifest entry.

    The one place where a save adds files beyond the estimator and the
    manifest: ``graph*.onnx``, ``tokenizer.json``, ``head.npz`` (or
    ``head.skops``), listed with their hashes in the returned entry.
    """
    from skloes.probe._export import write_export_files

    pipeline = getattr(estimator, "pipeline_", estimator)
    return write_export_files(pipeline, staging, export, check_texts, owner)


def _write_json(path, data):
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _real_target(path):
    folder = Path(path).expanduser()
    return folder.resolve() if folder.is_symlink() else folder


def save_target_problem(path, *, overwrite, replace_hint, reserved=None):
    """Why ``path`` cannot take a saved probe now, or None.

    The one check of a save's target, run by :func:`save_probe` and, before
    any work, by ``skloes probe --save``.

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
    return _writable_problem(folder)


def _place_problem(folder, reserved):
    """The current folder, one above it, or a reserved folder's place."""
    target, here = folder.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        return (
            "is the current folder or one above it; a probe needs a folder of "
            "its own, e.g. my_probe"
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
    recorded = _recorded_files(folder)
    if recorded is None:
        return (
            f"is not empty and holds no saved probe ({_some(names)}); choose "
            "a new folder (a save never writes into a folder it did not make)"
        )
    foreign = [name for name in names if name not in {*recorded, MANIFEST_FILE}]
    foreign += [name for name in recorded if _is_entry_folder(folder / name)]
    if foreign:
        return (
            f"holds a saved probe and files that no save wrote ({_some(foreign)}); "
            "move them, or choose a new folder (a save replaces only its own files)"
        )
    if not overwrite:
        hint = (
            "pass overwrite=True"
            if replace_hint == "overwrite"
            else (f"pass {replace_hint}")
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


def _recorded_files(folder):
    """The files a save recorded in ``folder``'s manifest, or None when the
    folder holds no readable probe manifest (then nothing there is ours)."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        manifest["model_fingerprint"]  # noqa: B018 - a probe manifest has it
    except (OSError, ValueError, KeyError, TypeError):
        return None
    files = manifest.get("files", list(_LEGACY_FILES))
    if not isinstance(files, list) or not all(map(_is_plain_name, files)):
        return None  # a record we did not write: trust none of it
    return files


def _is_plain_name(name):
    """A file name inside the folder: no separator, no ``..``, no hidden name."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not name.startswith(".")
        and os.path.basename(name) == name
        and "/" not in name
        and "\\" not in name
    )


def _writable_problem(folder):
    """The nearest existing folder must take files."""
    probe = folder
    while not probe.exists():
        probe = probe.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".skloes-write-test-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"is not writable ({exc.strerror or type(exc).__name__} on {probe})"
    return None


def _staging_folder(folder, owner):
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    except OSError as exc:
        raise ValueError(
            f"{owner}: cannot write next to `path` {os.fspath(folder)!r}: {exc}"
        ) from None


def _check_loads_back(staging, owner):
    """A save that :func:`load_probe` could never load is an error now,
    naming the objects at fault (a lambda, a function defined inside
    another function: skops stores them by a name that resolves to nothing)."""
    sio = _skops()
    file = staging / ESTIMATOR_FILE
    untrusted = sio.get_untrusted_types(file=file)
    lost = [name for name in untrusted if not _resolves(name)]
    if lost:
        raise ValueError(
            f"{owner}: `estimator` holds {', '.join(lost)}, which cannot be loaded "
            "back (a lambda, or a function defined inside another function, is "
            "stored by a name that leads nowhere); use a function defined at the "
            "top level of a module. Nothing was written."
        )
    try:
        sio.load(file, trusted=untrusted)
    except Exception as exc:  # anything that stops a load stops the save
        raise ValueError(
            f"{owner}: the saved `estimator` does not load back "
            f"({type(exc).__name__}: {_first_line(exc)}); nothing was written."
        ) from None


def _resolves(name):
    """Whether ``module.qualname`` names an object of an imported module."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module, rest = ".".join(parts[:cut]), parts[cut:]
        obj = sys.modules.get(module)
        if obj is None:
            continue
        for attr in rest:
            obj = getattr(obj, attr, None)
            if obj is None:
                return False
        return True
    return False


def _shared_mode(folder):
    """The mode the umask gives a new folder (``mkdtemp`` makes it 0700)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)


def _swap_in(staging, folder, owner):
    """Put the complete ``staging`` folder at ``folder``, atomically.

    Where the system can exchange two folders in one step (Linux), the old
    probe and the new swap places; elsewhere the old probe is moved aside
    first, so that at every instant ``folder`` is the old probe, the new one,
    or (for that instant only) absent with the old one kept aside. The old
    probe's recorded files are then removed, and nothing else.
    """
    _shared_mode(staging)
    if not folder.exists():
        os.rename(staging, folder)
        return
    if _exchange(staging, folder):
        _remove_saved_probe(staging, folder, owner)
        return
    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-old-"))
    os.rename(folder, aside / "probe")
    try:
        os.rename(staging, folder)
    except BaseException:
        os.rename(aside / "probe", folder)  # the old probe goes back
        aside.rmdir()
        raise
    _remove_saved_probe(aside / "probe", folder, owner)
    with contextlib.suppress(OSError):
        aside.rmdir()


def _exchange(a, b):
    """Swap two folders in one step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    at_cwd, exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def _remove_saved_probe(old, folder, owner):
    """Remove the files a save recorded in ``old``, then ``old`` if empty; a
    file that appeared meanwhile is kept, with a warning."""
    recorded = _recorded_files(old) or []
    for name in [*recorded, MANIFEST_FILE]:
        path = old / name
        if path.is_file() or path.is_symlink():
            path.unlink()
    try:
        old.rmdir()
    except OSError:
        warnings.warn(
            f"{owner}: files that no save wrote appeared in {os.fspath(folder)!r} "
            f"while it was being replaced; they are kept in {os.fspath(old)!r}.",
            UserWarning,
            stacklevel=4,
        )


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------
def load_probe(
    path, *, trusted=None, trust_remote_code=False, cache=None, runtime="auto"
):
    """Load a probe saved by :func:`save_probe`, checking the model's weights.

    The estimator is rebuilt from skops' format, constructing only trusted
    types (scikit-learn's, numpy's, skloes' own and those in ``trusted``);
    nothing is unpickled. The model is found again from its reference (a hub
    id, an offline bundle or a folder) and its files must hash as when the
    probe was fitted. A folder saved with ``export`` is served from its
    exported graph instead (``runtime="auto"``), as
    :func:`skloes.serving.load_exported` does, without torch.

    No setting saved in the folder can switch on code or choose where files
    are written: ``trust_remote_code`` and ``cache`` are the caller's, given
    here, whatever the saved probe says. A probe whose model needs its own
    Python code is refused, before any of that code runs, unless
    ``trust_remote_code=True``.

    Read more in the :ref:`User Guide <probe>` and :ref:`trust`.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by :func:`save_probe`. A damaged one (a file
        missing, not valid JSON or not a skops archive) is an error naming
        the folder and the file.
    trusted : list of str or None, default=None
        Further types to allow (``"module.Class"``), for a pipeline with an
        estimator from another library; the error of an untrusted type lists
        them.
    trust_remote_code : bool, default=False
        Allow a model whose folder ships its own Python code (a config or
        tokenizer ``auto_map``). Never read from the saved folder.

        .. versionadded:: 0.3
    cache : str, os.PathLike or None, default=None
        Hidden-states cache folder of the loaded probe (see
        :class:`~skloes.extraction.HiddenStatesTransformer`); never read from
        the saved folder, so a loaded probe writes no file where its saver
        chose.

        .. versionadded:: 0.3
    runtime : {"auto", "torch", "onnx"}, default="auto"
        What computes the features: ``"onnx"`` the folder's exported graph
        (ONNX Runtime, no torch), ``"torch"`` the model with torch, from its
        reference, as fitted; ``"auto"`` the exported graph when the folder
        has one, else torch.

        .. versionadded:: 0.3

    Returns
    -------
    estimator : LayerProbeClassifier, LayerProbeRegressor, Pipeline or \
ExportedProbe
        Ready to predict; an :class:`~skloes.serving.ExportedProbe` when the
        exported graph serves it.

    See Also
    --------
    save_probe : Save a fitted probe.

    Examples
    --------
    >>> from skloes.probe import load_probe
    >>> probe = load_probe("my_probe")  # doctest: +SKIP
    >>> probe.predict(["a warm, funny film"])  # doctest: +SKIP
    array(['fresh'], dtype=object)
    """
    owner = "load_probe"
    _check_path(path, owner)
    _check_bool(trust_remote_code, "trust_remote_code", owner)
    _check_trusted(trusted, owner)
    if cache is not None:
        _check_path(cache, owner, "cache")
    if runtime not in RUNTIMES:
        raise ValueError(
            f"{owner}: `runtime` must be one of {', '.join(map(repr, RUNTIMES))}; "
            f"got {runtime!r}."
        )
    folder = Path(path)
    manifest = _read_manifest(folder, owner)
    if runtime == "onnx" or (runtime == "auto" and "export" in manifest):
        from skloes.serving import load_exported

        return load_exported(folder, trusted=trusted)
    estimator = _read_estimator(folder, trusted, owner)
    extractor = _extractor_of(estimator, owner)
    _check_consistent(manifest, extractor, folder, owner)
    _apply_caller_settings(estimator, trust_remote_code=trust_remote_code, cache=cache)
    extractor._check_weights()  # the weights behind the reference, unchanged
    _check_remote_code(extractor, trust_remote_code, owner)
    return estimator


def _check_path(value, owner, param="path"):
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(
            f"{owner}: `{param}` must be a folder (a str or os.PathLike); got "
            f"{value!r}."
        )
    if "\x00" in os.fspath(value):  # the OS refuses it, in words of its own
        raise ValueError(f"{owner}: `{param}` holds a NUL character; got {value!r}.")


def _check_bool(value, param, owner):
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: `{param}` must be True or False; got {value!r}.")


def _check_trusted(trusted, owner):
    valid = trusted is None or (
        isinstance(trusted, (list, tuple))
        and all(isinstance(name, str) for name in trusted)
    )
    if not valid:
        raise TypeError(
            f"{owner}: `trusted` must be a list of type names ('module.Class') or "
            f"None; got {trusted!r}."
        )


def _damaged(folder, file, why):
    return ValueError(
        f"load_probe: {os.fspath(folder)!r} is a damaged saved probe: {file} {why}."
    )


def _read_manifest(folder, owner):
    file = folder / MANIFEST_FILE
    if not folder.is_dir():
        raise ValueError(
            f"{owner}: {os.fspath(folder)!r} is not a saved probe (no such folder)."
        )
    if not file.is_file():
        raise ValueError(
            f"{owner}: {os.fspath(folder)!r} is not a saved probe (it has no "
            f"{MANIFEST_FILE}; save_probe writes {MANIFEST_FILE} and "
            f"{ESTIMATOR_FILE})."
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise _damaged(folder, MANIFEST_FILE, f"is not valid JSON ({exc})") from None
    missing = [
        key
        for key in ("format", "model", "model_path", "model_fingerprint")
        if not isinstance(manifest, dict) or key not in manifest
    ]
    if missing:
        raise _damaged(folder, MANIFEST_FILE, f"lacks {', '.join(missing)}")
    if manifest["format"] != FORMAT:
        raise ValueError(
            f"{owner}: {os.fspath(folder)!r} was saved in format "
            f"{manifest['format']!r}; this skloes reads format {FORMAT}."
        )
    recorded = _recorded_files(folder)
    if recorded is None:
        raise _damaged(folder, MANIFEST_FILE, "has an invalid `files` record")
    for name in recorded:
        if not (folder / name).is_file():
            what = "is not a file" if (folder / name).exists() else "is missing"
            raise _damaged(folder, name, f"(recorded in {MANIFEST_FILE}) {what}")
    return manifest


def _read_estimator(folder, trusted, owner):
    """The estimator, built from its skops archive with trusted types only."""
    sio = _skops()
    file = folder / ESTIMATOR_FILE
    if not file.is_file():
        raise _damaged(folder, ESTIMATOR_FILE, "is missing")
    try:
        untrusted = sio.get_untrusted_types(file=file)
    except Exception as exc:  # BadZipFile, KeyError, JSONDecodeError...
        raise _damaged(folder, ESTIMATOR_FILE, _unreadable(exc)) from None
    allowed = _allowed_types(untrusted, trusted, owner)
    try:
        return sio.load(file, trusted=allowed)
    except Exception as exc:
        raise _damaged(folder, ESTIMATOR_FILE, _unreadable(exc)) from None


def _unreadable(exc):
    return (
        "is not a readable skops archive "
        f"({type(exc).__name__}: {_first_line(exc)[:200]})"
    )


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


def _check_consistent(manifest, extractor, folder, owner):
    """The manifest and the estimator name the same model."""
    model = None if extractor.model is None else os.fspath(extractor.model)
    pairs = [
        ("model", manifest["model"], model),
        ("model_path", manifest["model_path"], extractor.model_path_),
        (
            "model_fingerprint",
            manifest["model_fingerprint"],
            extractor.model_fingerprint_,
        ),
    ]
    for key, written, held in pairs:
        if written != held:
            raise ValueError(
                f"{owner}: {os.fspath(folder)!r} is inconsistent: its manifest "
                f"and its estimator name different models ({key} {written!r} "
                f"against {held!r})."
            )


def _apply_caller_settings(estimator, *, trust_remote_code, cache):
    """Replace the saved settings that run code or choose where files are
    written by the caller's: in the extractor and, for a probe, in its own
    parameters (which it gives its extractor at predict)."""
    _extractor_of(estimator, "load_probe").set_params(
        trust_remote_code=trust_remote_code, cache=cache
    )
    if hasattr(estimator, "pipeline_"):
        params = dict(estimator.extractor_params or {})
        params.pop("trust_remote_code", None)
        if trust_remote_code:
            params["trust_remote_code"] = True
        estimator.set_params(extractor_params=params or None, cache=cache)


def _check_remote_code(extractor, trust_remote_code, owner):
    """A model that ships its own code is refused unless the caller opted in."""
    from skloes.models._loading import RemoteCodeError, remote_code

    found = remote_code(extractor.model_path_)
    if found is not None and not trust_remote_code:
        raise RemoteCodeError(owner, extractor.model_path_, *found)


def _allowed_types(untrusted, trusted, owner):
    extra = set(trusted or ())
    allowed = [
        t
        for t in untrusted
        if t in _EXTRA_TRUSTED or t in extra or _is_skloes_estimator(t)
    ]
    refused = sorted(set(untrusted) - set(allowed))
    if refused:
        raise ValueError(
            f"{owner}: the saved estimator holds types that are not trusted: "
            f"{refused}. Load it only if you trust its source, with "
            f"trusted={refused}."
        )
    return allowed
