"""Audio batches whose clips' states never depend on their batch.

Speech encoders differ in what padding does to a clip (see the user guide,
:ref:`speech-batching`); the model family (:mod:`skloes.models._families`,
``Family.audio_batching``) names one of three rules, and this module applies
it to the batches (:func:`audio_batches`), the model inputs
(:func:`encode_audio`) and the pooling mask (:func:`frame_mask`):

``"mask"``
    Pad to the batch's longest clip and pass the sample-level attention mask
    (wav2vec2, HuBERT and WavLM with ``feat_extract_norm="layer"``): the
    feature encoder's layer norm is per frame and the padded frames are
    masked, so padding changes nothing beyond float rounding.
``"equal_length"``
    Batch only clips of one length, with no padding and no mask (wav2vec2,
    HuBERT and WavLM with ``feat_extract_norm="group"``, the pretrained base
    models): the first convolution's group norm normalises over time,
    padding included, so a zero-padded clip has other states in every frame,
    mask or not (Hugging Face's guidance for these models: no attention
    mask).
``"window"``
    Pad every clip to the model's fixed window (Whisper: 30 s of log-mel
    frames, which its encoder requires) and pool only the frames of the real
    audio (Whisper: one encoder frame per 20 ms): each clip is padded the same
    way whatever its batch.

May import: utils, core, models.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.core._torch import torch

__all__ = ["AUDIO_RULES", "audio_batches", "encode_audio", "frame_mask"]

AUDIO_RULES = ("mask", "equal_length", "window")


def audio_batches(lengths, batch_size: int, rule: str) -> list:
    """Index arrays of the forward passes over clips of ``lengths`` samples.

    Parameters
    ----------
    lengths : sequence of int
        Each clip's number of samples.
    batch_size : int
        Clips per pass, at most.
    rule : {"mask", "equal_length", "window"}
        The family's rule (see the module's docstring).

    Returns
    -------
    batches : list of ndarray of int
        Longest clips first; under ``"equal_length"`` every batch holds clips
        of one length only (a length shared by no other clip runs alone).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    if rule != "equal_length":
        return [
            order[start : start + batch_size]
            for start in range(0, len(order), batch_size)
        ]
    batches = []
    for length in dict.fromkeys(lengths[order].tolist()):
        same = order[lengths[order] == length]
        batches += [
            same[start : start + batch_size]
            for start in range(0, len(same), batch_size)
        ]
    return batches


def encode_audio(processor, batch, rule: str, *, device="cpu") -> dict:
    """Model inputs of one batch of 1-D float waveforms at the model's rate.

    ``"mask"``: padded to the longest, with the sample-level attention mask.
    ``"equal_length"``: unpadded and unmasked (the clips of a batch from
    :func:`audio_batches` have one length; clips of several lengths, as a
    fine-tuner's random batches, are zero-padded without a mask, Hugging
    Face's way for these models). ``"window"``: the processor's own fixed
    window (Whisper's 30 s, longer clips cropped to it), with its frame-level
    attention mask, which :func:`frame_mask` reduces to encoder frames.

    Returns
    -------
    inputs : dict of str to torch.Tensor
        Keyword arguments for ``model(**inputs)``.
    """
    rate = getattr(processor, "sampling_rate", None)
    if rule == "window":
        inputs = processor(
            list(batch),
            sampling_rate=rate,
            return_attention_mask=True,
            return_tensors="pt",
        )
    else:
        inputs = processor(
            list(batch),
            sampling_rate=rate,
            padding=True,
            return_attention_mask=rule == "mask",
            return_tensors="pt",
        )
        if rule != "mask":
            inputs.pop("attention_mask", None)
    return {
        key: value.to(device)
        for key, value in inputs.items()
        if isinstance(value, torch.Tensor)
    }


def frame_mask(model, inputs, n_frames: int, rule: str):
    """(B, n_frames) long mask of the hidden states' frames of real audio.

    ``"mask"``: the sample-level mask reduced to frames with the model's own
    length arithmetic. ``"window"``: the processor's mask over log-mel frames
    taken every ``stride`` frames, ``stride`` the encoder's downsampling
    (Whisper: 2, so one encoder frame per 20 ms; a partly real frame counts as
    real). ``"equal_length"`` (no mask): every frame.
    """
    mask = inputs.get("attention_mask")
    first = next(iter(inputs.values()))
    if mask is not None and mask.shape[1] == n_frames:
        return mask.long()
    if mask is not None and rule == "window":
        stride = mask.shape[1] // n_frames
        return mask[:, ::stride][:, :n_frames].long()
    if mask is not None and hasattr(model, "_get_feature_vector_attention_mask"):
        return model._get_feature_vector_attention_mask(n_frames, mask).long()
    return torch.ones(first.shape[0], n_frames, dtype=torch.long, device=first.device)
