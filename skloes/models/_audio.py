"""Audio as users hold it, and batches whose clips' states never depend on
their batch.

:func:`read_audio` turns each clip (a 1-D or 2-D array or tensor, a WAV file
path, a Hugging Face ``datasets`` audio dict) into one float32 mono waveform
at the model's sampling rate (see the user guide, :ref:`audio-in`): integer
PCM scaled by its dtype's range, channels averaged, other rates resampled
with a polyphase filter (:func:`scipy.signal.resample_poly`), clips longer
than a fixed-window model's window (Whisper: 30 s) cropped to it. The same
sound then hashes the same in the cache whatever form it came in.

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

import io
import json
import os
import warnings
from math import gcd

import numpy as np

from skloes.core._torch import torch
from skloes.utils._optional import import_optional

__all__ = [
    "AUDIO_RULES",
    "audio_batches",
    "encode_audio",
    "frame_mask",
    "model_audio",
    "read_audio",
]

AUDIO_RULES = ("mask", "equal_length", "window")
# A 2-D clip's channel axis is its shorter one, of at most this many channels.
MAX_CHANNELS = 8
# Files read without an optional reader (scipy.io.wavfile).
WAV_ENDINGS = (".wav", ".wave")


def model_audio(path) -> tuple:
    """``(sampling rate, window in samples)`` of an audio model's feature
    extractor, read from its folder's ``preprocessor_config.json``.

    Returns
    -------
    rate : int or None
        The rate its clips are given at (None when the file does not say).
    window : int or None
        The fixed window of a model that pads every clip to one length
        (Whisper: ``n_samples``, 30 s), else None.
    """
    try:
        with open(
            os.path.join(path, "preprocessor_config.json"), encoding="utf-8"
        ) as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None, None
    rate = config.get("sampling_rate")
    rate = int(rate) if isinstance(rate, (int, float)) and rate > 0 else None
    window = config.get("n_samples")
    if window is None and config.get("chunk_length") and rate:
        window = int(config["chunk_length"]) * rate
    fixed = config.get("feature_extractor_type") == "WhisperFeatureExtractor"
    return rate, (int(window) if fixed and window else None)


def read_audio(
    items,
    owner: str = "skloes",
    *,
    sampling_rate=None,
    model_rate=None,
    resample: bool = True,
    window=None,
) -> list:
    """Each clip as a float32 mono waveform at the model's sampling rate.

    Parameters
    ----------
    items : list
        1-D waveforms; 2-D ``(n_samples, n_channels)`` (as
        :func:`scipy.io.wavfile.read` and soundfile give) or
        ``(n_channels, n_samples)`` (as librosa gives) arrays, the shorter
        axis (at most 8) taken as the channels and averaged; torch tensors;
        WAV file paths (:mod:`scipy.io.wavfile`; FLAC, OGG and the other
        formats libsndfile reads through the optional ``soundfile``); Hugging
        Face ``datasets`` audio dicts (``{"array", "sampling_rate"}``, or
        undecoded ``{"bytes"}`` / ``{"path"}``). Integer PCM is scaled by its
        dtype's range (int16 by 32,768, uint8 around 128) to -1..1.
    owner : str, default="skloes"
        Name used in error messages.
    sampling_rate : int or None, default=None
        The rate of the arrays given (files and dicts carry their own); None
        is the model's.
    model_rate : int or None, default=None
        The model's rate (:func:`model_audio`); None takes every clip as it
        is (no rate known to resample to).
    resample : bool, default=True
        Resample clips at another rate to ``model_rate`` with a polyphase
        filter; False refuses them, naming both rates.
    window : int or None, default=None
        A fixed-window model's window in samples (Whisper: 480,000): longer
        clips are cropped to their first ``window`` samples, with a warning.

    Returns
    -------
    waves : list of ndarray of shape (n_samples,), dtype float32
    """
    out, cropped = [], []
    for i, item in enumerate(items):
        wave, rate = _read_one(item, i, owner)
        rate = rate or sampling_rate or model_rate
        if model_rate is not None and rate != model_rate:
            if not resample:
                raise ValueError(
                    f"{owner}: clip {i} of `X` is at {rate} Hz but the model takes "
                    f"{model_rate} Hz; resample it, or set `resample=True` to "
                    "have it resampled."
                )
            wave = _resample(wave, rate, model_rate)
        if window is not None and len(wave) > window:
            cropped.append(i)
            wave = wave[:window]
        out.append(np.ascontiguousarray(wave, dtype=np.float32))
    if cropped:
        seconds = window / model_rate if model_rate else None
        length = f"{seconds:g} s" if seconds else f"{window} samples"
        warnings.warn(
            f"{owner}: {len(cropped)} clip(s) of `X` (first: {cropped[0]}) are "
            f"longer than the model's window of {length}; each is cropped to its "
            "first window (its states are those of the window).",
            UserWarning,
            stacklevel=4,
        )
    return out


def _read_one(item, i, owner):
    """``(float mono wave, rate or None)`` of one clip."""
    rate = None
    if isinstance(item, (str, np.str_, os.PathLike)):
        wave, rate = _read_file(_audio_path(item, i, owner), i, owner)
    elif isinstance(item, dict):
        wave, rate = _from_dict(item, i, owner)
    else:
        if hasattr(item, "detach"):  # a torch tensor
            item = item.detach().cpu().numpy()
        wave = np.asarray(item)
    return _mono_float(wave, i, owner), rate


def _audio_path(item, i, owner) -> str:
    text = os.fspath(item) if not isinstance(item, np.str_) else str(item)
    path = os.path.expanduser(text)
    if not os.path.isfile(path):
        raise TypeError(
            f"{owner}: `X` holds strings but the model takes audio waveforms or "
            f"audio file paths; item {i} ({text[:40]!r}) is not a file here."
        )
    return path


def _read_file(source, i, owner):
    """``(samples, rate)`` of a WAV file (scipy) or another format
    (soundfile); ``source`` a path or a file object of bytes."""
    name = source if isinstance(source, str) else "its bytes"
    ending = os.path.splitext(source)[1].lower() if isinstance(source, str) else ""
    if not isinstance(source, str) or ending in WAV_ENDINGS:
        from scipy.io import wavfile

        try:
            rate, wave = wavfile.read(source)
            return wave, int(rate)
        except (ValueError, OSError, EOFError) as exc:
            if isinstance(source, str):
                raise ValueError(
                    f"{owner}: item {i} of `X` cannot be read as a WAV file "
                    f"({name!r:.80}): {exc}"
                ) from None
            source.seek(0)  # bytes of another format: soundfile's turn
    soundfile = import_optional("soundfile", extra="audio")
    try:
        wave, rate = soundfile.read(source, always_2d=False)
    except Exception as exc:  # soundfile.LibsndfileError and its kin
        raise ValueError(
            f"{owner}: item {i} of `X` cannot be read as audio ({name!r:.80}): {exc}"
        ) from None
    return wave, int(rate)


def _from_dict(item, i, owner):
    """A Hugging Face ``datasets`` audio dict: its decoded array and rate,
    else its bytes, else its file."""
    if item.get("array") is not None:
        rate = item.get("sampling_rate")
        if not isinstance(rate, (int, np.integer)) or rate <= 0:
            raise ValueError(
                f"{owner}: item {i} of `X` is an audio dict whose 'sampling_rate' "
                f"must be a positive int; got {rate!r}."
            )
        return np.asarray(item["array"]), int(rate)
    if item.get("bytes") is not None:
        return _read_file(io.BytesIO(item["bytes"]), i, owner)
    if item.get("path") is not None:
        return _read_file(_audio_path(item["path"], i, owner), i, owner)
    raise ValueError(
        f"{owner}: item {i} of `X` is a dict but not a Hugging Face datasets "
        "audio: it must hold 'array' and 'sampling_rate', 'bytes' or 'path' (not "
        f"None); got keys {sorted(map(str, item))}."
    )


def _mono_float(wave, i, owner):
    """A 1-D float waveform: integer PCM scaled by its dtype's range, the
    channels of a 2-D clip averaged."""
    if wave.dtype.kind not in "iuf" or wave.ndim not in (1, 2) or wave.size == 0:
        raise ValueError(
            f"{owner}: `X` must hold non-empty waveforms for an audio model: 1-D, "
            f"or 2-D with at most {MAX_CHANNELS} channels; item {i} has shape "
            f"{wave.shape} and dtype {wave.dtype}."
        )
    if wave.dtype.kind == "i":
        wave = wave.astype(np.float64) / -float(np.iinfo(wave.dtype).min)
    elif wave.dtype.kind == "u":
        middle = (float(np.iinfo(wave.dtype).max) + 1) / 2
        wave = (wave.astype(np.float64) - middle) / middle
    if wave.ndim == 2:
        axis = int(np.argmin(wave.shape))
        if wave.shape[axis] > MAX_CHANNELS or wave.shape[0] == wave.shape[1]:
            raise ValueError(
                f"{owner}: item {i} of `X` has shape {wave.shape}: a 2-D clip "
                f"needs at most {MAX_CHANNELS} channels on its shorter axis."
            )
        wave = wave.mean(axis=axis)
    if not np.isfinite(wave).all():
        raise ValueError(f"{owner}: waveform {i} of `X` has NaN or inf values.")
    return wave


def _resample(wave, rate: int, target: int):
    """``wave`` from ``rate`` to ``target`` Hz with a polyphase filter."""
    from scipy.signal import resample_poly

    common = gcd(int(rate), int(target))
    return resample_poly(wave, target // common, rate // common)


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
