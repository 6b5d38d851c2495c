"""What a job's inputs are (texts or image files), and a blank input to fit on.

A job's input column holds strings: texts for a text model, image file paths
for an image model (read with Pillow on the worker, see :ref:`images-in`).
The model says which; a two-tower checkpoint (CLIP, SigLIP) takes both, and
its first rows say which tower the job runs (image paths: the vision tower).
The driver and every worker fit their extractor on :func:`blank_inputs` of
that modality, without reading the data.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

__all__ = ["blank_inputs", "job_modality"]

# Rows of the input that decide the tower of a two-tower checkpoint.
PEEK_ROWS = 64


def blank_inputs(modality: str) -> list:
    """One input of ``modality``, to fit an extractor without the data.

    ``fit`` reads the model's settings, not its inputs' values: a text
    ``"."``, a black 8 x 8 grey image (which also routes a two-tower
    checkpoint to its vision tower), or a tenth of a second of silence.

    Parameters
    ----------
    modality : {"text", "image", "audio"}
        The job's inputs.

    Returns
    -------
    inputs : list
    """
    if modality == "image":
        return [np.zeros((8, 8), dtype=np.uint8)]
    if modality == "audio":
        return [np.zeros(1600, dtype=np.float32)]
    return ["."]


def job_modality(params, source, owner) -> str:
    """The modality of a job: the model's, or for a two-tower checkpoint
    the input's (``"image"`` when its first rows are all image files).

    Parameters
    ----------
    params : dict
        The job's extractor parameters (``model``, ``extractor_params``
        folded in: ``trust_remote_code``).
    source : skloes.scale._input.InputSource
        The job's input.
    owner : str
        Named in error messages.

    Returns
    -------
    modality : {"text", "image", "audio"}
    """
    from skloes.core._images import image_or_text
    from skloes.models._loading import (
        detect_modality,
        is_two_tower,
        read_config,
        resolve_model_path,
    )
    from skloes.scale._input import TEXT

    path = resolve_model_path(params.get("model"), owner=owner)
    trust = bool(params.get("trust_remote_code", False))
    config = read_config(path, trust_remote_code=trust, owner=owner)
    if not is_two_tower(config):
        return detect_modality(config)
    for _, table in source.chunks(PEEK_ROWS):
        return image_or_text(table.column(TEXT).to_pylist())
    return "text"
