"""Input encoding: raw inputs checked, tokenized once, batched into model inputs.

Shared by :class:`~skloes.extraction.HiddenStatesTransformer` and
:class:`~skloes.heads.GeoRegFineTuner`, so that both check, tokenize, pad and mask
their inputs in one way only.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from skloes.core._batching import token_batches  # noqa: F401 (re-exported)
from skloes.core._images import is_ready, read_images, ready_shape, to_pixels
from skloes.core._memory import available_memory, release_memory
from skloes.core._pooling import excluded_tokens
from skloes.core._texts import check_texts, one_column
from skloes.core._torch import torch
from skloes.models._audio import encode_audio, frame_mask, read_audio
from skloes.models._families import model_family

# Model families whose position ids start after the pad id (RoBERTa's
# embeddings): a text may use ``max_position_embeddings - pad_token_id - 1``.
_OFFSET_POSITIONS = frozenset(
    {
        "roberta",
        "xlm-roberta",
        "xlm-roberta-xl",
        "camembert",
        "mpnet",
        "data2vec-text",
        "longformer",
        "ibert",
    }
)


def _sane(limit):
    return isinstance(limit, Integral) and 0 < limit < 1_000_000


def text_limits(tokenizer, config=None) -> tuple:
    """What a text model can see: ``(smallest useful max_length, its limit, added)``.

    The smallest useful ``max_length`` leaves one token of the text after the
    special tokens the tokenizer adds to every text (``[CLS]`` and ``[SEP]``
    for BERT, none for most decoders): below it, the tokenizer cannot truncate
    and gives the text untruncated. The limit is the smaller of the
    tokenizer's ``model_max_length`` and the model's position embeddings
    (``config.max_position_embeddings``), when they are set.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        From :func:`~skloes.models._loading.load_processor`.
    config : transformers.PretrainedConfig or None, default=None
        The model's config, for its position limit.

    Returns
    -------
    minimum : int
        The smallest ``max_length`` that keeps a token of every text.
    limit : int or None
        The longest input the model takes (None when neither says).
    added : list of str
        The special tokens added to every text.
    """
    added = tokenizer.convert_ids_to_tokens(
        tokenizer("", add_special_tokens=True)["input_ids"]
    )
    limits = (
        [tokenizer.model_max_length]
        if _sane(getattr(tokenizer, "model_max_length", None))
        else []
    )
    positions = getattr(config, "max_position_embeddings", None)
    if _sane(positions):
        if getattr(config, "model_type", None) in _OFFSET_POSITIONS:
            positions -= int(getattr(config, "pad_token_id", None) or 0) + 1
        limits.append(positions)
    return len(added) + 1, (min(limits) if limits else None), list(added)


# The largest ``max_length`` that is capped at a model's limit rather than
# refused: the extractor's default (512), which a model of fewer positions
# (a test model, an older encoder) takes at its own limit. Above it, a
# ``max_length`` the model cannot take is a request it cannot honour.
CAPPED_DEFAULT = 512


def check_max_length(max_length: int, limits: tuple, *, owner: str = "skloes") -> int:
    """The length every text is truncated to, or an error naming ``max_length``.

    Parameters
    ----------
    max_length : int
        The estimator's ``max_length``.
    limits : tuple
        From :func:`text_limits`.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    length : int
        ``max_length`` capped at the model's limit (a ``max_length`` above
        both that limit and :data:`CAPPED_DEFAULT` is an error).
    """
    minimum, limit, added = limits
    if limit is not None and max_length > max(limit, CAPPED_DEFAULT):
        raise ValueError(
            f"{owner}: `max_length` must be at most {limit}, the longest input "
            "this model takes (its position embeddings or its tokenizer's "
            f"model_max_length); got {max_length}. Texts longer than that are "
            "truncated to it."
        )
    if max_length < minimum:
        raise ValueError(
            f"{owner}: `max_length` must be at least {minimum} for this tokenizer, "
            f"which adds {len(added)} special token(s) to every text "
            f"({', '.join(added)}); got {max_length}, which leaves no token of the "
            "text (every text would give the same vector)."
        )
    return int(max_length if limit is None else min(max_length, limit))


def pass_terms(config, depth: int) -> tuple:
    """Bytes of one forward pass of a text model that runs blocks ``1..depth``,
    the weights aside: ``(per token, per pair of tokens of one text)``;
    :func:`pass_bytes` sums them.

    Per token, float32: one block's activations (the feed-forward's three
    ``intermediate_size`` tensors and four of ``hidden_size``), two of
    ``hidden_size`` per block run (what the allocator keeps of each block),
    and where the last layer is asked the ``L + 1`` states of a full pass.
    Per pair: the ``n x n`` attention mask transformers builds (float32 and
    bool, 5 bytes), and under eager attention the scores and their softmax
    (8 bytes per head). Measured on Qwen2.5 0.5B (SDPA, one text of 8,000
    tokens, above the loaded model): 0.90 GB to layer 3 (estimate 1.07),
    1.89 GB to layer 20 (2.05), 2.80 GB for every layer (3.00); at 32,768
    tokens the estimate is 16 GB, the mask alone 5.4 GB.
    """
    text = getattr(config, "text_config", None) or config
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    inner = int(getattr(text, "intermediate_size", 0) or 4 * hidden)
    heads = int(getattr(text, "num_attention_heads", 0) or 1)
    n_blocks = int(getattr(text, "num_hidden_layers", 0) or 0)
    eager = getattr(text, "_attn_implementation", None) in (None, "eager")
    full = (n_blocks + 1) * hidden if depth >= n_blocks else 0
    width = 3 * inner + 4 * hidden + 2 * hidden * min(depth, n_blocks) + full
    return 4 * width, 5 + (8 * heads if eager else 0)


def pass_bytes(config, depth: int, n_texts: int, n_tokens: int) -> int:
    """An upper estimate of one forward pass's working set over ``n_texts``
    texts padded to ``n_tokens`` tokens, in bytes (:func:`pass_terms`)."""
    token, pair = pass_terms(config, depth)
    return n_texts * n_tokens * (token + n_tokens * pair)


def _device_memory(device):
    """Bytes free on ``device`` (the process's memory on the CPU), or None."""
    kind = getattr(device, "type", str(device))
    if kind == "cpu":
        return available_memory()
    if kind == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(device)[0])
    return None


def _gb(n_bytes):
    return f"{n_bytes / 1e9:.1f} GB"


def check_pass_memory(config, depth, lengths, batches, *, device="cpu", owner="skloes"):
    """Refuse, before any forward pass, an extraction whose largest pass would
    not fit in the memory free now (:func:`pass_bytes`).

    A token budget per batch (``max_batch_tokens``) bounds batches of many
    texts, but a text longer than the budget runs alone, and its attention
    grows with the square of its length (a 40,000-token text on Qwen2 grew
    the process past 17 GB). The error names ``max_length`` where one text
    alone does not fit (with the length that does), else ``batch_size`` and
    ``max_batch_tokens``.

    Parameters
    ----------
    config : transformers.PretrainedConfig
    depth : int
        The deepest ``hidden_states`` index asked (blocks ``1..depth`` run).
    lengths : sequence of int
        Tokens of each text, after truncation.
    batches : list of sequence of int
        The passes, as indices into ``lengths``.
    device : str or torch.device, default="cpu"
    owner : str, default="skloes"

    Raises
    ------
    MemoryError
    """
    free = _device_memory(device)
    if free is None or not batches:
        return
    token, pair = pass_terms(config, depth)
    need, n_texts, width = max(
        (len(b) * w * (token + w * pair), len(b), w)
        for w, b in ((max(lengths[i] for i in b), b) for b in batches)
    )
    if need <= free:
        return
    where = getattr(device, "type", str(device))
    head = (
        f"{owner}: one forward pass would need about {_gb(need)}, more than the "
        f"{_gb(free)} of memory free on the {where} now"
    )
    if width * (token + width * pair) <= free:
        raise MemoryError(
            f"{head}: a batch of {n_texts} texts of up to {width:,} tokens; lower "
            "`batch_size` or `max_batch_tokens` (or `max_length`)."
        )
    fits = int((-token + math.sqrt(token * token + 4 * pair * free)) / (2 * pair))
    raise MemoryError(
        f"{head}: a text of `X` has {width:,} tokens after truncation at "
        f"`max_length`, and the attention over one text grows with the square of "
        f"its length ({_gb(width * width * pair)} for {width:,} x {width:,} "
        f"pairs); lower `max_length` (about {fits:,} tokens fit now), or free "
        "memory."
    )


def check_inputs(X, modality: str, *, owner: str = "skloes", audio=None) -> list:
    """Validate raw inputs for ``modality`` and return them as a list.

    Text: a non-empty sequence of str. Images: a 3-D or 4-D array or tensor
    batch, or a sequence of image file paths, PIL images, 2-D/3-D arrays or
    tensors, or Hugging Face ``datasets`` image dicts, read into arrays by
    :func:`skloes.core._images.read_images`. Audio: a sequence of clips
    (waveforms, audio file paths, ``datasets`` audio dicts), read into float32
    mono waveforms at the model's rate by
    :func:`skloes.models._audio.read_audio`, with the keyword arguments
    ``audio`` (a dict; None: arrays taken at the model's rate, nothing
    resampled).
    """
    if modality == "text":  # the rule the torch-free server shares
        return check_texts(X, owner)
    if X is None or isinstance(X, (str, bytes)):
        raise TypeError(
            f"{owner}: `X` must be a list or array of {modality} inputs; got "
            f"{type(X).__name__}."
        )
    X = one_column(X, modality, owner)
    if modality == "image" and getattr(X, "ndim", 0) >= 3 and hasattr(X, "shape"):
        items = list(X)  # a batch of arrays or a torch tensor batch
    else:
        try:
            items = list(X)
        except TypeError:
            raise TypeError(
                f"{owner}: `X` must be a list or array of {modality} inputs; got "
                f"{type(X).__name__}."
            ) from None
    if not items:
        raise ValueError(f"{owner}: `X` is empty; pass at least one {modality} input.")
    if modality == "audio":
        return read_audio(items, owner, **(audio or {}))
    return read_images(items, owner)


def tokenize_texts(
    tokenizer,
    texts,
    max_length: int,
    *,
    config=None,
    owner: str = "skloes",
    chunk: int = 256,
) -> dict:
    """Tokenize every text once, truncated, unpadded, in chunks.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        From :func:`load_processor`.
    texts : list of str
        Checked by :func:`check_inputs`.
    max_length : int
        Truncation length, checked and capped at the model's limit by
        :func:`check_max_length`.
    config : transformers.PretrainedConfig or None, default=None
        The model's config (its position limit caps ``max_length``).
    owner : str, default="skloes"
        Name used in error messages.
    chunk : int, default=256
        Texts per tokenizer call. Small chunks keep the tokenizer's Python
        lists of token ids small: with 4,096, about 4 MiB of them stayed in
        Python's heap after 2,000 texts (see :ref:`extraction-memory`).

    Returns
    -------
    encoded : dict of str to list of ndarray
        The tokenizer's fields (``input_ids``...) plus ``special_tokens_mask``,
        one unpadded int32 row per text (``attention_mask`` is None: it is
        rebuilt from the lengths); batch them with :func:`pad_batch`.
    """
    limit = check_max_length(max_length, text_limits(tokenizer, config), owner=owner)
    encoded: dict = {}
    for start in range(0, len(texts), chunk):
        part = tokenizer(
            texts[start : start + chunk],
            truncation=True,
            max_length=limit,
            return_special_tokens_mask=True,
        )
        for key, rows in part.items():
            if key == "attention_mask":  # all ones unpadded: rebuilt when padding
                encoded[key] = None
            else:
                encoded.setdefault(key, []).extend(
                    np.asarray(row, dtype=np.int32) for row in rows
                )
        del part
    release_memory()
    return encoded


def pad_batch(tokenizer, encoded: dict, index, *, device="cpu"):
    """Pad rows ``index`` of :func:`tokenize_texts` into model inputs.

    Padding follows the tokenizer's ``padding_side`` with its pad token (see
    :func:`ensure_pad_token`); other fields pad with 0.

    Returns
    -------
    inputs : dict of str to torch.Tensor of shape (batch, n_tokens)
        Keyword arguments for ``model(**inputs)``.
    mask : torch.Tensor of shape (batch, n_tokens), dtype bool
        True at real tokens.
    special : torch.Tensor of shape (batch, n_tokens), dtype bool
        True at the tokenizer's special tokens (BOS, CLS, SEP, EOS...).
    """
    lengths = [len(encoded["input_ids"][i]) for i in index]
    width, left = max(lengths), tokenizer.padding_side == "left"
    fill = {"input_ids": tokenizer.pad_token_id, "special_tokens_mask": 1}
    tensors = {}
    for key, rows in encoded.items():
        if rows is None:
            continue
        out = np.full((len(index), width), fill.get(key, 0), dtype=np.int64)
        for j, i in enumerate(index):
            row = rows[i]
            if left:
                out[j, width - len(row) :] = row
            else:
                out[j, : len(row)] = row
        tensors[key] = torch.from_numpy(out)
    positions = torch.arange(width).expand(len(index), width)
    length = torch.as_tensor(lengths).unsqueeze(1)
    mask = positions >= width - length if left else positions < length
    if "attention_mask" in encoded:
        tensors["attention_mask"] = mask.long()
    special = tensors.pop("special_tokens_mask").bool() & mask
    inputs = {key: value.to(device) for key, value in tensors.items()}
    return inputs, mask.to(device), special.to(device)


def text_batch(
    tokenizer, encoded: dict, index, *, exclude_tokens=None, decoder=False, device="cpu"
):
    """Model inputs of rows ``index`` of :func:`tokenize_texts`, with the
    tokens that pooling leaves out.

    The one place where a text batch is built for pooled hidden states
    (:class:`~skloes.extraction.HiddenStatesTransformer` and
    :class:`~skloes.heads.GeoRegFineTuner` alike), so that both pool the same tokens.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        From :func:`load_processor`.
    encoded : dict
        From :func:`tokenize_texts`.
    index : sequence of int
        Rows of the batch.
    exclude_tokens : {"special", "first"} or None, default=None
        Resolved by :func:`skloes.core._pooling.resolve_exclude_tokens`.
    decoder : bool, default=False
        Whether the model is decoder-only: under left padding its positions
        then count real tokens only, as in an unpadded batch.
    device : str or torch.device, default="cpu"
        Where the tensors go.

    Returns
    -------
    inputs : dict of str to torch.Tensor
        Keyword arguments for ``model(**inputs)``.
    mask : torch.Tensor of shape (batch, n_tokens), dtype bool
        True at real tokens.
    exclude : torch.Tensor of shape (batch, n_tokens) or None
        True at the excluded tokens (see :func:`skloes.core._pooling.pool`).
    """
    inputs, mask, special = pad_batch(tokenizer, encoded, index, device=device)
    if decoder and tokenizer.padding_side == "left":
        inputs["position_ids"] = (mask.long().cumsum(dim=1) - 1).clamp(min=0)
    return inputs, mask, excluded_tokens(exclude_tokens, mask, special)


def encode_batch(
    processor, modality: str, batch, *, max_length: int = 512, device="cpu", config=None
):
    """Turn one batch of raw inputs into the model's input tensors.

    Parameters
    ----------
    processor : object
        From :func:`load_processor`.
    modality : {"text", "image", "audio"}
        From :func:`detect_modality`.
    batch : list
        Raw inputs already checked by :func:`check_inputs`.
    max_length : int, default=512
        Texts are truncated to this many tokens (checked and capped at the
        model's limit, see :func:`check_max_length`); ignored for images and
        audio.
    device : str or torch.device, default="cpu"
        Where the tensors go.
    config : transformers.PretrainedConfig or None, default=None
        Lets ready ``(C, H, W)`` image arrays bypass the image processor.

    Returns
    -------
    inputs : dict of str to torch.Tensor
        Keyword arguments for ``model(**inputs)``; text carries an
        ``attention_mask``, audio what its family's batching rule passes
        (:func:`audio_rule`, :mod:`skloes.models._audio`).
    """
    if modality == "text":
        inputs = processor(
            list(batch),
            padding=True,
            truncation=True,
            return_tensors="pt",
            max_length=check_max_length(max_length, text_limits(processor, config)),
        )
    elif modality == "image":
        inputs = _encode_images(processor, batch, config)
    else:
        return encode_audio(processor, batch, audio_rule(config), device=device)
    return {
        key: value.to(device)
        for key, value in inputs.items()
        if isinstance(value, torch.Tensor)
    }


def _encode_images(processor, batch, config):
    """``pixel_values`` of one batch: ready ``(C, H, W)`` float arrays as
    they are, every other image through :func:`to_pixels` and the processor
    (which treats each image on its own)."""
    shape = ready_shape(config) if config is not None else None
    channels = shape[0] if shape is not None else 3
    arrays = [np.asarray(item) for item in batch]
    ready = [is_ready(array, shape) for array in arrays]
    todo = [
        to_pixels(a, channels)
        for a, done in zip(arrays, ready, strict=True)
        if not done
    ]
    made = iter(
        processor(images=todo, return_tensors="pt")["pixel_values"] if todo else ()
    )
    rows = [
        torch.from_numpy(array.astype(np.float32)) if done else next(made)
        for array, done in zip(arrays, ready, strict=True)
    ]
    return {"pixel_values": torch.stack(rows)}


def identity_noise(pixel_values, config):
    """ViT-MAE's ``noise`` input that keeps every patch in its place.

    ViT-MAE orders its patches by ``argsort(noise)`` and keeps the first
    ``(1 - mask_ratio)`` of them; with ``mask_ratio=0`` and this noise
    (``0, 1, 2...`` for every image) it keeps every patch in order, so that
    an image gives the same states on every call.

    Returns
    -------
    noise : torch.Tensor of shape (batch, n_patches)
    """
    size = config.patch_size
    size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
    height, width = pixel_values.shape[-2:]
    n_patches = (height // size[0]) * (width // size[1])
    order = torch.arange(n_patches, dtype=torch.float32, device=pixel_values.device)
    return order.expand(pixel_values.shape[0], n_patches)


def image_prefix(n_prefix: int, mask):
    """(B, T) bool, True at an image's first ``n_prefix`` tokens (class,
    distillation, registers: ``Family.prefix``)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return (positions < n_prefix) & mask.to(torch.bool)


def token_mask(model, inputs, n_tokens: int):
    """Attention mask over the ``n_tokens`` positions of the hidden states.

    Text: the tokenizer's mask. Audio: the frames of real audio under the
    family's batching rule (:func:`skloes.models._audio.frame_mask`).
    Otherwise (images) all ones.

    Returns
    -------
    mask : torch.Tensor of shape (batch, n_tokens), dtype long
    """
    if "input_values" in inputs or "input_features" in inputs:  # audio
        return frame_mask(model, inputs, n_tokens, audio_rule(model.config))
    batch = next(iter(inputs.values())).shape[0]
    mask = inputs.get("attention_mask")
    if mask is not None and mask.shape[1] == n_tokens:
        return mask
    device = next(iter(inputs.values())).device
    return torch.ones(batch, n_tokens, dtype=torch.long, device=device)


def audio_rule(config) -> str:
    """The batching rule of an audio model's clips
    (``Family.audio_batching``: ``"mask"``, ``"equal_length"`` or
    ``"window"``; ``"mask"`` without a config)."""
    if config is None:
        return "mask"
    return model_family(config, warn=False).audio_batching(config)
