"""Saving fitted probes without the model's weights; loading them without pickle.

A saved probe is a folder of two files: ``estimator.skops``, the fitted
estimator in skops' format (a zip of JSON and ``.npy`` files that loads by
constructing only types on an allow-list, never by unpickling), and
``manifest.json``, the model reference and the hash of its files. The model's
weights are never written: loading finds them again from the reference and
refuses when they changed or are gone.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from skloes.extraction import HiddenStatesTransformer
from skloes.utils._optional import import_optional
from skloes.utils._version import VERSION

__all__ = ["load_probe", "save_probe"]

FORMAT = 1
ESTIMATOR_FILE, MANIFEST_FILE = "estimator.skops", "manifest.json"
RUNTIMES = ("auto", "torch", "onnx")
# Beyond skops' own trusted types (scikit-learn, numpy, scipy, builtins), a
# saved probe may hold skloes' estimator classes and the extractor's device
# (``torch.device(str)`` runs no user code). Nothing else without ``trusted``.
_EXTRA_TRUSTED = ("torch.device",)


def _skops():
    return import_optional("skops.io")


def _is_skloes_estimator(name):
    """Whether ``module.Class`` names an estimator class of skloes itself."""
    module, _, attr = name.rpartition(".")
    if not module.startswith("skloes."):
        return False
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return False
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


def save_probe(estimator, path, *, overwrite=False, export=None, check_texts=None):
    """Save a fitted probe or pipeline to a folder, by default without the weights.

    The folder holds the fitted estimator in skops' format (no pickle) and a
    manifest with the model reference and the hash of its files; the model's
    weights stay where they are. :func:`load_probe` checks that hash. With
    ``export``, the folder also carries the model cut at the deepest selected
    block as an ONNX graph that pools the selected layers itself (so the
    folder then holds those blocks' weights), the tokenizer and the head:
    :func:`skloes.serving.load_exported` predicts from it without torch.

    Read more in the :ref:`User Guide <probe>`.

    Parameters
    ----------
    estimator : LayerProbeClassifier, LayerProbeRegressor or Pipeline
        Fitted; a pipeline must start with a fitted
        :class:`~skloes.extraction.HiddenStatesTransformer` (prune it first
        with :func:`prune_layers` so that predictions run only the layers it
        uses).
    path : str or os.PathLike
        The folder to write (created).
    overwrite : bool, default=False
        Replace a probe already saved in ``path``.
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
    extractor = _extractor_of(estimator, owner)
    _check_export_params(export, check_texts, owner)
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{owner}: `path` {str(folder)!r} is a file; give a folder.")
    if folder.is_dir() and any(folder.iterdir()):
        if not overwrite or not (folder / MANIFEST_FILE).is_file():
            raise ValueError(
                f"{owner}: `path` {str(folder)!r} is not empty; choose a new folder"
                + (
                    " or pass overwrite=True."
                    if (folder / MANIFEST_FILE).is_file()
                    else " (it holds no saved probe, so it is never overwritten)."
                )
            )
    manifest = {
        "format": FORMAT,
        "skloes_version": VERSION,
        "estimator": type(estimator).__name__,
        "model": None if extractor.model is None else os.fspath(extractor.model),
        "model_path": extractor.model_path_,
        "model_fingerprint": extractor.model_fingerprint_,
        "carries_weights": export is not None,
    }
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        _skops().dump(estimator, staging / ESTIMATOR_FILE)
        if export is not None:
            manifest["export"] = _write_export(
                estimator, staging, export, check_texts, owner
            )
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def load_probe(path, *, trusted=None, runtime="auto"):
    """Load a probe saved by :func:`save_probe`, checking the model's weights.

    The estimator is rebuilt from skops' format, constructing only trusted
    types (scikit-learn's, numpy's, skloes' own and those in ``trusted``);
    nothing is unpickled. The model is found again from its reference (a hub
    id, an offline bundle or a folder) and its files must hash as when the
    probe was fitted. A folder saved with ``export`` is served from its
    exported graph instead (``runtime="auto"``), as
    :func:`skloes.serving.load_exported` does, without torch.

    Read more in the :ref:`User Guide <probe>`.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by :func:`save_probe`.
    trusted : list of str or None, default=None
        Further types to allow (``"module.Class"``), for a pipeline with an
        estimator from another library; the error of an untrusted type lists
        them.
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
    folder = Path(path)
    if runtime not in RUNTIMES:
        raise ValueError(
            f"{owner}: `runtime` must be one of {', '.join(map(repr, RUNTIMES))}; "
            f"got {runtime!r}."
        )
    manifest = _read_manifest(folder, owner)
    if runtime == "onnx" or (runtime == "auto" and "export" in manifest):
        from skloes.serving import load_exported

        return load_exported(folder, trusted=trusted)
    sio = _skops()
    file = folder / ESTIMATOR_FILE
    allowed = _allowed_types(sio.get_untrusted_types(file=file), trusted, owner)
    estimator = sio.load(file, trusted=allowed)
    extractor = _extractor_of(estimator, owner)
    if extractor.model_fingerprint_ != manifest["model_fingerprint"]:
        raise ValueError(
            f"{owner}: {str(folder)!r} is inconsistent: its manifest "
            "and its estimator name different model files."
        )
    extractor._check_weights()  # the weights behind the reference, unchanged
    return estimator


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


def _read_manifest(folder, owner):
    file = folder / MANIFEST_FILE
    if not file.is_file() or not (folder / ESTIMATOR_FILE).is_file():
        raise ValueError(
            f"{owner}: {str(folder)!r} is not a saved probe (it needs "
            f"{MANIFEST_FILE} and {ESTIMATOR_FILE}, as written by save_probe)."
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
        fmt = manifest["format"]
        manifest["model_fingerprint"]  # noqa: B018 - must be there
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f"{owner}: {str(file)!r} is not a valid probe manifest."
        ) from None
    if fmt != FORMAT:
        raise ValueError(
            f"{owner}: {str(folder)!r} was saved in format {fmt}; "
            f"this skloes reads format {FORMAT}."
        )
    return manifest


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
