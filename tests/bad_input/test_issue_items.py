"""Issue 11's defects, one test each: nothing silently wrong, late or unclear.

The cache items live in ``test_cache.py`` and the command-line items in
``test_cli.py``; the table-driven matrix is ``test_bad_input.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from skloes import (  # noqa: E402
    GeoRegLoss,
    HiddenStatesTransformer,
    LOESSelector,
    LOESSelectorCV,
)
from skloes.report import layer_report  # noqa: E402

TEXTS = [
    "a good movie",
    "a dull plot",
    "fun",
    "the story was great",
    "not fun",
    "an awful film",
]
LABELS = [1, 0, 1, 1, 0, 0]


def _hst(path, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(path, **params)


# ------------------------------------------------------- 1. 2-D text input
def test_two_column_frame_is_an_error_naming_X(tiny_model_path):
    pd = pytest.importorskip("pandas")
    pipe = make_pipeline(_hst(tiny_model_path, output="flat"), LogisticRegression())
    pipe.fit(TEXTS, LABELS)
    frame = pd.DataFrame({"text": TEXTS, "id": range(6)})
    with pytest.raises(ValueError, match=r"`X`.*2 columns.*'text', 'id'"):
        pipe.predict(frame)
    with pytest.raises(ValueError, match="`X`.*2 columns"):
        _hst(tiny_model_path).fit(np.array([TEXTS, TEXTS], dtype=object).T)


def test_one_text_column_is_taken(tiny_model_path):
    pd = pytest.importorskip("pandas")
    hst = _hst(tiny_model_path).fit(TEXTS)
    expected = hst.transform(TEXTS)
    np.testing.assert_array_equal(hst.transform(pd.DataFrame({"t": TEXTS})), expected)
    column = np.array(TEXTS, dtype=object)[:, None]
    np.testing.assert_array_equal(hst.transform(column), expected)


# ------------------------------------------------- 10. a generator as X
def test_generator_is_materialised_once_by_fit_transform(tiny_model_path):
    expected = _hst(tiny_model_path).fit_transform(TEXTS)
    out = _hst(tiny_model_path).fit_transform(t for t in TEXTS)
    np.testing.assert_array_equal(out, expected)
    hst = _hst(tiny_model_path).fit(iter(TEXTS))
    np.testing.assert_array_equal(hst.transform(iter(TEXTS)), expected)


# ---------------------------------------- 10. a lone surrogate in a text
def test_lone_surrogate_is_an_error_naming_the_item(tiny_model_path):
    with pytest.raises(ValueError, match=r"`X`.*item 1.*surrogate"):
        _hst(tiny_model_path).fit_transform(["fine", "bad \ud800 text"])


# ------------------------------------------- 7. device="cuda" without GPU
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpu_fails_at_fit(tiny_model_path):
    with pytest.raises(ValueError, match="`device`.*'cuda'.*not available"):
        _hst(tiny_model_path, device="cuda").fit(TEXTS)
    with pytest.raises(ValueError, match="`device`.*'cuda:1'"):
        _hst(tiny_model_path, device="cuda:1").fit(TEXTS)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpu_fails_at_fit_for_heads():
    from skloes import GeoRegClassifier
    from skloes.heads import ScalarMixClassifier

    stack = np.random.RandomState(0).randn(3, 12, 4)
    y = np.arange(12) % 2
    for est in (
        GeoRegClassifier(device="cuda", max_epochs=1),
        ScalarMixClassifier(device="cuda", max_epochs=1),
    ):
        with pytest.raises(ValueError, match="`device`"):
            est.fit(stack, y)


# --------------------------------------------- 9. trust_remote_code
def _remote_model(src, dst, *, broken=False):
    shutil.copytree(src, dst)
    (dst / "configuration_x.py").write_text(
        "from transformers import BertConfig\n\n\nclass XConfig(BertConfig):\n"
        "    model_type = 'xbert'\n"
    )
    body = (
        "raise RuntimeError('remote code ran')\n"
        if broken
        else "from transformers import BertModel\n\nfrom .configuration_x import "
        "XConfig\n\n\nclass XModel(BertModel):\n    config_class = XConfig\n"
    )
    (dst / "modeling_x.py").write_text(body)
    config = json.loads((dst / "config.json").read_text())
    config["model_type"] = "xbert"
    config["auto_map"] = {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModel": "modeling_x.XModel",
    }
    (dst / "config.json").write_text(json.dumps(config))
    return str(dst)


def test_remote_code_is_refused_before_it_runs(tiny_model_path, tmp_path):
    path = _remote_model(tiny_model_path, tmp_path / "m", broken=True)
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        _hst(path).fit(TEXTS)


def test_trusted_remote_code_works_and_warns(tiny_model_path, tmp_path):
    path = _remote_model(tiny_model_path, tmp_path / "m")
    hst = _hst(path, trust_remote_code=True)
    with pytest.warns(UserWarning, match="runs Python code shipped with the model"):
        out = hst.fit_transform(TEXTS)
    expected = _hst(tiny_model_path).fit_transform(TEXTS)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


# ------------------------------------- 10. broken config and weights
@pytest.mark.parametrize(
    "text", ['{"model_type": "bert", "hid', "[1, 2]", "", "\udcff"]
)
def test_invalid_config_json_is_one_line(tiny_model_path, tmp_path, text):
    path = tmp_path / "m"
    shutil.copytree(tiny_model_path, path)
    (path / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match=r"`model`.*config\.json") as info:
        _hst(str(path)).fit(TEXTS)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("cut", [0, 5, 100, -10])
def test_truncated_safetensors_is_one_line(tiny_model_path, tmp_path, cut):
    path = tmp_path / "m"
    shutil.copytree(tiny_model_path, path)
    weights = path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:cut] if cut >= 0 else data[: len(data) + cut])
    with pytest.raises(ValueError, match=r"`model`.*model\.safetensors.*truncated"):
        _hst(str(path)).fit_transform(TEXTS)


# -------------------------------------------------- 10. GeoRegLoss on NaN
def test_georeg_loss_on_nan_names_z():
    z = torch.randn(12, 6)
    z[3, 2] = float("nan")
    y = torch.arange(12) % 3
    with pytest.raises(ValueError, match="GeoRegLoss.*`z`.*NaN"):
        GeoRegLoss()(z, y)


# ------------------------------ 10. LOESSelectorCV, classes smaller than cv
def test_loes_cv_names_cv_when_a_class_is_smaller():
    rng = np.random.RandomState(0)
    stack = rng.randn(4, 30, 5)
    y = np.array([0] * 27 + [1] * 3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        LOESSelectorCV(
            selector=LOESSelector(random_state=0), cv=5, max_layers_to_select=2
        ).fit(stack, y)
    messages = [str(w.message) for w in record]
    ours = [m for m in messages if "`cv`=5" in m]
    assert len(ours) == 1
    assert re.search(r"LOESSelectorCV: class 1 has 3 samples", ours[0])
    assert not any("least populated class" in m for m in messages)  # the splitter's
    with pytest.raises(ValueError, match=r"LOESSelectorCV: `cv`=31 folds.*got 30"):
        LOESSelectorCV(cv=31).fit(stack, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        LOESSelectorCV(
            selector=LOESSelector(random_state=0), cv=3, max_layers_to_select=2
        ).fit(stack, y)


# --------------------------------- 10. layer_report and one constant layer
def test_layer_report_names_a_constant_layer():
    rng = np.random.RandomState(0)
    stack = rng.randn(4, 40, 5)
    stack[2] = 1.0
    y = np.arange(40) % 2
    with pytest.warns(UserWarning, match=r"layer_report|LayerReport.*layers? \[?2"):
        report = layer_report(stack, y, n_layers_to_select=2, random_state=0)
    assert np.isnan(report.metrics_["intrinsic_dim"][2])
    assert np.isfinite(np.delete(report.metrics_["intrinsic_dim"], 2)).all()
    assert 2 not in report.summary()["selected_layers"]


def test_no_warning_on_a_clean_report():
    rng = np.random.RandomState(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        layer_report(
            rng.randn(3, 30, 4), np.arange(30) % 2, n_layers_to_select=2, random_state=0
        )
