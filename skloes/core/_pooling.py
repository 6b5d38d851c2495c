"""Attention-mask aware pooling of token states into one vector per sample."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.core._torch import torch

POOLINGS = ("mean", "first", "cls", "last", "max")
EXCLUDE_TOKENS = ("special", "first")
# What `exclude_tokens="auto"` leaves out of mean pooling for decoder-only
# models, measured on SmolLM2 (doc/user_guide/hidden_states.rst); each model
# family states its own (skloes.models._families).
AUTO_EXCLUDE = "first"


def resolve_exclude_tokens(exclude_tokens, modality, auto, *, owner="skloes"):
    """Resolve ``exclude_tokens`` ("auto", "special", "first" or None).

    ``"auto"`` is ``auto``, the model family's choice
    (``Family.pool_exclude`` in :mod:`skloes.models._families`:
    :data:`AUTO_EXCLUDE` for decoder-only text models, ``"special"`` (the
    prefix tokens: class, distillation, registers) for vision models, None
    otherwise). For an image model ``"special"`` means its prefix tokens and
    ``"first"`` its first token, as for a text the tokenizer's special tokens
    and its first token; audio models accept only "auto" and None.

    Parameters
    ----------
    exclude_tokens : {"auto", "special", "first"} or None
        The estimator parameter.
    modality : {"text", "image", "audio"}
        The model's input modality.
    auto : {"special", "first"} or None
        What ``"auto"`` resolves to for this model.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    resolved : {"special", "first"} or None
    """
    if modality not in ("text", "image"):
        if exclude_tokens not in ("auto", None):
            raise ValueError(
                f"{owner}: `exclude_tokens` applies to text and image models "
                f"only; this model takes {modality}. Use 'auto' or None."
            )
        return None
    if exclude_tokens != "auto":
        return exclude_tokens
    return auto


def excluded_tokens(exclude_tokens, mask, special=None):
    """(B, T) bool, True at the tokens a resolved ``exclude_tokens`` leaves out.

    Parameters
    ----------
    exclude_tokens : {"special", "first"} or None
        From :func:`resolve_exclude_tokens`.
    mask : torch.Tensor of shape (B, T)
        Attention mask; 0 marks padding.
    special : torch.Tensor of shape (B, T) or None, default=None
        True at the tokenizer's special tokens (needed for ``"special"``).

    Returns
    -------
    exclude : torch.Tensor of shape (B, T) or None
        None when nothing is excluded; pass it to :func:`pool`.
    """
    if exclude_tokens is None:
        return None
    if exclude_tokens == "first":
        return first_token(mask)
    if exclude_tokens == "special" and special is not None:
        return special
    raise ValueError(
        f"`exclude_tokens` must be one of {EXCLUDE_TOKENS} or None (with the "
        f"special-token mask for 'special'); got {exclude_tokens!r}."
    )


def kept_tokens(mask, exclude):
    """``mask`` without the ``exclude`` tokens; a row left empty keeps them all."""

    full = mask.to(torch.bool)
    kept = full & ~exclude.to(torch.bool)
    # logical ops, not torch.where: an exported graph's runtime may lack a bool Where
    return (kept | (full & ~kept.any(dim=1, keepdim=True))).to(mask.dtype)


def pool(hidden, mask, pooling="mean", exclude=None):
    """Pool token states ``hidden`` (B, T, D) under ``mask`` (B, T) to (B, D).

    Padding never contributes: ``"mean"`` averages the masked tokens,
    ``"first"`` (alias ``"cls"``) takes the first masked token, ``"last"`` the
    last one (correct under left or right padding) and ``"max"`` the
    element-wise maximum over masked tokens. ``exclude`` (B, T), True at tokens
    to leave out of ``"mean"`` and ``"max"`` (special tokens, the first
    position), is ignored by ``"first"``/``"last"``; a sample whose tokens are
    all excluded keeps them all.
    """

    if bool((mask.to(torch.bool).sum(dim=1) == 0).any()):
        raise ValueError(
            "pooling: a sample has no unmasked token (attention mask all zero); "
            "nothing to pool."
        )
    return pool_unchecked(hidden, mask, pooling, exclude)


def pool_unchecked(hidden, mask, pooling="mean", exclude=None):
    """:func:`pool` without the check that every sample has a token: no
    data-dependent branch, so it traces into an exported graph (whose
    inputs always hold one token per text)."""
    mask = mask.to(torch.bool)
    counts = mask.sum(dim=1)
    if pooling in ("mean", "max") and exclude is not None:
        mask = kept_tokens(mask, exclude)
        counts = mask.sum(dim=1)
    if pooling == "mean":
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / counts.to(hidden.dtype).unsqueeze(-1)
    if pooling in ("first", "cls", "last"):
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        if pooling == "last":
            index = torch.where(mask, positions, -1).amax(dim=1)
        else:
            index = torch.where(mask, positions, mask.shape[1]).amin(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]
    if pooling == "max":
        fill = torch.finfo(hidden.dtype).min
        return hidden.masked_fill(~mask.unsqueeze(-1), fill).amax(dim=1)
    raise ValueError(f"pooling: `pooling` must be one of {POOLINGS}; got {pooling!r}.")


def first_token(mask):
    """(B, T) bool, True at each sample's first real token (left or right padding).

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> first_token(torch.tensor([[0, 1, 1], [1, 1, 0]])).int()  # doctest: +SKIP
    tensor([[0, 1, 0],
            [1, 0, 0]], dtype=torch.int32)
    """

    mask = mask.to(torch.bool)
    positions = torch.arange(mask.shape[1], device=mask.device)
    return (positions == mask.int().argmax(dim=1, keepdim=True)) & mask


def pool_layers(
    hidden_states, layers, mask, pooling="mean", *, exclude=None, owner="skloes"
):
    """Pool the requested layers of one batch into a ``(n_layers, B, k)`` tensor.

    Parameters
    ----------
    hidden_states : sequence of torch.Tensor of shape (B, T, D)
        Hidden states indexed as in Hugging Face ``hidden_states``.
    layers : sequence of int
        Non-negative indices into ``hidden_states``.
    mask : torch.Tensor of shape (B, T)
        Attention mask; 0 marks padding.
    pooling : {"mean", "first", "cls", "last", "max"} or callable
        A name understood by :func:`pool`, or ``f(hidden, mask) -> (B, k)``
        applied to each layer's ``(B, T, D)`` states.
    exclude : torch.Tensor of shape (B, T) or None, default=None
        Tokens left out of ``"mean"`` and ``"max"`` (see :func:`pool`).
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    pooled : torch.Tensor of shape (n_layers, B, k)
        ``k = D`` for the named poolings.

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> h = [torch.ones(2, 3, 4)] * 2  # doctest: +SKIP
    >>> pool_layers(h, [0, 1], torch.ones(2, 3)).shape  # doctest: +SKIP
    torch.Size([2, 2, 4])
    """

    if not callable(pooling):
        return torch.stack(
            [pool(hidden_states[l], mask, pooling, exclude) for l in layers]
        )
    batch = mask.shape[0]
    out = []
    for l in layers:
        value = pooling(hidden_states[l], mask)
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value, device=mask.device)
        if value.ndim != 2 or value.shape[0] != batch or value.shape[1] < 1:
            raise ValueError(
                f"{owner}: callable `pooling` must return a tensor of shape "
                f"(batch_size, k) = ({batch}, k) with k >= 1; got shape "
                f"{tuple(value.shape)} for layer {l}."
            )
        if out and value.shape[1] != out[0].shape[1]:
            raise ValueError(
                f"{owner}: callable `pooling` must return the same width k for "
                f"every layer; got {out[0].shape[1]} and {value.shape[1]}."
            )
        out.append(value)
    return torch.stack(out)
