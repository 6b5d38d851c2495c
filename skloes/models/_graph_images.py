"""An exportable vision graph: the encoder cut at its deepest needed block.

:class:`PooledImageLayers` is :class:`~skloes.models._graph.PooledLayers` for
a vision model: its one input is ``pixel_values`` ``(batch, C, H, W)`` (what
the model's image processor gives, or :func:`skloes.core._pixels.pixel_values`
without torch), the blocks deeper than the deepest requested layer are cut
off, and each requested layer is pooled as the extractor pools images: over
every token, the family's prefix tokens (class, distillation, registers)
left out of ``"mean"`` and ``"max"`` under ``exclude_tokens="special"``, the
class token taken by ``"first"``. ViT-MAE is fed the noise that keeps every
patch in its place (:func:`~skloes.models._inputs.identity_noise`).

This module imports torch at its top: import it inside functions.

May import: utils, core, models.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib

from skloes.core._pooling import excluded_tokens, pool_unchecked
from skloes.core._torch import torch
from skloes.models._graph import PooledLayers

__all__ = ["PooledImageLayers"]


@contextlib.contextmanager
def _fixed_positions(model):
    """Each ``interpolate_pos_encoding`` of ``model`` returns, while traced,
    what it returns untraced.

    transformers' ViT-like embeddings interpolate their position embeddings
    whenever they are traced ("for dynamic input shapes"), with a bicubic
    antialiased resize that ONNX cannot express; the graph takes one image
    size, the model's, at which the untraced method returns the position
    embeddings as they are. The method is patched on the instances for the
    call only.
    """
    patched = []
    for module in model.modules():
        table = getattr(module, "position_embeddings", None)
        if not hasattr(module, "interpolate_pos_encoding") or not isinstance(
            table, torch.Tensor
        ):
            continue
        original = module.interpolate_pos_encoding

        def fixed(embeddings, height, width, _table=table, _original=original):
            if embeddings.shape[1] == _table.shape[1] and height == width:
                return _table
            return _original(embeddings, height, width)

        module.interpolate_pos_encoding = fixed
        patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.interpolate_pos_encoding


class PooledImageLayers(PooledLayers):
    """The pooled states of ``layers`` of a vision encoder, cut after the deepest.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The loaded float32 vision encoder (a two-tower checkpoint's vision
        tower), shared, not modified.
    layers : sequence of int
        Sorted, non-negative ``hidden_states`` indices (0 = embeddings).
    pooling : {"mean", "first", "cls", "last", "max"}
        The extractor's resolved ``pooling_``.
    exclude_tokens : {"special", "first"} or None
        The extractor's resolved ``exclude_tokens_``.
    n_prefix : int
        The family's prefix tokens (``n_prefix_tokens_`` of the extractor).
    fixed_order : bool
        ViT-MAE: feed the noise that keeps every patch in order.
    sample : dict of str to torch.Tensor
        One batch of the model's inputs (``pixel_values``, and ``noise`` for
        ViT-MAE), to settle where the last hidden state comes from.
    """

    def __init__(
        self, model, layers, pooling, exclude_tokens, n_prefix, *, fixed_order, sample
    ):
        super().__init__(
            model, layers, pooling, exclude_tokens, decoder=False, sample=sample
        )
        self.n_prefix, self.fixed_order = int(n_prefix), bool(fixed_order)
        if fixed_order:
            size = model.config.patch_size
            size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
            height, width = sample["pixel_values"].shape[-2:]
            self.n_patches = (height // size[0]) * (width // size[1])

    @property
    def input_names(self):
        """Names of the graph's inputs: ``["pixel_values"]``."""
        return ["pixel_values"]

    @property
    def dynamic_axes(self):
        """The graph's dynamic axes: the batch only (an image's size is the
        model's)."""
        return {"pixel_values": {0: "batch"}, "pooled": {1: "batch"}}

    def forward(self, pixel_values):
        """Pooled states ``(n_layers, batch, dim)`` of one batch of images."""
        self._states = []
        inputs = {"pixel_values": pixel_values}
        if self.fixed_order:  # ViT-MAE: every patch, in order
            order = torch.arange(self.n_patches, dtype=pixel_values.dtype)
            inputs["noise"] = order + pixel_values[:, 0, 0, :1] * 0  # (batch, n)
        with _fixed_positions(self.backbone):
            out = self.backbone(**inputs)
        states = list(self._states)
        if self.last_from_output:
            states[-1] = out.last_hidden_state
        mask = torch.ones_like(states[0][:, :, 0], dtype=torch.bool)
        positions = torch.arange(mask.shape[1]).unsqueeze(0)
        prefix = (positions < self.n_prefix) & mask
        exclude = excluded_tokens(self.exclude_tokens, mask, prefix)
        return torch.stack(
            [
                pool_unchecked(states[l].float(), mask, self.pooling, exclude)
                for l in self.layers
            ]
        )
