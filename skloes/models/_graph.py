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

May import: utils, core, models (the family rules).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
import warnings

from skloes.core._atomic import write_whole
from skloes.core._pooling import excluded_tokens, pool_unchecked
from skloes.core._torch import torch
from skloes.models._forward import _last_state_source, find_blocks
from skloes.utils._optional import import_optional

__all__ = [
    "WEIGHT_MAX",
    "PooledLayers",
    "export_onnx",
    "feed_forward_outputs",
    "optimize_onnx",
    "matmul_input_maxima",
    "quantize_onnx",
    "smoothing_scales",
    "truncated",
    "write_int8_graph",
]

nn = torch.nn

OPSET = 17

#: The int8 weights' largest magnitude: 7 bits, not 8. An x86 CPU without
#: VNNI (AVX2, or AVX-512 without VNNI) multiplies uint8 activations by int8
#: weights with ``vpmaddubsw``, which adds each pair of products in 16 bits
#: and saturates above 32,767; with 8-bit weights a pair reaches 2 x 255 x 127
#: = 64,770. At 64 it reaches 2 x 255 x 64 = 32,640: no product pair can
#: saturate on any x86 kernel, so a graph computes the same integers on every
#: CPU (ONNX Runtime's ``reduce_range`` is the same rule). Measured in the
#: user guide, "Serving a probe".
WEIGHT_MAX = 64


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
    axes = getattr(module, "dynamic_axes", None)  # an image graph's: the batch
    if axes is None:
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


def _onnx_model(path_or_model):
    """An ONNX ``ModelProto``: loaded from a path, or the one given (a large
    decoder's graph is loaded once, not once per pass)."""
    onnx = import_optional("onnx", extra="export")
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    return onnx.load(str(path_or_model))


def feed_forward_outputs(path, config) -> list:
    """Names of the matrix products of the ONNX graph at ``path`` that map a
    block's feed-forward width back to the model width (``down_proj``,
    ``mlp.c_proj``, ``output.dense``, whatever the architecture calls them),
    found by their weights' shape ``(intermediate_size, hidden_size)``."""
    import_optional("onnx", extra="export")
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    width = getattr(config, "intermediate_size", None) or getattr(
        config, "n_inner", None
    )
    width = width or (4 * hidden if hidden else None)
    if hidden is None or width == hidden:  # the shape would not tell them apart
        return []
    graph = _onnx_model(path).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    return [
        node.name
        for node in graph.node
        if node.op_type in ("MatMul", "Gemm")
        and len(node.input) > 1
        and shapes.get(node.input[1]) == (width, hidden)
    ]


def quantize_onnx(
    source, target, *, keep_float=(), per_token=False, smooth=None
) -> None:
    """Write the int8 twin of the float ONNX graph ``source`` to ``target``.

    The weights of every matrix product are quantized per output channel to
    7 bits (:data:`WEIGHT_MAX`, so that no CPU's integer products saturate)
    once and its activations at run time, except the products named
    in ``keep_float``, which stay float32 (see :func:`feed_forward_outputs`).
    Activations get one scale per tensor (ONNX Runtime's dynamic
    quantization: the scale then depends on every text of the batch and on
    its padding, so a text's output moves with its neighbours), or with
    ``per_token`` one per token (each row of the product's input), what every
    export uses (:func:`write_int8_graph`): a text's output is then the same
    in any batch, and a decoder's attention sink and outlier channels do not
    make the scale lose the other tokens (Dettmers et al., 2022,
    "LLM.int8()"). ``smooth``, a dict from a
    product's input name to ``(scale,)`` per input channel (see
    :func:`smoothing_scales`), divides the input and multiplies the weight's
    rows by it first (Xiao et al., 2023, "SmoothQuant"): exact in float, it
    moves outlier channels' range into the weights.
    """
    if not per_token:
        quant = import_optional("onnxruntime.quantization", extra="export")
        quant.quantize_dynamic(
            str(source),
            str(target),
            weight_type=quant.QuantType.QInt8,
            per_channel=True,
            reduce_range=True,  # 7-bit weights, as WEIGHT_MAX
            nodes_to_exclude=list(keep_float),
        )
        return
    _quantize_per_token(source, target, set(keep_float), smooth or {})


def _quantize_per_token(source, target, keep, smooth) -> None:
    """Every MatMul with a constant 2-D weight, except ``keep``, rewritten as
    ``(q(x / s) @ Wq) * scale(x) * w_scale`` with standard ONNX operators:
    ``q`` rounds each row to uint8 around 128 with its own scale
    ``max|row| / 127``, ``Wq`` is the weight on :data:`WEIGHT_MAX` levels each
    side of 0 with one scale per output channel, and ``MatMulInteger``
    accumulates in int32."""
    onnx = import_optional("onnx", extra="export")
    import numpy as np
    from onnx import helper, numpy_helper

    model = _onnx_model(source)
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    consts = [
        numpy_helper.from_array(np.array(127.0, np.float32), "skloes_q127"),
        numpy_helper.from_array(np.array(128.0, np.float32), "skloes_q128"),
        numpy_helper.from_array(np.array(128, np.uint8), "skloes_zp128"),
        numpy_helper.from_array(np.array(1e-30, np.float32), "skloes_qeps"),
    ]
    nodes, smoothed = [], {}
    for i, node in enumerate(graph.node):
        w = weights.get(node.input[1]) if len(node.input) == 2 else None
        if node.op_type != "MatMul" or w is None or len(w.dims) != 2:
            nodes.append(node)
            continue
        if node.name in keep:
            nodes.append(node)
            continue
        W = numpy_helper.to_array(w).astype(np.float64)
        x, p = node.input[0], f"skloes_q{i}"
        if x in smooth:  # one division per input, shared by its products
            s = np.asarray(smooth[x], dtype=np.float64)
            W = W * s[:, None]
            if x not in smoothed:
                smoothed[x] = f"skloes_smooth{len(smoothed)}"
                consts.append(
                    numpy_helper.from_array(
                        (1 / s).astype(np.float32), smoothed[x] + "_s"
                    )
                )
                nodes.append(
                    helper.make_node("Mul", [x, smoothed[x] + "_s"], [smoothed[x]])
                )
            x = smoothed[x]
        Wq, scale = _int8_weight(W)
        consts += [
            numpy_helper.from_array(Wq, p + "_wq"),
            numpy_helper.from_array(scale.astype(np.float32), p + "_ws"),
        ]
        nodes += _per_token_matmul(x, p, node.output[0], node.name)
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in graph.node for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + consts)
    onnx.save(model, str(target))


def _int8_weight(W):
    """``W`` on :data:`WEIGHT_MAX` levels each side of 0, with one scale per
    output channel: ``(Wq, scale)``, ``W ≈ Wq * scale``."""
    import numpy as np

    scale = np.abs(W).max(axis=0) / WEIGHT_MAX
    scale[scale == 0] = 1.0
    return np.clip(np.round(W / scale), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8), scale


def _per_token_matmul(x, p, output, name):
    """The nodes of ``output = (q(x) @ Wq) * scale(x) * w_scale`` for the
    weight ``p_wq`` and its scales ``p_ws`` (names prefixed by ``p``): each
    row of ``x`` rounded to uint8 around 128 with its own scale
    ``max|row| / 127``, the product accumulated in int32 by ``MatMulInteger``."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("Abs", [x], [p + "_abs"]),
        helper.make_node("ReduceMax", [p + "_abs"], [p + "_m"], axes=[-1]),
        helper.make_node("Div", [p + "_m", "skloes_q127"], [p + "_a0"]),
        helper.make_node("Max", [p + "_a0", "skloes_qeps"], [p + "_a"]),
        helper.make_node("Div", [x, p + "_a"], [p + "_xa"]),
        helper.make_node("Round", [p + "_xa"], [p + "_xr"]),
        helper.make_node("Add", [p + "_xr", "skloes_q128"], [p + "_xu"]),
        helper.make_node("Cast", [p + "_xu"], [p + "_xq"], to=TensorProto.UINT8),
        helper.make_node(
            "MatMulInteger", [p + "_xq", p + "_wq", "skloes_zp128"], [p + "_y"]
        ),
        helper.make_node("Cast", [p + "_y"], [p + "_yf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [p + "_yf", p + "_a"], [p + "_ya"]),
        helper.make_node("Mul", [p + "_ya", p + "_ws"], [output], name=name),
    ]


def matmul_input_maxima(path, feeds) -> dict:
    """Per input channel, the largest ``|x|`` that each constant-weight
    MatMul of the float graph at ``path`` sees on the batches ``feeds``
    (a list of input dicts), over real tokens only; keyed by input name."""
    import_optional("onnx", extra="export")
    ort = import_optional("onnxruntime", extra="export")
    import numpy as np
    from onnx import TensorProto, helper

    model = _onnx_model(path)
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    names = []
    for node in graph.node:
        if node.op_type == "MatMul" and len(node.input) == 2:
            if node.input[1] in weights and node.input[0] not in names:
                names.append(node.input[0])
    outputs = {o.name for o in graph.output}
    added = [name for name in names if name not in outputs]
    for name in added:
        graph.output.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
        )
    try:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    finally:  # the model given is left as it was
        del graph.output[len(graph.output) - len(added) :]
    inputs = {i.name for i in session.get_inputs()}
    maxima = {}
    for feed in feeds:
        real = np.asarray(feed.get("attention_mask", np.ones(1))).astype(bool)
        run = session.run(names, {k: v for k, v in feed.items() if k in inputs})
        for name, x in zip(names, run, strict=True):
            rows = x[real] if x.shape[:2] == real.shape else x.reshape(-1, x.shape[-1])
            top = np.abs(rows).max(axis=0)
            maxima[name] = np.maximum(maxima.get(name, 0.0), top)
    return maxima


def smoothing_scales(path, maxima, alpha=0.5, keep_float=()) -> dict:
    """SmoothQuant's per-channel scales ``s_j = a_j^α / w_j^(1-α)`` of every
    constant-weight MatMul input of the graph at ``path`` that a quantized
    product reads (``a_j``: the input's largest ``|x|`` from
    :func:`matmul_input_maxima`, ``w_j``: the largest ``|W|`` in row ``j`` over
    the products sharing the input), keyed by input name."""
    import_optional("onnx", extra="export")
    import numpy as np
    from onnx import numpy_helper

    graph = _onnx_model(path).graph
    weights = {init.name: init for init in graph.initializer}
    rows = {}
    for node in graph.node:
        w = weights.get(node.input[1]) if len(node.input) == 2 else None
        if node.op_type != "MatMul" or w is None or node.name in keep_float:
            continue
        if node.input[0] not in maxima or len(w.dims) != 2:
            continue
        top = np.abs(numpy_helper.to_array(w)).max(axis=1)
        rows[node.input[0]] = np.maximum(rows.get(node.input[0], 0.0), top)
    out = {}
    for name, w in rows.items():
        a = np.maximum(maxima[name], 1e-5)
        out[name] = np.clip(a**alpha / np.maximum(w, 1e-5) ** (1 - alpha), 1e-5, 1e5)
    return out


def optimize_onnx(path) -> None:
    """Rewrite the ONNX graph at ``path`` as ONNX Runtime optimizes it at its
    extended level (operator fusions, which do not depend on the machine,
    unlike its layout level), so that loading it need not optimize it again
    (most of the cold start of a large graph; see the user guide, "Serving a
    probe")."""
    ort = import_optional("onnxruntime", extra="export")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED

    def optimize(tmp):
        options.optimized_model_filepath = str(tmp)
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    write_whole(path, optimize, suffix=".onnx")


def write_int8_graph(source, target, config, feeds=()) -> dict:
    """Write the int8 twin of the float graph ``source`` by the model family's
    rule (``Family.int8`` in :mod:`skloes.models._families`); return what the
    export's manifest records of it.

    Parameters
    ----------
    source, target : path-like
        The float32 ONNX graph and the int8 graph to write.
    config : transformers.PretrainedConfig
        The exported model's config (its family decides).
    feeds : list of dict, default=()
        Input batches of the graph (arrays or CPU tensors by input name) to
        calibrate the smoothing on (the export's sample texts); without any,
        no smoothing.

    Returns
    -------
    entry : dict
        ``float32_products`` (how many stayed float32), ``activation_scales``
        (``"token"`` or ``"tensor"``), ``smoothing`` (α or None) and
        ``weight_max`` (the int8 weights' largest magnitude,
        :data:`WEIGHT_MAX`: a folder without it has 8-bit weights, whose
        products can saturate on a CPU without VNNI).
    """
    import re

    import numpy as np

    from skloes.models._families import model_family

    rule = model_family(config, warn=False).int8
    path = source
    named = rule.feed_forward_out or rule.float_products
    if rule.per_token or named:
        source = _onnx_model(source)  # loaded once for every pass below
    keep = feed_forward_outputs(source, config) if rule.feed_forward_out else []
    if rule.float_products:
        graph = source.graph
        pattern = re.compile(rule.float_products)
        keep += [
            node.name
            for node in graph.node
            if node.op_type == "MatMul"
            and pattern.search(node.name)
            and node.name not in keep
        ]
    if not rule.per_token:  # ONNX Runtime's own quantization reads the file
        quantize_onnx(path, target, keep_float=keep)
        return {
            "float32_products": len(keep),
            "activation_scales": "tensor",
            "smoothing": None,
            "weight_max": WEIGHT_MAX,
        }
    smooth = None
    if rule.smooth is not None and feeds:
        arrays = [{k: np.asarray(v) for k, v in feed.items()} for feed in feeds]
        maxima = matmul_input_maxima(source, arrays)
        smooth = smoothing_scales(source, maxima, rule.smooth, keep)
    quantize_onnx(
        source, target, keep_float=keep, per_token=rule.per_token, smooth=smooth
    )
    return {
        "float32_products": len(keep),
        "activation_scales": "token" if rule.per_token else "tensor",
        "smoothing": rule.smooth if smooth is not None else None,
        "weight_max": WEIGHT_MAX,
    }
