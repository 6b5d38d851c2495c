"""What an int8 graph's integer products compute on a CPU without VNNI.

AVX2 (and AVX-512 without VNNI) multiplies uint8 activations by int8 weights
with ``vpmaddubsw``: each pair of neighbouring products is added in 16 bits,
saturating at ±32,767, before the pairs are summed in 32 bits. A CPU with
VNNI (or AMX) accumulates in 32 bits directly. :func:`pair_saturated_matmul`
computes the first in numpy, so that a test on any CPU sees what an AVX2
machine's ONNX Runtime computes, which no environment variable can make it
run here (its kernels are chosen by CPUID alone).
"""

from __future__ import annotations

import numpy as np

INT16_MAX = np.iinfo(np.int16).max


def pair_saturated_matmul(a, b):
    """``a @ b`` for uint8 ``a`` (m, k) and int8 ``b`` (k, n) as ``vpmaddubsw``
    then ``vpmaddwd`` compute it: neighbouring products along k added in
    int16 with saturation, the pairs then summed in int32."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    if a.shape[1] % 2:
        a = np.pad(a, ((0, 0), (0, 1)))
        b = np.pad(b, ((0, 1), (0, 0)))
    pairs = a[:, 0::2, None] * b[None, 0::2] + a[:, 1::2, None] * b[None, 1::2]
    return np.clip(pairs, -INT16_MAX - 1, INT16_MAX).sum(axis=1)


def graph_int8_weights(path):
    """Every int8 weight matrix an integer product of the ONNX graph at
    ``path`` reads (``MatMulInteger`` and ONNX Runtime's fused forms)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    graph = onnx.load(str(path)).graph
    inits = {init.name: init for init in graph.initializer}
    integer_ops = {"MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
    found = []
    for node in graph.node:
        if node.op_type in integer_ops and len(node.input) > 1:
            init = inits.get(node.input[1])
            if init is not None and init.data_type == TensorProto.INT8:
                found.append(numpy_helper.to_array(init))
    return found


def assert_no_pair_can_saturate(path):
    """Every integer product of the graph at ``path`` gives the same integers
    on every x86 CPU: for the worst uint8 activations (255 on each product
    pair), no pair of products leaves int16."""
    weights = graph_int8_weights(path)
    assert weights, f"{path} has no int8 products"
    for w in weights:
        w = np.abs(w.astype(np.int64))
        if w.shape[0] % 2:
            w = np.pad(w, ((0, 1), (0, 0)))
        worst = 255 * (w[0::2] + w[1::2]).max()
        assert worst <= INT16_MAX, f"a weight pair reaches {worst} in int16"
