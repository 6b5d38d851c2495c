"""Model families: the per-architecture quirks, and the defaults of the unknown."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.models import _families  # noqa: E402
from skloes.models._families import FAMILIES, model_family  # noqa: E402
from skloes.models._testing import make_tiny_llama, make_tiny_model  # noqa: E402

TEXTS = ["the good movie", "a", "this film was really very dull", "i loved it"]


@pytest.mark.parametrize(
    "config, name, decoder, exclude, last",
    [
        (transformers.LlamaConfig(), "llama", True, "first", "output"),
        (transformers.Gemma3TextConfig(), "gemma3", True, "first", "output"),
        (transformers.Qwen2Config(), "qwen2", True, "first", "output"),
        (transformers.BertConfig(), "bert", False, None, "block"),
        (transformers.MPNetConfig(), "mpnet", False, None, "block"),
    ],
)
def test_known_families_state_their_quirks(config, name, decoder, exclude, last):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a known family never warns
        family = model_family(config)
    assert (family.name, family.decoder, family.pool_exclude, family.last_state) == (
        name,
        decoder,
        exclude,
        last,
    )
    assert family.known and family.positions == ("count_real" if decoder else "model")


def test_each_model_type_belongs_to_one_family():
    types = [kind for family in FAMILIES for kind in family.model_types]
    assert len(types) == len(set(types))
    assert not model_family(transformers.Gemma3TextConfig()).float16_store
    assert model_family(transformers.LlamaConfig()).float16_store
    assert model_family(transformers.Qwen2Config()).float16_store


@pytest.mark.parametrize(
    "config, decoder",
    [(transformers.Qwen3Config(), True), (transformers.ElectraConfig(), False)],
)
def test_an_unknown_architecture_gets_safe_defaults_and_a_warning_naming_it(
    config, decoder
):
    with pytest.warns(UserWarning, match=r"'my/model'.*model_type '") as record:
        family = model_family(config, model="my/model", owner="Thing")
    assert "Thing:" in str(record[0].message)
    assert config.model_type in str(record[0].message)
    assert not family.known and family.name == "unknown"
    assert family.decoder is decoder
    assert family.pool_exclude == ("first" if decoder else None)
    assert family.last_state is None  # checked on one row instead
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model_family(config, warn=False)


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """A tiny Llama relabelled as Mistral: an architecture skloes has not checked
    (Mistral's modules carry Llama's weight names)."""
    path = make_tiny_llama(tmp_path_factory.mktemp("mistral"), num_hidden_layers=2)
    file = Path(path) / "config.json"
    config = json.loads(file.read_text())
    config["model_type"] = "mistral"
    config["architectures"] = ["MistralModel"]
    file.write_text(json.dumps(config))
    return path


def test_an_extractor_on_an_unknown_architecture_warns_and_uses_the_defaults(
    mistral,
):
    hst = HiddenStatesTransformer(mistral, device="cpu")
    with pytest.warns(UserWarning, match="model_type 'mistral'") as record:
        out = hst.fit_transform(TEXTS)
    assert mistral in str(record[0].message)
    assert hst.family_ == "unknown" and hst.exclude_tokens_ == "first"
    assert out.shape[:2] == (3, len(TEXTS)) and np.isfinite(out).all()


def test_the_family_answers_what_the_last_state_is_and_the_probe_agrees(
    tmp_path, monkeypatch
):
    """Llama states that hidden_states[-1] is its normed output; the one-row
    probe that an unknown family gets finds the same."""
    from skloes.models import _forward

    path = make_tiny_llama(tmp_path / "llama", num_hidden_layers=2)
    model = transformers.AutoModel.from_pretrained(path).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    tokenizer.pad_token = tokenizer.eos_token
    enc = tokenizer(TEXTS, return_tensors="pt", padding=True)
    blocks = _forward.find_blocks(model)
    assert _forward._last_state_source(model, enc, blocks) == "output"
    probed = transformers.AutoModel.from_pretrained(path).eval()
    monkeypatch.setattr(_families, "_BY_TYPE", {})  # as if llama were unknown
    assert _forward._last_state_source(probed, enc, blocks) == "output"


def test_a_float16_store_that_would_overflow_is_a_clear_error(tmp_path):
    """Pooled values past 65504 stop transform, naming the layer, instead of
    storing infinities; float32 keeps them."""
    path = make_tiny_model(tmp_path / "big", num_hidden_layers=1)
    model = transformers.AutoModel.from_pretrained(path)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight.mul_(1e6)
        model.embeddings.LayerNorm.weight.mul_(1e6)
    model.save_pretrained(path)
    wide = HiddenStatesTransformer(path, device="cpu").fit_transform(TEXTS)
    assert np.isfinite(wide).all() and np.abs(wide[0]).max() > 65504
    with pytest.raises(ValueError, match=r"layer 0 of .*beyond float16's range"):
        HiddenStatesTransformer(path, device="cpu", dtype="float16").fit_transform(
            TEXTS
        )


# --------------------------------------------------------------- int8 rules
def _one_product(tmp_path, W):
    """A float ONNX graph computing ``x @ W`` for x of shape (batch, tokens, K)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    K = W.shape[0]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="/block/proj/MatMul")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(W.astype(np.float32), "W")],
    )
    path = tmp_path / "float.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path
    )
    return path


def _run(path, x):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _row_error(y, ref):
    return np.linalg.norm(y - ref, axis=-1) / np.linalg.norm(ref, axis=-1)


def test_per_token_scales_keep_the_other_tokens_when_one_is_huge(tmp_path):
    """An attention sink's row a thousand times larger than the others ruins
    one scale per tensor for every other token, not one scale per token."""
    from skloes.models._graph import quantize_onnx

    rng = np.random.RandomState(0)
    W = rng.normal(size=(64, 32)) * 0.1
    x = rng.normal(size=(2, 6, 64)).astype(np.float32)
    x[:, 0] *= 1000.0  # each text's first token
    path = _one_product(tmp_path, W)
    ref = x @ W.astype(np.float32)
    quantize_onnx(path, tmp_path / "tensor.onnx")
    quantize_onnx(path, tmp_path / "token.onnx", per_token=True)
    tensor = _row_error(_run(tmp_path / "tensor.onnx", x), ref)[:, 1:]
    token = _row_error(_run(tmp_path / "token.onnx", x), ref)
    # rounding alone, the sink's row too: a weight's step is max|w| / 64, a
    # uniform error of step / sqrt(12) (0.012 of a Gaussian row's product),
    # an activation's max|x| / 127 (0.006); 3 of the combined 0.013 bounds
    # the worst of 12 rows
    assert token.max() < 0.04
    assert tensor.mean() > 10 * token[:, 1:].mean()


@pytest.mark.cpu_sensitive
def test_int8_products_give_the_same_integers_on_every_cpu(tmp_path):
    """The exported weights are 7-bit, so an AVX2 CPU's 16-bit pair sums
    (emulated in numpy) equal the exact products for any activations; with
    8-bit weights (an export before 0.4) the same products saturate."""
    from _support.int8 import (
        assert_no_pair_can_saturate,
        graph_int8_weights,
        pair_saturated_matmul,
    )

    from skloes.models._graph import WEIGHT_MAX, quantize_onnx

    rng = np.random.RandomState(4)
    W = rng.normal(size=(96, 24)) * 0.1
    quantize_onnx(_one_product(tmp_path, W), tmp_path / "q.onnx", per_token=True)
    assert_no_pair_can_saturate(tmp_path / "q.onnx")
    (Wq,) = graph_int8_weights(tmp_path / "q.onnx")
    assert np.abs(Wq).max() == WEIGHT_MAX  # each column's largest weight
    # per-token activations sit at 1 or 255 wherever a row's largest values are
    a = np.where(rng.rand(50, 96) < 0.5, 255, 1).astype(np.uint8)
    exact = a.astype(np.int64) @ Wq.astype(np.int64)
    np.testing.assert_array_equal(pair_saturated_matmul(a, Wq), exact)
    old = np.clip(np.round(W / (np.abs(W).max(axis=0) / 127)), -127, 127)
    assert (pair_saturated_matmul(a, old) != a @ old.astype(np.int64)).any()


@pytest.mark.cpu_sensitive
def test_the_int8_graph_computes_its_rule_exactly(tmp_path):
    """The graph's output is the rule's arithmetic (per-token uint8
    activations, 7-bit weights, int32 sums, float rescaling) computed in
    numpy, to float32 rounding of the rescaling: the same on every CPU."""
    from _support.int8 import graph_int8_weights

    from skloes.models._graph import quantize_onnx

    rng = np.random.RandomState(5)
    W = rng.normal(size=(64, 16))
    x = rng.normal(size=(1, 7, 64)).astype(np.float32)
    x[0, 0] *= 300.0
    quantize_onnx(_one_product(tmp_path, W), tmp_path / "q.onnx", per_token=True)
    (Wq,) = graph_int8_weights(tmp_path / "q.onnx")
    w_scale = (np.abs(W).max(axis=0) / 64).astype(np.float32)
    a = np.maximum(np.abs(x).max(axis=-1, keepdims=True) / np.float32(127), 1e-30)
    q = np.round(x / a).astype(np.int64)  # around 0; the graph adds 128, then subtracts
    ints = q @ Wq.astype(np.int64)
    expected = ints.astype(np.float32) * a * w_scale
    # three float32 roundings (cast, two products) of each output
    np.testing.assert_allclose(
        _run(tmp_path / "q.onnx", x), expected, rtol=4 * np.finfo(np.float32).eps
    )


def test_smoothing_is_exact_in_float_and_tames_an_outlier_channel(tmp_path):
    from skloes.models._graph import (
        matmul_input_maxima,
        quantize_onnx,
        smoothing_scales,
    )

    rng = np.random.RandomState(1)
    W = rng.normal(size=(64, 32)) * 0.1
    x = rng.normal(size=(3, 8, 64)).astype(np.float32)
    x[..., 7] *= 200.0  # an outlier channel in every token, whose weights
    W[7] *= 0.005  # are small (a decoder's massive activations): it sets
    path = _one_product(tmp_path, W)  # each token's scale, not its product
    ref = x @ W.astype(np.float32)
    feeds = [{"x": x, "attention_mask": np.ones(x.shape[:2], np.int64)}]
    maxima = matmul_input_maxima(path, feeds)
    np.testing.assert_allclose(maxima["x"], np.abs(x).max(axis=(0, 1)), rtol=1e-6)
    scales = smoothing_scales(path, maxima, alpha=0.5)
    w_rows = np.abs(W).max(axis=1)
    np.testing.assert_allclose(
        scales["x"], np.sqrt(maxima["x"]) / np.sqrt(w_rows), rtol=1e-5
    )
    quantize_onnx(path, tmp_path / "plain.onnx", per_token=True)
    quantize_onnx(path, tmp_path / "smooth.onnx", per_token=True, smooth=scales)
    plain = _row_error(_run(tmp_path / "plain.onnx", x), ref)
    smooth = _row_error(_run(tmp_path / "smooth.onnx", x), ref)
    assert smooth.mean() < plain.mean() / 2


def test_a_decoder_family_rule_keeps_its_named_products_in_float32(
    tmp_path, monkeypatch
):
    """write_int8_graph follows the family: named products stay MatMul,
    the others become per-token int8 products; an encoder's are all int8."""
    import dataclasses

    from skloes.models._families import Int8Rule
    from skloes.models._graph import write_int8_graph

    onnx = pytest.importorskip("onnx")
    W = np.random.RandomState(2).normal(size=(16, 8))
    path = _one_product(tmp_path, W)
    x = np.random.RandomState(3).normal(size=(1, 4, 16)).astype(np.float32)
    feeds = [{"x": x, "attention_mask": np.ones((1, 4), np.int64)}]
    llama = model_family(transformers.LlamaConfig())
    assert llama.int8.per_token and llama.int8.feed_forward_out
    assert llama.int8.float_products == r"/self_attn/(k|v)_proj/"
    entry = write_int8_graph(path, tmp_path / "i8.onnx", transformers.LlamaConfig())
    assert entry == {
        "float32_products": 0,  # no q/k/v/down_proj here: all int8
        "activation_scales": "token",
        "smoothing": None,  # no sample to calibrate on
        "weight_max": 64,  # 7-bit weights: no CPU's products saturate
    }
    ops = {n.op_type for n in onnx.load(str(tmp_path / "i8.onnx")).graph.node}
    assert "MatMulInteger" in ops and "MatMul" not in ops
    kept = Int8Rule(per_token=True, float_products="/block/proj/", smooth=0.5)
    patched = {"llama": dataclasses.replace(llama, int8=kept)}
    monkeypatch.setattr(_families, "_BY_TYPE", patched)
    entry = write_int8_graph(
        path, tmp_path / "k.onnx", transformers.LlamaConfig(), feeds
    )
    assert entry["float32_products"] == 1 and entry["smoothing"] == 0.5
    np.testing.assert_allclose(
        _run(tmp_path / "k.onnx", x), x @ W.astype(np.float32), rtol=1e-5, atol=1e-5
    )
    bert = write_int8_graph(path, tmp_path / "b.onnx", transformers.BertConfig())
    assert bert["activation_scales"] == "token"  # every family, encoders too
