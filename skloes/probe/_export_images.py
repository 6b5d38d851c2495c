"""Exporting an image probe: the vision encoder cut at its deepest selected block.

:func:`write_image_export_files` is :func:`skloes.probe._export.write_export_files`
for a vision model: the graph takes ``pixel_values`` and returns the pooled
selected layers (:class:`~skloes.models._graph_images.PooledImageLayers`); in
place of a tokenizer the manifest records the model's image processor as a
spec of plain numbers (:func:`skloes.core._pixels.processor_spec`), which the
torch-free server applies with Pillow and numpy. The save checks that this
preprocessing gives the processor's own pixel values on the check images,
then the graph against the torch pipeline as for texts (float32 refused
beyond the tolerance, int8 warned below 99 % agreement).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

import skloes.probe_folder as probe_folder
from skloes.utils._optional import import_optional

__all__ = ["write_image_export_files"]

# The torch-free preprocessing must give the processor's pixel values to
# this (absolute; normalized pixel values are of order 1). Pillow's resize
# and the float32 steps are the processor's own, so they agree exactly on
# transformers' Pillow backend.
PIXEL_TOLERANCE = 1e-5
# Images of the traced sample batch.
SAMPLE_IMAGES = 8


def _pixel_check(reference, spec, items, owner):
    """The largest difference between the torch-free preprocessing and the
    model's image processor on ``items``; an error beyond the tolerance."""
    from skloes.core._pixels import pixel_values
    from skloes.models._inputs import encode_batch

    theirs = encode_batch(
        reference.processor_, "image", items, config=reference.model_.config
    )["pixel_values"].numpy()
    ours = pixel_values(items, spec, owner=owner)
    gap = float(np.abs(ours - theirs).max()) if ours.shape == theirs.shape else np.inf
    if not gap <= PIXEL_TOLERANCE:
        raise ValueError(
            f"{owner}: the model's image processor ({spec['processor']}, "
            f"{type(reference.processor_).__name__}) gives pixel values that the "
            f"torch-free preprocessing (Pillow and numpy, as transformers' Pillow "
            f"backend) does not reproduce (they differ by {gap:.2e}); save without "
            "`export`."
        )
    return gap


def _sample(reference, items):
    """The traced batch: ``pixel_values`` of a few check images (and
    ViT-MAE's in-order noise, for the last-state probe)."""
    from skloes.models._inputs import encode_batch, identity_noise

    model = reference.model_
    sample = encode_batch(
        reference.processor_, "image", items[:SAMPLE_IMAGES], config=model.config
    )
    full = dict(sample)
    if reference._loaded_family.fixed_order:
        full["noise"] = identity_noise(sample["pixel_values"], model.config)
    return sample, full


def write_image_export_files(pipeline, folder, export, check_images, owner) -> dict:
    """Write the exported graph and head of an image ``pipeline`` into
    ``folder``; return the manifest's ``export`` entry.

    Parameters
    ----------
    pipeline : sklearn.pipeline.Pipeline
        Fitted; its first step a ``HiddenStatesTransformer`` of an image model.
    folder : pathlib.Path
        The staging folder.
    export : {"onnx", "onnx-int8"}
        The graph's format and arithmetic.
    check_images : list
        Held-in images (any form the extractor reads) the export is checked on.
    owner : str
        Name used in error messages.

    Returns
    -------
    entry : dict
        The ``export`` entry: ``modality`` ``"image"``, the
        ``image_processor`` spec, the graph, the head and the check.
    """
    from skloes.core._images import ready_shape
    from skloes.core._pixels import processor_spec
    from skloes.models._graph_images import PooledImageLayers
    from skloes.models._inputs import check_inputs
    from skloes.probe._export import (
        CHECK_MAX_TEXTS,
        EXPORTS,
        _check,
        _check_exportable,
        _float_reference,
        _load_staged,
        _write_graph,
        _write_head,
    )

    ort = import_optional("onnxruntime", extra="export")
    extractor = pipeline.steps[0][1]
    _check_exportable(extractor, owner)
    precision = EXPORTS[export]
    items = check_inputs(list(check_images)[:CHECK_MAX_TEXTS], "image", owner=owner)
    reference = _float_reference(extractor)
    config = reference.model_.config
    shape = ready_shape(config)
    channels = shape[0] if shape is not None else 3
    spec = processor_spec(reference.processor_, shape, channels, owner=owner)
    pixel_gap = _pixel_check(reference, spec, items, owner)
    sample, full = _sample(reference, items)
    module = PooledImageLayers(
        reference.model_,
        extractor.layers_,
        reference.pooling_,
        reference.exclude_tokens_,
        reference.n_prefix_tokens_,
        fixed_order=reference._loaded_family.fixed_order,
        sample=full,
    )
    entry = {
        "format": probe_folder.EXPORT_FORMAT,
        "runtime": "onnxruntime",
        "runtime_version": ort.__version__,
        "precision": precision,
        "modality": "image",
        "layers": [int(l) for l in extractor.layers_],
        "pooling": extractor.pooling_,
        "exclude_tokens": reference.exclude_tokens_,
        "n_prefix_tokens": int(reference.n_prefix_tokens_),
        "batching": {"batch_size": int(extractor.batch_size), "max_batch_tokens": None},
        "image_processor": spec,
        "graph": _write_graph(
            reference, extractor.layers_, precision, folder, sample, owner, module
        ),
        "head": _write_head(pipeline, folder, owner),
    }
    exported = _load_staged(folder, entry, owner)
    entry["check"] = _check(exported, reference, pipeline, items, precision, owner)
    entry["check"]["max_abs_pixel_diff"] = pixel_gap
    return entry
