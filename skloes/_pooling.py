"""Attention-mask aware pooling of token states into one vector per sample."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

POOLINGS = ("mean", "first", "cls", "last", "max")


def pool(hidden, mask, pooling="mean"):
    """Pool token states ``hidden`` (B, T, D) under ``mask`` (B, T) to (B, D).

    Padding never contributes: ``"mean"`` averages the masked tokens,
    ``"first"`` (alias ``"cls"``) takes the first masked token, ``"last"`` the
    last one (correct under left or right padding) and ``"max"`` the
    element-wise maximum over masked tokens.
    """
    import torch

    mask = mask.to(torch.bool)
    counts = mask.sum(dim=1)
    if bool((counts == 0).any()):
        raise ValueError(
            "pooling: a sample has no unmasked token (attention mask all zero); "
            "nothing to pool."
        )
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
    raise ValueError(
        f"pooling: `pooling` must be one of {POOLINGS}; got {pooling!r}."
    )
