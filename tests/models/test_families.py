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


@pytest.mark.parametrize(
    "config, decoder",
    [(transformers.Qwen2Config(), True), (transformers.ElectraConfig(), False)],
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
