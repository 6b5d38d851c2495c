"""An exportable graph: a model cut at its deepest needed block, layers pooled inside.

:class:`PooledLayers` wraps a loaded backbone as a ``torch.nn.Module`` whose
``forward(input_ids, attention_mask, ...)`` returns the pooled states of the
requested layers, ``(n_layers, batch, dim)``, exactly as
:func:`~skloes.models._forward.forward_pooled` computes them: the blocks deeper
than the deepest requested layer are cut off the module (not run, not
exported), each requested layer is recorded by a forward hook on its block and
pooled under the attention mask with the extractor's pooling and excluded
tokens. :func:`export_onnx` traces it into an ONNX file with dynamic batch
and sequence axes; :func:`quantize_onnx` writes its int8 twin (a decoder's
feed-forward output projections kept in float32, :func:`feed_forward_outputs`).

Layer indices follow Hugging Face ``hidden_states``: ``0`` is the embedding
output, ``1..L`` the blocks. This module imports torch at its top: import it
inside functions.

May import: utils, core.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

from skloes.core._pooling import excluded_tokens, pool_unchecked
from skloes.core._torch import torch
from skloes.models._forward import _last_state_source, find_blocks
from skloes.utils._optional import import_optional

__all__ = [
    "PooledLayers",
    "export_onnx",
    "feed_forward_outputs",
    "optimize_onnx",
    "quantize_onnx",
    "truncated",
]

nn = torch.nn

OPSET = 17


def _block_owner(model, blocks):
    """``(path, attribute)`` of the ``ModuleList`` that holds ``blocks``."""
    for name, module in model.named_modules():
        for attr, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) == len(blocks):
                if all(a is b for a, b in zip(child, blocks, strict=True)):
                    return name, attr
    return None


def truncated(model, depth: int):
    """A copy of ``model`` sharing its weights, without the blocks after
    ``depth`` (at least one block is kept: the first block's input is layer 0).

    Only the modules on the path to the block list are copied (shallow); the
    loaded model is left unchanged.
    """
    blocks = find_blocks(model)
    owner = None if blocks is None else _block_owner(model, blocks)
    if owner is None:
        raise ValueError(
            f"skloes: cannot find the transformer blocks of {type(model).__name__}; "
            "it cannot be exported cut at a block."
        )
    path, attr = owner
    keep = max(depth, 1)
    top = copy.copy(model)
    top._modules = dict(model._modules)
    parent = top
    for part in [p for p in path.split(".") if p]:
        child = copy.copy(parent._modules[part])
        child._modules = dict(child._modules)
        parent._modules[part] = child
        parent = child
    parent._modules[attr] = nn.ModuleList(list(blocks[:keep]))
    return top, list(blocks[:keep])


class PooledLayers(nn.Module):
    """The pooled states of ``layers``, from a backbone cut after the deepest.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The loaded float32 backbone (shared, not modified).
    layers : sequence of int
        Sorted, non-negative ``hidden_states`` indices (0 = embeddings).
    pooling : {"mean", "first", "cls", "last", "max"}
        As the extractor's ``pooling``.
    exclude_tokens : {"special", "first"} or None
        The extractor's resolved ``exclude_tokens_``.
    decoder : bool
        Decoder-only: position ids count real tokens (left padding).
    sample : dict of str to torch.Tensor
        One encoded batch, to settle where the last hidden state comes from
        when the last layer is requested.
    """

    def __init__(self, model, layers, pooling, exclude_tokens, *, decoder, sample):
        super().__init__()
        self.layers = [int(l) for l in layers]
        self.pooling, self.exclude_tokens, self.decoder = (
            pooling,
            exclude_tokens,
            decoder,
        )
        n_blocks = int(model.config.num_hidden_layers)
        depth = max(self.layers)
        self.last_from_output = False
        if depth == n_blocks:
            source = _last_state_source(model, sample, find_blocks(model))
            if source == "full":
                raise ValueError(
                    f"skloes: the last hidden state of {type(model).__name__} is "
                    "neither its last block's output nor its last_hidden_state; "
                    "a probe on its last layer cannot be exported."
                )
            self.last_from_output = source == "output"
        self.backbone, blocks = truncated(model, depth)
        self.takes_token_types = "token_type_ids" in sample
        self._states = []
        blocks[0].register_forward_pre_hook(self._record_input, with_kwargs=True)
        for block in blocks[:depth]:
            block.register_forward_hook(self._record_output)

    def _record_input(self, module, args, kwargs):
        self._states.append(args[0] if args else kwargs["hidden_states"])

    def _record_output(self, module, args, output):
        self._states.append(output[0] if isinstance(output, (tuple, list)) else output)

    @property
    def input_names(self):
        """Names of the graph's inputs, in :meth:`forward` order."""
        names = ["input_ids", "attention_mask"]
        if self.takes_token_types:
            names.append("token_type_ids")
        if self.exclude_tokens == "special":
            names.append("special_tokens_mask")
        return names

    def forward(self, input_ids, attention_mask, *extra):
        """Pooled states ``(n_layers, batch, dim)`` of one padded batch; ``extra``
        are the further inputs of :attr:`input_names`."""
        named = dict(zip(self.input_names[2:], extra, strict=True))
        self._states = []
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "token_type_ids" in named:
            inputs["token_type_ids"] = named["token_type_ids"]
        if self.decoder:  # positions count real tokens, as text_batch gives them
            inputs["position_ids"] = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
        out = self.backbone(**inputs)
        states = list(self._states)
        if self.last_from_output:
            states[-1] = out.last_hidden_state
        mask = attention_mask.to(torch.bool)
        special = named.get("special_tokens_mask")
        exclude = excluded_tokens(
            self.exclude_tokens, mask, None if special is None else special.bool()
        )
        return torch.stack(
            [
                pool_unchecked(states[l].float(), mask, self.pooling, exclude)
                for l in self.layers
            ]
        )


def export_onnx(module, sample, path) -> list:
    """Trace ``module`` on ``sample`` into an ONNX file at ``path``.

    The batch and sequence axes of every input are dynamic; the output is
    ``pooled`` of shape ``(n_layers, batch, dim)``. Returns the input names.
    """
    import_optional("onnx", extra="export")
    names = module.input_names
    args = tuple(sample[name] for name in names)
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    axes["pooled"] = {1: "batch"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on Python scalars
        torch.onnx.export(
            module.eval(),
            args,
            str(path),
            input_names=names,
            output_names=["pooled"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
        )
    return names


def feed_forward_outputs(path, config) -> list:
    """Names of the matrix products of the ONNX graph at ``path`` that map a
    block's feed-forward width back to the model width (``down_proj``,
    ``mlp.c_proj``, ``output.dense``, whatever the architecture calls them),
    found by their weights' shape ``(intermediate_size, hidden_size)``."""
    onnx = import_optional("onnx", extra="export")
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    width = getattr(config, "intermediate_size", None) or getattr(
        config, "n_inner", None
    )
    width = width or (4 * hidden if hidden else None)
    if hidden is None or width == hidden:  # the shape would not tell them apart
        return []
    graph = onnx.load(str(path), load_external_data=False).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    return [
        node.name
        for node in graph.node
        if node.op_type in ("MatMul", "Gemm")
        and len(node.input) > 1
        and shapes.get(node.input[1]) == (width, hidden)
    ]


def quantize_onnx(source, target, *, keep_float=()) -> None:
    """Write the int8 twin of the float ONNX graph ``source`` to ``target``.

    The weights of every matrix product are quantized to int8 per output
    channel once and its activations at run time (ONNX Runtime's dynamic
    quantization), except the products named in ``keep_float``, which stay
    float32 (see :func:`feed_forward_outputs`).
    """
    quant = import_optional("onnxruntime.quantization", extra="export")
    quant.quantize_dynamic(
        str(source),
        str(target),
        weight_type=quant.QuantType.QInt8,
        per_channel=True,
        nodes_to_exclude=list(keep_float),
    )


def optimize_onnx(path) -> None:
    """Rewrite the ONNX graph at ``path`` as ONNX Runtime optimizes it at its
    extended level (operator fusions, which do not depend on the machine,
    unlike its layout level), so that loading it need not optimize it again
    (most of the cold start of a large graph; see the user guide, "Serving a
    probe")."""
    ort = import_optional("onnxruntime", extra="export")
    path = Path(path)
    target = path.with_name(f".{path.name}.optimized")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    os.replace(target, path)
