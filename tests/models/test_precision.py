"""The compute ``precision`` of HiddenStatesTransformer: engines, cache key,
dtype, errors, estimator contract, and closeness to float32 on real models."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from skloes import HiddenStatesTransformer

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TEXTS = ["a good movie", "a dull plot and a long film", "fine", "the end of it"]


def _cosine(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models("llama")


def test_int8_linear_matches_float_within_quantization_error():
    from skloes.models._precision import Bf16Linear, Int8Linear

    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(3, 5, 64)
    exact = linear(x)
    for layer, tol in ((Int8Linear(linear), 0.02), (Bf16Linear(linear), 0.01)):
        y = layer(x)
        assert y.dtype == torch.float32 and y.shape == exact.shape
        assert (y - exact).norm() / exact.norm() < tol


def test_int8_replaces_every_linear_and_bfloat16_casts_the_model(tiny_model_path):
    from skloes.models._precision import Int8Linear

    hst = HiddenStatesTransformer(tiny_model_path, device="cpu", precision="int8").fit(
        TEXTS
    )
    modules = list(hst.model_.modules())
    assert not any(type(m) is torch.nn.Linear for m in modules)
    assert any(isinstance(m, Int8Linear) for m in modules)
    hst.set_params(precision="bfloat16").fit(TEXTS)
    assert {p.dtype for p in hst.model_.parameters()} == {torch.bfloat16}


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_returned_dtype_is_the_users(tiny_model_path, precision, dtype):
    out = HiddenStatesTransformer(
        tiny_model_path, device="cpu", dtype=dtype, precision=precision
    ).fit_transform(TEXTS)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == (3, len(TEXTS), 8)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_decoder_runs_and_truncated_forward_still_matches(llama, precision):
    hst = HiddenStatesTransformer(llama, device="cpu", precision=precision)
    full = hst.fit_transform(TEXTS)
    part = clone(hst).set_params(layers=[1]).fit_transform(TEXTS)
    np.testing.assert_allclose(part[0], full[1], rtol=1e-5, atol=1e-6)


def test_precision_is_part_of_the_cache_key(tiny_model_path, tmp_path, cache_entries):
    folders = {}
    for precision in ("float32", "bfloat16", "int8"):
        hst = HiddenStatesTransformer(
            tiny_model_path, device="cpu", cache=tmp_path, precision=precision
        )
        out = hst.fit_transform(TEXTS)
        again = clone(hst).fit_transform(TEXTS)  # served by its own entries
        np.testing.assert_array_equal(out, again)
        folders[precision] = set(cache_entries(tmp_path))
    assert len(folders["float32"]) == 1
    assert len(folders["bfloat16"]) == 2 and len(folders["int8"]) == 3


def test_float32_keeps_the_cache_key_of_earlier_versions(tiny_model_path, tmp_path):
    hst = HiddenStatesTransformer(tiny_model_path, device="cpu", cache=tmp_path)
    hst.fit(TEXTS)
    assert "precision" not in hst._store().settings
    hst.set_params(precision="int8")
    assert '"precision": "int8"' in hst._store().settings


@pytest.mark.parametrize("value", ["float16", "fp32", "INT8", None, 8])
def test_bad_precision_names_the_parameter(tiny_model_path, value):
    hst = HiddenStatesTransformer(tiny_model_path, device="cpu", precision=value)
    with pytest.raises(ValueError, match="'precision' parameter"):
        hst.fit(TEXTS)


def test_int8_on_an_accelerator_is_refused_clearly():
    from skloes.models._precision import check_precision

    with pytest.raises(ValueError, match=r"`precision='int8'` runs on the CPU only"):
        check_precision("int8", torch.device("cuda"), owner="HiddenStatesTransformer")
    with pytest.raises(ValueError, match="`precision` must be one of"):
        check_precision("int4", torch.device("cpu"))
    check_precision("bfloat16", torch.device("cuda"))  # the whole model in bf16


def test_load_dtype_is_bfloat16_for_bfloat16_only():
    from skloes.models._precision import load_dtype

    assert load_dtype("bfloat16") is torch.bfloat16
    assert load_dtype("int8") is None
    assert load_dtype("float32") is None


def test_get_params_clone_and_pickle_keep_precision(tiny_model_path):
    hst = HiddenStatesTransformer(tiny_model_path, device="cpu", precision="int8")
    assert hst.get_params()["precision"] == "int8"
    assert clone(hst).precision == "int8"
    out = hst.fit_transform(TEXTS)
    back = pickle.loads(pickle.dumps(hst))
    assert back.precision == "int8"
    np.testing.assert_array_equal(back.transform(TEXTS), out)


def test_probe_passes_precision_through_extractor_params(tiny_model_path):
    from skloes.probe import LayerProbeClassifier

    probe = LayerProbeClassifier(
        tiny_model_path, device="cpu", extractor_params={"precision": "bfloat16"}
    )
    assert probe._extractor().precision == "bfloat16"


def _close_to_float32(path, texts, bounds, **params):
    base = HiddenStatesTransformer(path, device="cpu", max_length=64, **params)
    reference = base.fit_transform(texts)
    for precision, bound in bounds.items():
        out = clone(base).set_params(precision=precision).fit_transform(texts)
        cosine = _cosine(reference, out)  # (n_layers, n_texts)
        assert cosine.mean(axis=1).min() > bound, (precision, cosine.mean(axis=1))


def test_minilm_reduced_precision_vectors_are_close(minilm_path, rotten_tomatoes_small):
    texts = list(rotten_tomatoes_small[0][:48])
    _close_to_float32(minilm_path, texts, {"bfloat16": 0.999, "int8": 0.99})


def test_smollm2_reduced_precision_vectors_are_close(
    smollm2_path, rotten_tomatoes_small
):
    texts = list(rotten_tomatoes_small[0][:24])
    _close_to_float32(
        smollm2_path, texts, {"bfloat16": 0.999, "int8": 0.99}, layers=[0, 10, 20, 30]
    )


def test_cli_probe_takes_precision():
    from skloes.cli._args import UserError, build_parser

    parser = build_parser()
    assert parser.parse_args(["probe"]).precision == "float32"
    assert parser.parse_args(["probe", "--precision", "int8"]).precision == "int8"
    with pytest.raises(UserError, match="--precision: invalid choice: 'int4'"):
        parser.parse_args(["probe", "--precision", "int4"])
