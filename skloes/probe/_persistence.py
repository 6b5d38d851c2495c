"""Saving fitted probes without the model's weights; loading them without pickle.

:func:`save_probe` writes a folder whose format :mod:`skloes.probe_folder`
defines (the fitted estimator in skops' format, the manifest, the model card
and, with ``export``, the exported graph); :func:`load_probe` reads it back,
finds the model again from its reference and refuses when its weights
changed or are gone. The model's weights are never written (an export holds
the blocks it runs, in its graph).

Trust (see :ref:`trust`): a save writes into a temporary sibling folder and
swaps it in (:mod:`skloes.core._atomic`), replacing only the files a save
recorded and that are still as it wrote them; loading restores no setting
that runs code or chooses where files are written (``trust_remote_code``,
``cache``): the caller passes them to :func:`load_probe`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import errno
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from sklearn.pipeline import Pipeline

import skloes.probe_folder as probe_folder
from skloes.core._atomic import FolderLock, staging_folder, swap_in
from skloes.core._contract import first_line
from skloes.core._digests import file_sha256
from skloes.extraction import HiddenStatesTransformer
from skloes.probe._card import model_card
from skloes.utils._optional import import_optional
from skloes.utils._validation import check_bool
from skloes.utils._version import VERSION

__all__ = ["load_probe", "save_probe"]

RUNTIMES = ("auto", "torch", "onnx")


def _skops():
    return import_optional("skops.io")


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
    probe_folder.check_folder_arg(path, owner)
    overwrite = check_bool(overwrite, owner, "overwrite")
    extractor = _extractor_of(estimator, owner)
    _check_export_params(export, check_texts, owner)
    problem = probe_folder.target_problem(
        path, overwrite=overwrite, replace_hint="overwrite"
    )
    if problem:
        raise ValueError(f"{owner}: `path` {os.fspath(path)!r} {problem}.")
    folder = _real_target(path)
    job = _SaveJob(estimator, extractor, export, check_texts, report, data_name, folder)
    seen = probe_folder.folder_state(folder)
    staging = staging_folder(folder, owner)
    try:
        _write_staging(job, staging)
        _swap(staging, folder, seen, overwrite, owner)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise _write_error(exc, path, owner) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Path(path)


@dataclass
class _SaveJob:
    """What one save writes: the estimator, its extractor and the options."""

    estimator: object
    extractor: object
    export: object
    check_texts: object
    report: object
    data_name: object
    folder: Path
    owner: str = "save_probe"

    def __post_init__(self):
        self.manifest = {
            "format": probe_folder.FORMAT,
            "skloes_version": VERSION,
            "estimator": type(self.estimator).__name__,
            "model": _model_reference(self.extractor),
            "model_path": self.extractor.model_path_,
            "model_fingerprint": self.extractor.model_fingerprint_,
            "carries_weights": self.export is not None,
        }


def _model_reference(extractor):
    return None if extractor.model is None else os.fspath(extractor.model)


def _write_staging(job, staging):
    """Every writer's files, then the manifest that records them with their
    hashes, then the check that the staged probe loads back."""
    files = []
    for writer in PROBE_WRITERS:
        files += writer(job, staging)
    job.manifest["files"] = sorted(set(files))
    job.manifest["sha256"] = probe_folder.file_hashes(staging, job.manifest["files"])
    probe_folder.write_manifest(staging, job.manifest)
    _check_loads_back(staging, job.owner)


def _write_estimator(job, staging):
    """The fitted estimator in skops' format."""
    _skops().dump(job.estimator, staging / probe_folder.ESTIMATOR)
    return [probe_folder.ESTIMATOR]


def _write_export(job, staging):
    """With ``export``: the graph, tokenizer and head, recorded in the
    manifest's ``export`` entry with their hashes and the check."""
    if job.export is None:
        return []
    from skloes.probe._export import write_export_files
    from skloes.probe._export_images import write_image_export_files

    pipeline = getattr(job.estimator, "pipeline_", job.estimator)
    image = getattr(pipeline.steps[0][1], "modality_", None) == "image"
    write = write_image_export_files if image else write_export_files
    entry = write(pipeline, staging, job.export, job.check_texts, job.owner)
    job.manifest["export"] = probe_folder.seal_export(entry)
    parts = ("graph", "tokenizer", "head")  # an image export has no tokenizer
    return [entry[part]["file"] for part in parts if part in entry]


def _write_card(job, staging):
    """The model card, written last: it describes what the folder holds."""
    card = model_card(
        job.estimator,
        job.extractor,
        report=job.report,
        data_name=job.data_name,
        export=job.manifest.get("export"),
        folder=job.folder,
    )
    (staging / probe_folder.CARD).write_text(card, encoding="utf-8")
    return [probe_folder.CARD]


# What a save writes, in order: each writer puts its files (plain files, no
# folders) into the staging folder, may add entries to the manifest, and
# returns the names it wrote; the manifest records them all, with their
# hashes, and a later save replaces those and nothing else. A feature that
# saves more files appends its writer here, before the card.
PROBE_WRITERS = [_write_estimator, _write_export, _write_card]


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


def _real_target(path):
    folder = Path(path).expanduser()
    return folder.resolve() if folder.is_symlink() else folder


def _swap(staging, folder, seen, overwrite, owner):
    """Swap the staged probe in, unless ``folder`` changed since this save
    checked it: of two writers, one wins and the other is told; a file a user
    put there meanwhile (a card edited, a folder filled) stops the save as it
    would have stopped it at the start."""
    with FolderLock(folder.parent, wait=True):
        state = probe_folder.folder_state(folder)
        if state != seen:
            what = (
                "was removed"
                if state is None and not folder.exists()
                else "was written by another save"
                if state is not None
                else "changed"
            )
            kept = "; its probe is kept" if state is not None else ""
            raise ValueError(
                f"{owner}: `path` {os.fspath(folder)!r} {what} while this save "
                f"ran{kept} and nothing was written (save again, or choose a new "
                "folder)."
            )
        problem = probe_folder.target_problem(
            folder, overwrite=overwrite, replace_hint="overwrite"
        )
        if problem:
            raise ValueError(
                f"{owner}: `path` {os.fspath(folder)!r} {problem} (it changed "
                "while this save ran); nothing was written."
            )
        try:
            swap_in(
                staging,
                folder,
                lambda old: probe_folder.remove_saved_files(old, folder, owner),
            )
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            raise ValueError(
                f"{owner}: `path` {os.fspath(folder)!r} was filled by another "
                "process while this save ran; nothing was written."
            ) from None


def _write_error(exc, path, owner):
    """A failed write (a full disk, a vanished folder) as one line that says
    nothing was written."""
    error = OSError(
        f"{owner}: cannot write the probe to {os.fspath(path)!r} "
        f"({exc.strerror or first_line(exc)}); nothing was written."
    )
    error.errno = exc.errno
    return error


def _check_loads_back(staging, owner):
    """A save that :func:`load_probe` could never load is an error now,
    naming the objects at fault (a lambda, a function defined inside
    another function: skops stores them by a name that resolves to nothing)."""
    sio = _skops()
    file = staging / probe_folder.ESTIMATOR
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
            f"({type(exc).__name__}: {first_line(exc)}); nothing was written."
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
    probe_folder.check_folder_arg(path, owner)
    trust_remote_code = check_bool(trust_remote_code, owner, "trust_remote_code")
    probe_folder.check_trusted(trusted, owner)
    if cache is not None:
        probe_folder.check_folder_arg(cache, owner, "cache")
    if runtime not in RUNTIMES:
        raise ValueError(
            f"{owner}: `runtime` must be one of {', '.join(map(repr, RUNTIMES))}; "
            f"got {runtime!r}."
        )
    folder = Path(path)
    manifest = probe_folder.read_manifest(folder, owner)
    if runtime == "onnx" or (runtime == "auto" and "export" in manifest):
        from skloes.serving import open_exported

        export = probe_folder.export_entry(manifest, folder, owner)
        return open_exported(folder, export, trusted=trusted, owner=owner)
    estimator = _read_estimator(folder, manifest, trusted, owner)
    extractor = _extractor_of(estimator, owner)
    _check_consistent(manifest, extractor, folder, owner)
    _apply_caller_settings(estimator, trust_remote_code=trust_remote_code, cache=cache)
    extractor._check_weights()  # the weights behind the reference, unchanged
    _check_remote_code(extractor, trust_remote_code, owner)
    return estimator


def _read_estimator(folder, manifest, trusted, owner):
    """The estimator, built from its skops archive with trusted types only."""
    sio = _skops()
    file = folder / probe_folder.ESTIMATOR
    if not file.is_file():
        raise probe_folder.damaged(folder, probe_folder.ESTIMATOR, "is missing")
    recorded = manifest.get("sha256") or {}
    if probe_folder.ESTIMATOR in recorded and file_sha256(file) != recorded.get(
        probe_folder.ESTIMATOR
    ):
        raise probe_folder.damaged(
            folder,
            probe_folder.ESTIMATOR,
            "does not hash as when it was saved (tampered with, or from another "
            "save); refusing to load it",
        )
    try:
        untrusted = sio.get_untrusted_types(file=file)
    except Exception as exc:  # BadZipFile, KeyError, JSONDecodeError...
        raise probe_folder.damaged(
            folder, probe_folder.ESTIMATOR, _unreadable(exc)
        ) from None
    allowed = probe_folder.allowed_types(untrusted, trusted, owner)
    try:
        return sio.load(file, trusted=allowed)
    except Exception as exc:
        raise probe_folder.damaged(
            folder, probe_folder.ESTIMATOR, _unreadable(exc)
        ) from None


def _unreadable(exc):
    return (
        "is not a readable skops archive "
        f"({type(exc).__name__}: {first_line(exc)[:200]})"
    )


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
