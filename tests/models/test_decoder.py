"""Decoder LLMs: padding, pooling, token budgets and exclusion (the offline
bundles and GGUF files are tested in test_registry.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.core._cache import model_fingerprint  # noqa: E402
from skloes.core._pooling import pool  # noqa: E402
from skloes.models import _registry  # noqa: E402
from skloes.models._forward import forward_pooled  # noqa: E402
from skloes.models._loading import resolve_model_path  # noqa: E402
from skloes.models._registry import (  # noqa: E402
    skloes_home,
)

TEXTS = [
    "the good movie",
    "a",
    "this film was really very dull and boring",
    "i loved it",
    "not great not bad",
]
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"


def HST(model, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(model, **params)


@pytest.fixture(scope="module")
def llama_bos(tiny_models):
    """Tiny random Llama whose tokenizer adds <s> and has no pad token."""
    return tiny_models("llama", add_bos=True)


@pytest.fixture(scope="module")
def llama(tiny_models):
    """Tiny random Llama like SmolLM2's: no BOS, no pad token, 3 blocks."""
    return tiny_models("llama", num_hidden_layers=3)


def _direct(path, texts):
    """Hidden states of each text alone (no padding at all), by a direct call."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(
                [text], return_tensors="pt", return_special_tokens_mask=True
            )
            special = enc.pop("special_tokens_mask")[0].bool()
            states = model(**enc, output_hidden_states=True).hidden_states
            out.append(([h[0] for h in states], special))
    return out


# --------------------------------------------------- decoder correctness
@pytest.mark.parametrize("pooling", ["mean", "last", "first", "max"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_side_never_changes_pooled_vectors(llama, pooling, side):
    """Each text alone (no padding) vs batched with padding on either side."""
    hst = HST(llama, pooling=pooling, exclude_tokens=None).fit(TEXTS)
    hst.processor_.padding_side = side
    assert hst.processor_.pad_token is not None  # given one: it had none
    out = hst.transform(TEXTS)
    for i, (states, _) in enumerate(_direct(llama, TEXTS)):
        mask = torch.ones(1, states[0].shape[0])
        ref = np.stack([pool(h[None], mask, pooling)[0].numpy() for h in states])
        np.testing.assert_allclose(out[:, i], ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("side", ["left", "right"])
def test_token_budget_never_changes_decoder_vectors(llama, side):
    """Split batches (new padded lengths, new position ids) give the same vectors."""
    ref = HST(llama, pooling="mean").fit(TEXTS)
    ref.processor_.padding_side = side
    small = HST(llama, pooling="mean", max_batch_tokens=8).fit(TEXTS)
    small.processor_.padding_side = side
    np.testing.assert_allclose(
        small.transform(TEXTS), ref.transform(TEXTS), atol=2e-5, rtol=1e-4
    )


def test_last_is_the_last_real_token(llama):
    out = HST(llama, pooling="last").fit_transform(TEXTS)
    for i, (states, _) in enumerate(_direct(llama, TEXTS)):
        np.testing.assert_allclose(out[-1, i], states[-1][-1].numpy(), atol=2e-5)


def test_exclude_special_and_first_tokens_from_the_mean(llama_bos):
    direct = _direct(llama_bos, TEXTS)
    special = HST(llama_bos, exclude_tokens="special").fit_transform(TEXTS)
    first = HST(llama_bos, exclude_tokens="first").fit_transform(TEXTS)
    plain = HST(llama_bos, exclude_tokens=None).fit_transform(TEXTS)
    for i, (states, is_special) in enumerate(direct):
        assert bool(is_special[0]) and not bool(is_special[1:].any())  # <s> only
        ref = np.stack([h[1:].mean(0).numpy() for h in states])
        np.testing.assert_allclose(special[:, i], ref, atol=2e-5)
        np.testing.assert_allclose(first[:, i], ref, atol=2e-5)
        np.testing.assert_allclose(
            plain[:, i], np.stack([h.mean(0).numpy() for h in states]), atol=2e-5
        )


def test_exclusion_keeps_a_text_made_only_of_excluded_tokens(llama):
    one = HST(llama, exclude_tokens="first").fit_transform(["good"])
    np.testing.assert_allclose(
        one, HST(llama, exclude_tokens=None).fit_transform(["good"]), atol=1e-6
    )


def _token_count(hidden, mask):
    return mask.sum(dim=1, keepdim=True).to(hidden.dtype)


def test_callable_pooling_sees_the_mask_without_excluded_tokens(llama):
    """Token-level metrics see the same tokens as the mean (no attention sink)."""
    texts = ["good movie indeed", "bad", "a fine plot"]
    full = HST(llama, pooling=_token_count, exclude_tokens=None).fit_transform(texts)
    kept = HST(llama, pooling=_token_count, exclude_tokens="first").fit_transform(texts)
    n_tokens = full[0, :, 0]
    assert (n_tokens >= 1).all() and (full == full[:1]).all()
    # the first token is left out, except from a one-token text (kept whole)
    np.testing.assert_array_equal(
        kept[0, :, 0], np.where(n_tokens > 1, n_tokens - 1, n_tokens)
    )


def test_auto_exclusion_is_the_measured_default(llama, tiny_model_path):
    from skloes.extraction._hidden_states import AUTO_EXCLUDE

    assert HST(llama).fit(TEXTS).exclude_tokens_ == AUTO_EXCLUDE
    assert HST(tiny_model_path).fit(TEXTS).exclude_tokens_ is None


def test_empty_text_without_any_token_is_a_clear_error(llama):
    with pytest.raises(ValueError, match="text 1 of `X` has no token"):
        HST(llama).fit_transform(["good", ""])


@pytest.mark.parametrize("dtype", ["bfloat16", "float64"])
def test_unsupported_dtype_is_a_clear_error(llama, dtype):
    with pytest.raises(ValueError, match="'dtype' parameter .* must be"):
        HST(llama, dtype=dtype).fit(TEXTS)


def test_float16_output_on_cpu(llama):
    half = HST(llama, dtype="float16").fit_transform(TEXTS)
    full = HST(llama).fit_transform(TEXTS)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, full, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("layers", [[0], [1, 2], [0, 3], [3]])
def test_pooling_inside_the_forward_equals_full_hidden_states(llama, layers):
    """Llama's last hidden state is the normed output, not the last block's."""
    model = transformers.AutoModel.from_pretrained(llama).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(llama)
    enc = tokenizer([TEXTS[2]], return_tensors="pt")
    with torch.no_grad():
        full = model(**enc, output_hidden_states=True).hidden_states
        got = forward_pooled(model, enc, layers, lambda h: h.sum(1))
    np.testing.assert_allclose(
        got.numpy(), torch.stack([full[l].sum(1) for l in layers]).numpy(), atol=1e-5
    )


# ------------------------------------------------- fit_transform once
def test_fit_transform_checks_hashes_and_tokenizes_once(llama, monkeypatch):
    from skloes.extraction import _hidden_states

    counts = {"check": 0, "hash": 0, "tokenize": 0}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(
        _hidden_states, "check_inputs", counting("check", _hidden_states.check_inputs)
    )
    monkeypatch.setattr(
        _hidden_states, "content_key", counting("hash", _hidden_states.content_key)
    )
    monkeypatch.setattr(
        _hidden_states,
        "tokenize_texts",
        counting("tokenize", _hidden_states.tokenize_texts),
    )
    out = HST(llama).fit_transform(iter(TEXTS))  # a generator works: read once
    assert out.shape == (4, len(TEXTS), 8)
    assert counts == {"check": 1, "hash": len(TEXTS), "tokenize": 1}


# ------------------------------------------------------ real SmolLM2
SMOL_TEXTS = [
    "hello world",
    "A rather good film.",
    "Terrible, slow and long; I left.",
    "ok",
]


@pytest.mark.integration
def test_smollm2_resolves_offline_and_loads_the_converted_copy(smollm2_path):
    assert Path(smollm2_path).parent == skloes_home() / "gguf"
    assert resolve_model_path(SMOLLM2) == smollm2_path  # no second conversion
    source = json.loads((Path(smollm2_path) / "skloes_source.json").read_text())
    assert source["gguf"] == _registry.SMOLLM2_GGUF
    assert (Path(smollm2_path) / "model.safetensors").is_file()
    # the cache key covers the weights actually loaded
    assert (
        model_fingerprint(smollm2_path)
        != model_fingerprint(_registry.minilm_folder() or smollm2_path)
        or not _registry.minilm_folder()
    )


@pytest.fixture(scope="module")
def smollm2(smollm2_path):
    hst = HST(SMOLLM2, pooling="last", batch_size=4).fit(SMOL_TEXTS)
    return hst, hst.transform(SMOL_TEXTS)


@pytest.mark.integration
def test_smollm2_31_layers_and_left_padding_equals_right(smollm2):
    hst, right = smollm2
    assert right.shape == (31, len(SMOL_TEXTS), 576)
    assert hst.processor_.padding_side == "right"
    hst.processor_.padding_side = "left"
    try:
        left = hst.transform(SMOL_TEXTS)
    finally:
        hst.processor_.padding_side = "right"
    scale = np.abs(right).max(axis=2, keepdims=True)
    assert np.max(np.abs(left - right) / scale) < 1e-3


@pytest.mark.integration
def test_smollm2_equals_each_text_alone(smollm2):
    hst, out = smollm2
    model, tokenizer = hst.model_, hst.processor_
    with torch.no_grad():
        for i, text in enumerate(SMOL_TEXTS):
            states = model(
                **tokenizer([text], return_tensors="pt"), output_hidden_states=True
            ).hidden_states
            ref = np.stack([h[0, -1].numpy() for h in states])
            scale = np.abs(ref).max(axis=1, keepdims=True)
            assert np.max(np.abs(out[:, i] - ref) / scale) < 1e-3


@pytest.mark.integration
def test_smollm2_probe_command_with_layer_by_layer_metrics(
    smollm2_path, tmp_path, capsys
):
    """The README's second command on a few dozen texts, token metrics included."""
    from skloes.cli import main

    out = tmp_path / "report"
    status = main(
        [
            "probe",
            "--model",
            SMOLLM2,
            "--max-samples",
            "40",
            "--max-length",
            "32",
            "--token-metrics",
            "--out",
            str(out),
        ]
    )
    assert status == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    assert "31 hidden states of width 576" in stdout
    lines = (out / "layers.csv").read_text().splitlines()
    assert len(lines) == 32  # header + 31 layers
    header = lines[0].split(",")
    for metric in ("prompt_entropy", "curvature", "dataset_entropy"):
        assert metric in header
    values = np.array([[float(v) for v in line.split(",")[1:]] for line in lines[1:]])
    assert np.isfinite(values).all()
    assert json.loads((out / "selection.json").read_text())["n_layers"] == 31
    assert (out / "profile.png").stat().st_size > 10_000


def test_exclude_tokens_on_an_audio_model_is_a_clear_error(tmp_path):
    from skloes.models._testing import make_tiny_vit, make_tiny_wav2vec2

    wav2vec2 = make_tiny_wav2vec2(tmp_path / "wav2vec2")
    waves = [np.zeros(400, np.float32)] * 2
    with pytest.raises(ValueError, match="`exclude_tokens` applies to text and"):
        HST(wav2vec2, exclude_tokens="first").fit(waves)
    assert HST(wav2vec2).fit(waves).exclude_tokens_ is None
    # an image model's prefix tokens are its special tokens (0.3)
    vit = make_tiny_vit(tmp_path / "vit")
    images = [np.zeros((16, 16, 3), np.float32)] * 2
    assert HST(vit).fit(images).exclude_tokens_ == "special"
    assert HST(vit, exclude_tokens="first").fit(images).exclude_tokens_ == "first"


def test_last_state_probe_runs_only_where_the_last_state_is_ambiguous(
    llama, tiny_model_path, monkeypatch
):
    """One extra one-row pass for a Llama (normed output) of an unknown family,
    none when its family states it, none for BERT."""
    from skloes.models import _families
    from skloes.models import _forward as _models

    unknown = {k: v for k, v in _families._BY_TYPE.items() if k != "llama"}
    for path, rows, types in (
        (llama, 1, unknown),
        (llama, 0, _families._BY_TYPE),
        (tiny_model_path, 0, _families._BY_TYPE),
    ):
        monkeypatch.setattr(_families, "_BY_TYPE", types)
        model = transformers.AutoModel.from_pretrained(path).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        enc = tokenizer(TEXTS, return_tensors="pt", padding=True)
        calls = []
        handle = model.register_forward_pre_hook(
            lambda m, args, kwargs, calls=calls: calls.append(
                kwargs["input_ids"].shape[0]
            ),
            with_kwargs=True,
        )
        with torch.no_grad():
            full = model(**enc, output_hidden_states=True).hidden_states
            calls.clear()
            for _ in range(2):
                got = forward_pooled(model, enc, [0, len(full) - 1], lambda h: h.sum(1))
        handle.remove()
        assert calls == [len(TEXTS)] + [1] * rows + [len(TEXTS)], path
        np.testing.assert_allclose(got[1].numpy(), full[-1].sum(1).numpy(), atol=1e-4)
        want = "block" if path == tiny_model_path else "output"
        assert _models._LAST_STATE_SOURCE[model] == want
