"""Compute precision of the forward pass: float32, bfloat16 or int8.

:func:`load_dtype` and :func:`apply_precision` turn a loaded float32 backbone
into one that computes in a reduced precision, keeping the module tree, so the
truncated forward pass and its hooks
(:func:`~skloes.models._forward.forward_pooled`) run unchanged:

* ``"int8"``: every linear layer (attention projections and feed-forward
  layers, some 95 % of a small transformer's multiply-adds) becomes an
  :class:`Int8Linear`, dynamic W8A8 quantization. Weights are int8 with one
  scale per output channel, computed once (about a second for SmolLM2-135M);
  activations are quantized per token (one scale per row) at run time, and
  the int8 product is accumulated in int32 by ``torch._int_mm`` (oneDNN's
  VNNI kernels); states between the layers stay float32. Per-token scales are
  what decoder activations need: a few outlier channels make one scale per
  tensor (``torch.ao``'s dynamic quantization) lose the other tokens
  (Dettmers et al., 2022, "LLM.int8()"; Xiao et al., 2023, "SmoothQuant").
* ``"bfloat16"``: the whole model loaded in bfloat16, on the CPU as on an
  accelerator. :class:`Bf16Linear` (bfloat16 linear layers, float32 states
  between them) is the alternative it was measured against.

Why these engines (measured): see the user guide, :ref:`extraction-precision`.
This module imports torch at its top: import it inside functions.

May import: utils, core.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import re

from skloes.core._torch import torch

__all__ = [
    "PRECISIONS",
    "Bf16Linear",
    "Int8Linear",
    "apply_precision",
    "check_precision",
    "load_dtype",
]

nn = torch.nn

PRECISIONS = ("float32", "bfloat16", "int8")

# Linear layers int8 keeps in float32, a regular expression on module names:
# none. Quantizing the feed-forward output projection too was faster at one
# thread (1.80x against 1.64x float32 on MiniLM, 1.51x against 1.36x on
# SmolLM2) for 0.001 of cosine; see the user guide.
INT8_KEEP_FLOAT = None


def check_precision(precision, device, *, owner: str = "skloes") -> None:
    """Refuse a precision the device cannot run, naming ``precision``.

    ``"int8"`` runs on the CPU only: its kernels (``torch._int_mm`` with
    per-token scales) were measured on the CPU, and on an accelerator
    ``"bfloat16"`` is the reduced precision to use.
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"{owner}: `precision` must be one of {', '.join(map(repr, PRECISIONS))}"
            f"; got {precision!r}."
        )
    if precision == "int8" and torch.device(device).type != "cpu":
        raise ValueError(
            f"{owner}: `precision='int8'` runs on the CPU only; got device "
            f"{str(device)!r}. On an accelerator use precision='bfloat16' (the "
            "whole model in bfloat16), or device='cpu'."
        )


def load_dtype(precision):
    """The ``torch_dtype`` to load the weights in: bfloat16 for ``"bfloat16"``
    (the whole model, on any device), else None (float32)."""
    return torch.bfloat16 if precision == "bfloat16" else None


def apply_precision(model, precision):
    """Return ``model`` computing in ``precision`` (for int8 its linear layers
    replaced in place; float32 and bfloat16 leave it as loaded).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A backbone loaded by :func:`~skloes.models._loading.load_model` with
        :func:`load_dtype`'s dtype.
    precision : {"float32", "bfloat16", "int8"}
        The compute precision, checked by :func:`check_precision`.

    Returns
    -------
    model : transformers.PreTrainedModel
        The same object, in eval mode.
    """
    if precision != "int8":
        return model
    replace_linears(model, Int8Linear, keep=INT8_KEEP_FLOAT)
    return model.eval()


def replace_linears(model, factory, *, keep=None) -> int:
    """Replace every ``nn.Linear`` of ``model`` whose name does not match the
    regular expression ``keep`` by ``factory(linear)``; return how many."""
    pattern = None if keep is None else re.compile(keep)
    swaps = []
    for parent_name, parent in model.named_modules():
        for attr, child in parent.named_children():
            name = f"{parent_name}.{attr}" if parent_name else attr
            if type(child) is nn.Linear and not (pattern and pattern.search(name)):
                swaps.append((parent, attr, child))
    with torch.no_grad():
        for parent, attr, child in swaps:
            setattr(parent, attr, factory(child))
    return len(swaps)


class _LinearSwap(nn.Module):
    """What every replacement of an ``nn.Linear`` keeps: its sizes and repr."""

    def __init__(self, linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Int8Linear(_LinearSwap):
    """``y = x W^T + b`` in int8: weights per output channel, activations per
    token, int32 accumulation (``torch._int_mm``), float32 in and out.

    Parameters
    ----------
    linear : torch.nn.Linear
        The float layer; its weights are quantized once, here.
    """

    def __init__(self, linear):
        super().__init__(linear)
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0
        quantized = torch.round(weight / scale[:, None]).clamp(-127, 127)
        self.register_buffer("weight_t", quantized.to(torch.int8).t().contiguous())
        self.register_buffer("weight_scale", scale.contiguous())
        bias = linear.bias
        self.register_buffer(
            "bias", None if bias is None else bias.detach().float().clone()
        )

    def forward(self, x):
        shape = x.shape
        rows = x.reshape(-1, shape[-1]).float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(127.0)
        quantized = torch.round(rows / scale).to(torch.int8)
        y = torch._int_mm(quantized, self.weight_t).float()
        y.mul_(scale).mul_(self.weight_scale)
        if self.bias is not None:
            y.add_(self.bias)
        return y.reshape(*shape[:-1], self.out_features)


class Bf16Linear(_LinearSwap):
    """``y = x W^T + b`` with bfloat16 weights and inputs, float32 output.

    Not used by ``precision="bfloat16"``: the candidate that the whole model
    in bfloat16 was measured against (``benchmarks/bench_precision.py``).

    Parameters
    ----------
    linear : torch.nn.Linear
        The float layer; its weights are converted once, here.
    """

    def __init__(self, linear):
        super().__init__(linear)
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16))
        bias = linear.bias
        self.register_buffer(
            "bias", None if bias is None else bias.detach().to(torch.bfloat16)
        )

    def forward(self, x):
        y = torch.nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias)
        return y.float()
