"""The whole loop on the three decoder families, real weights and real texts.

SmolLM2-135M-Instruct (Llama), Gemma 3 270M and Qwen2.5-Coder-0.5B-Instruct
(Qwen2), each from its offline package: the report with the Layer-by-Layer
metrics, a probe fitted, predicting through its deepest selected block only,
saved without the weights and loaded back, exported in int8 with its stored
check, predicting without torch, the reduced precisions, the float16 store
and the family's own statements (padding and positions, the last hidden
state, Qwen2's sink and chat template). Tiny data, short texts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from _support.decoders import DECODERS, decoder_path
from _support.int8 import assert_no_pair_can_saturate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.metrics import TokenMetricPooling  # noqa: E402
from skloes.models import _families  # noqa: E402
from skloes.models._forward import _last_state_source, find_blocks  # noqa: E402
from skloes.probe import LayerProbeClassifier, load_probe, save_probe  # noqa: E402
from skloes.selection import LOESSelector  # noqa: E402
from skloes.serving import load_exported  # noqa: E402

pytestmark = pytest.mark.integration

MAX_LENGTH = 16


@pytest.fixture(scope="module", params=list(DECODERS))
def decoder(request):
    """The name of a decoder whose offline package is installed (else skipped)."""
    decoder_path(request, request.param)
    return request.param


@pytest.fixture(scope="module")
def texts(rotten_tomatoes_small):
    X, y = rotten_tomatoes_small
    return [str(x) for x in X[:64]], np.asarray(y[:64])


@pytest.fixture(scope="module")
def fitted(decoder, texts):
    X, y = texts
    probe = LayerProbeClassifier(
        DECODERS[decoder][0],
        max_length=MAX_LENGTH,
        batch_size=16,
        selector=LOESSelector(n_layers_to_select=2, random_state=0),
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small-sample notes
        probe.fit(X[:48], y[:48])
    return probe


def test_the_report_command_with_layer_by_layer_metrics(decoder, tmp_path, capsys):
    from skloes.cli import main

    hub_id, _, n_states, width = DECODERS[decoder]
    out = tmp_path / "report"
    status = main(
        [
            "probe",
            "--model",
            hub_id,
            "--max-samples",
            "40",
            "--max-length",
            str(MAX_LENGTH),
            "--token-metrics",
            "--out",
            str(out),
            "--save",
            str(out / "probe"),
        ]
    )
    assert status == 0, capsys.readouterr().err
    assert f"{n_states} hidden states of width {width}" in capsys.readouterr().out
    lines = (out / "layers.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert len(lines) == n_states + 1
    for metric in ("prompt_entropy", "curvature", "dataset_entropy"):
        assert metric in header
    values = np.array([[float(v) for v in line.split(",")[1:]] for line in lines[1:]])
    assert np.isfinite(values).all()
    assert json.loads((out / "selection.json").read_text())["n_layers"] == n_states
    assert (out / "probe" / "manifest.json").is_file()


def test_the_family_and_its_pooling(decoder, fitted):
    hst = fitted.pipeline_[0]
    assert hst.family_ == DECODERS[decoder][1]
    assert hst.exclude_tokens_ == "first"  # the attention sink left out


def test_prediction_runs_only_through_the_deepest_selected_block(
    decoder, fitted, texts
):
    X, y = texts
    deepest = int(fitted.selected_layers_.max())
    blocks = set(map(id, find_blocks(fitted.pipeline_[0].model_)))
    ran = set()
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, i, o: ran.add(id(module)) if id(module) in blocks else None
    )
    try:
        predicted = fitted.predict(X[48:])
    finally:
        hook.remove()
    assert len(ran) == deepest  # not one block past the deepest selected
    assert predicted.shape == (16,)


def test_saved_without_weights_and_loaded_back_identical(fitted, texts, tmp_path):
    X, _ = texts
    folder = save_probe(fitted, tmp_path / "probe")
    assert sum(f.stat().st_size for f in folder.iterdir()) < 1_000_000
    loaded = load_probe(folder, runtime="torch")
    np.testing.assert_allclose(
        loaded.predict_proba(X[48:]), fitted.predict_proba(X[48:]), atol=1e-6
    )


@pytest.fixture(
    scope="module",
    params=[
        "smollm2",
        pytest.param("gemma3", marks=pytest.mark.slow),
        pytest.param("qwen2", marks=pytest.mark.slow),
    ],
)
def int8_decoder(request):
    """The decoders whose int8 export is checked: SmolLM2's by default. The
    three families share one int8 rule (``skloes.models._families``), and
    Gemma 3's and Qwen2's exports take over a minute each on 2 cores (their
    262k- and 152k-token embedding tables go through the ONNX exporter and
    ONNX Runtime several times): slow."""
    decoder_path(request, request.param)
    return request.param


@pytest.fixture(scope="module")
def shallow(int8_decoder, texts):
    """A probe on two shallow layers (the export is cut after block 3)."""
    from skloes.selection import MetricTopKSelector

    X, y = texts
    n_states = DECODERS[int8_decoder][2]
    scores = np.full(n_states, -1.0)
    scores[[1, 3]] = 1.0
    selector = MetricTopKSelector(
        metric="layer_scores", n_layers_to_select=2, layer_scores=scores
    )
    probe = LayerProbeClassifier(
        DECODERS[int8_decoder][0], max_length=MAX_LENGTH, selector=selector
    )
    return probe.fit(X[:32], y[:32])


def test_int8_export_records_its_check_and_predicts_without_torch(
    int8_decoder, shallow, texts, tmp_path
):
    X, _ = texts
    folder = save_probe(
        shallow, tmp_path / "int8", export="onnx-int8", check_texts=X[:32]
    )
    export = json.loads((folder / "manifest.json").read_text())["export"]
    check, graph = export["check"], export["graph"]
    assert export["precision"] == "int8" and check["n_texts"] == 32
    # the family's rule: feed-forward outputs, keys and values of the three
    # blocks in float32, per-token scales and smoothing elsewhere
    assert graph["float32_products"] == 9 and graph["activation_scales"] == "token"
    assert_no_pair_can_saturate(folder / "graph-int8.onnx")  # on any CPU
    served = load_exported(folder)
    again = np.mean(served.predict(X[:32]) == shallow.predict(X[:32]))
    assert check["same_prediction"] == pytest.approx(again)
    features = shallow.pipeline_[0].transform(X[48:])
    scale = np.abs(features).max()
    assert np.abs(served.transform(X[48:]) - features).max() < 0.05 * scale
    code = (
        "import json, sys\n"
        "class _Forbid:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'torch', 'transformers'}:\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, _Forbid())\n"
        "from skloes.serving import load_exported\n"
        "p = load_exported(sys.argv[1])\n"
        "print(json.dumps(p.predict_proba(json.loads(sys.argv[2])).tolist()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), json.dumps(X[48:])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(
        np.array(json.loads(out.stdout)), served.predict_proba(X[48:]), atol=1e-6
    )


def test_reduced_precisions_stay_close_to_float32(decoder, fitted, texts):
    X, _ = texts
    layers = fitted.selected_layers_.tolist()
    full = fitted.pipeline_[0].transform(X[:8])  # pruned to them, model loaded
    for precision in ("bfloat16", "int8"):
        low = HiddenStatesTransformer(
            DECODERS[decoder][0],
            precision=precision,
            max_length=MAX_LENGTH,
            layers=layers,
            device="cpu",
        ).fit_transform(X[:8])
        cosine = (full * low).sum(-1) / np.linalg.norm(full, axis=-1)
        cosine /= np.linalg.norm(low, axis=-1)
        assert cosine.min() > 0.98, precision


def test_streamed_curvature_equals_the_metric_on_the_token_states(decoder, texts):
    """TokenMetricPooling computes the authors' curvature inside the batch
    loop; it equals curvature() on the same texts' token states, and differs
    from the paper's definition."""
    from skloes.metrics import curvature, prompt_entropy
    from skloes.models._forward import forward_hidden_states

    X, _ = texts
    pooling = TokenMetricPooling(definition="authors_code")
    hst = HiddenStatesTransformer(
        DECODERS[decoder][0], pooling=pooling, max_length=MAX_LENGTH, layers=[3, 6]
    )
    _, streamed = pooling.split(hst.fit_transform(X[:6]))
    tokens = []
    with torch.inference_mode():
        for text in X[:6]:
            inputs = hst.processor_(
                [text], return_tensors="pt", truncation=True, max_length=MAX_LENGTH
            )
            states = forward_hidden_states(hst.model_, dict(inputs), 6)
            layers = np.stack([states[l][0].float().numpy() for l in (3, 6)])
            tokens.append(layers[:, 1:])  # the callable's mask leaves the sink out
    assert hst.exclude_tokens_ == "first"
    authors = curvature(tokens, definition="authors_code")
    np.testing.assert_allclose(streamed["curvature"], authors, rtol=1e-4)
    np.testing.assert_allclose(
        streamed["prompt_entropy"], prompt_entropy(tokens), rtol=1e-4
    )
    assert not np.allclose(curvature(tokens), authors)


def test_padding_and_positions_give_each_text_its_unpadded_vectors(decoder, texts):
    """A padded batch equals each text alone, on the side the tokenizer pads
    (Gemma left, SmolLM2 and Qwen2 right) and on the other one."""
    X, _ = texts
    hst = HiddenStatesTransformer(
        DECODERS[decoder][0],
        max_length=MAX_LENGTH,
        layers=[1, 6, -1],
        batch_size=8,
        device="cpu",
    )
    batched = hst.fit_transform(X[:8])
    own = hst.processor_.padding_side
    assert own == PADDING_SIDE[decoder]
    hst.processor_.padding_side = "left" if own == "right" else "right"
    try:
        other = hst.transform(X[:8])
    finally:
        hst.processor_.padding_side = own
    alone = hst.set_params(batch_size=1).transform(X[:8])  # the same model
    scale = np.abs(alone).max(axis=2, keepdims=True)
    assert np.max(np.abs(batched - alone) / scale) < 1e-3
    assert np.max(np.abs(other - alone) / scale) < 1e-3


PADDING_SIDE = {"smollm2": "right", "gemma3": "left", "qwen2": "right"}


def test_the_last_hidden_state_is_what_the_family_says(decoder, fitted, texts):
    """The family's statement (no probe pass) against the one-row probe."""
    X, _ = texts
    hst = fitted.pipeline_[0]
    model = transformers.AutoModel.from_pretrained(hst.model_path_).eval()
    encoded = hst.processor_(X[:2], return_tensors="pt", padding=True)
    stated = _families.model_family(model.config).last_state
    original = _families._BY_TYPE
    try:
        _families._BY_TYPE = {}  # as if unknown: probe it
        probed = _last_state_source(model, dict(encoded), find_blocks(model))
    finally:
        _families._BY_TYPE = original
    assert stated == probed == "output"


def test_gemma3_float16_store_is_refused_with_the_layer_not_infinities(
    gemma3_path, texts
):
    """Gemma 3's BOS token reaches about 1e5 mid-stack: max pooling over it
    cannot be stored in float16, and the error says where."""
    X, _ = texts
    hst = HiddenStatesTransformer(
        "google/gemma-3-270m",
        pooling="max",
        exclude_tokens=None,
        dtype="float16",
        max_length=MAX_LENGTH,
        layers=[4, 10],
    )
    with pytest.warns(UserWarning, match="gemma3 models can exceed float16"):
        hst.fit(X[:4])
    with pytest.raises(ValueError, match=r"layer 10 of .*beyond float16's range"):
        hst.transform(X[:4])


# ------------------------------------------------------- Qwen2's own quirks
QWEN2 = DECODERS["qwen2"][0]


def test_qwen2_adds_no_bos_and_pads_right_with_endoftext(qwen2_path):
    """No BOS: a text's first position is its first word; the pad token is
    <|endoftext|> (id 151643), not the end of a turn <|im_end|> (151645)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen2_path)
    encoded = tokenizer(["a fine film", "ok"], padding=True)
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"][0]) == [
        "a",
        "Ġfine",
        "Ġfilm",
    ]
    assert (tokenizer.padding_side, tokenizer.pad_token_id) == ("right", 151643)
    assert encoded["input_ids"][1][1:] == [151643, 151643]
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == 151645
    assert tokenizer.eos_token == "<|im_end|>"


def test_qwen2_first_position_is_a_massive_sink_and_a_max_pool_fits_float16(
    qwen2_path, texts
):
    """The first word carries Qwen2's massive activations (1,000 to 2,000
    from block 3 to 21, against tens for the other tokens), which is why
    exclude_tokens="auto" leaves it out; even a max pool over it stays
    within float16's range, so a float16 store holds Qwen2's states."""
    X, _ = texts
    layers = [3, 12, 18]
    params = dict(pooling="max", exclude_tokens=None, max_length=MAX_LENGTH)
    params.update(layers=layers, device="cpu")
    wide = HiddenStatesTransformer(QWEN2, **params).fit(X[:8])
    full = wide.transform(X[:8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no float16 warning for this family
        half = HiddenStatesTransformer(QWEN2, dtype="float16", **params).fit(X[:8])
        stored = half.transform(X[:8])
    assert stored.dtype == np.float16 and np.isfinite(stored).all()
    np.testing.assert_allclose(stored, full, rtol=1e-3, atol=1e-2)
    inputs = wide.processor_(X[:8], return_tensors="pt", padding=True)
    with torch.inference_mode():
        states = wide.model_(**inputs, output_hidden_states=True).hidden_states
    mask = inputs["attention_mask"].bool()
    for layer in layers:
        h = states[layer].abs().amax(-1)  # (texts, positions)
        rest = h[:, 1:][mask[:, 1:]].max()
        assert h[:, 0].min() > 10 * rest, layer
        assert 500 < h[:, 0].max() < 65504 / 10, layer


def test_qwen2_last_token_under_the_chat_template_reads_the_template(qwen2_path):
    """Texts formatted with Qwen2's chat template end in <|im_end|> and a
    newline: pooling="last" reads that template token, the same for every
    text, not the text's last word (its embedding-layer vector is identical
    for all texts); the mean still reads the text."""
    words = ["a fine film", "dull and slow", "i loved it", "not great"]
    hst = HiddenStatesTransformer(QWEN2, pooling="last", layers=[0], device="cpu")
    hst.fit(words)
    chats = [
        hst.processor_.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False
        )
        for text in words
    ]
    assert all(
        chat.endswith(f"{text}<|im_end|>\n")
        for chat, text in zip(chats, words, strict=True)
    )
    ids = hst.processor_(chats)["input_ids"]
    assert {tuple(row[-2:]) for row in ids} == {(151645, 198)}  # <|im_end|>, \n
    last = hst.transform(chats)[0]
    assert np.ptp(last, axis=0).max() == 0  # one vector for the four texts
    plain = hst.transform(words)[0]
    assert len(np.unique(plain, axis=0)) == 4  # each text's own last word
    mean = hst.set_params(pooling="mean").fit_transform(chats)[0]
    assert len(np.unique(mean, axis=0)) == 4  # each text's own tokens
