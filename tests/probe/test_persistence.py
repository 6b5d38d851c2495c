"""Saving a probe without the model's weights and loading it without pickle
(skloes.probe._persistence). The folder's format is tested in
tests/test_probe_folder.py, the card in test_card.py, the exported graph in
test_serving.py, and what a user can do wrong in tests/bad_input/test_saving.py
and test_loading.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from _support.texts import NEW, TEXTS, Y

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.probes import assert_no_weights, copy_model, first_layers  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skloes.extraction import HiddenStatesTransformer as HST  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    load_probe,
    prune_layers,
    save_probe,
)

# --------------------------------------------------------------- save / load


def test_saved_probe_loads_in_a_fresh_process_with_identical_predictions(
    deep_tiny, tmp_path
):
    model = copy_model(deep_tiny, tmp_path / "model")
    probe = LayerProbeClassifier(model, random_state=0).fit(TEXTS, Y)
    folder = save_probe(probe, tmp_path / "saved")
    names = sorted(os.listdir(folder))
    assert names == ["README.md", "estimator.skops", "manifest.json"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["model"] == model
    assert manifest["model_fingerprint"] == probe.pipeline_[0].model_fingerprint_
    assert_no_weights(folder / "estimator.skops", model)
    code = (
        "import sys, json, numpy as np; from skloes.probe import load_probe;"
        "p = load_probe(sys.argv[1]);"
        "print(json.dumps(p.predict_proba(json.loads(sys.argv[2])).tolist()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), json.dumps(NEW)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    np.testing.assert_array_equal(
        np.array(json.loads(out.stdout)), probe.predict_proba(NEW)
    )


def test_load_refuses_changed_or_missing_weights(deep_tiny, tmp_path):
    model = copy_model(deep_tiny, tmp_path / "model")
    probe = LayerProbeClassifier(model, selector=first_layers(2)).fit(TEXTS, Y)
    folder = save_probe(probe, tmp_path / "saved")
    weights = os.path.join(model, "model.safetensors")
    data = bytearray(open(weights, "rb").read())
    data[-8:] = bytes(8)  # same size, other values
    stat = os.stat(weights)
    open(weights, "wb").write(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # time restored
    with pytest.raises(ValueError, match="changed since this extractor was fitted"):
        load_probe(folder)
    shutil.rmtree(model)
    with pytest.raises(ValueError, match="is gone"):
        load_probe(folder)


def test_a_pruned_pipeline_saves_and_loads(deep_tiny, tmp_path):
    full = make_pipeline(
        HST(deep_tiny), first_layers(2), StandardScaler(), LogisticRegression()
    ).fit(TEXTS, Y)
    pruned = prune_layers(full)
    back = load_probe(save_probe(pruned, tmp_path / "p"))
    np.testing.assert_array_equal(back.predict_proba(NEW), pruned.predict_proba(NEW))


def test_a_pruned_pipeline_of_before_0_3_still_loads(deep_tiny, tmp_path):
    """Pruned pipelines saved before 0.3 name the concatenation step
    ``skloes.probe._fusion.SelectedLayerFusion``: the deprecated name warns
    when built, and a folder or pickle holding it loads and predicts alike."""
    import pickle

    from skloes.probe import SelectedLayerConcatenation, SelectedLayerFusion

    full = make_pipeline(
        HST(deep_tiny), first_layers(2), StandardScaler(), LogisticRegression()
    ).fit(TEXTS, Y)
    pruned = prune_layers(full)
    with pytest.warns(FutureWarning, match="renamed `SelectedLayerConcatenation`"):
        old_step = SelectedLayerFusion(full[1]).fit()
    assert isinstance(old_step, SelectedLayerConcatenation)
    old = prune_layers(full)
    old.steps[1] = (old.steps[1][0], old_step)
    expected = pruned.predict_proba(NEW)
    np.testing.assert_array_equal(old.predict_proba(NEW), expected)
    blob = pickle.dumps(old)
    assert b"skloes.probe._fusion" in blob and b"SelectedLayerFusion" in blob
    np.testing.assert_array_equal(pickle.loads(blob).predict_proba(NEW), expected)
    folder = save_probe(old, tmp_path / "old")
    back = load_probe(folder)  # no `trusted`: the old name stays a skloes type
    assert type(back[1]) is SelectedLayerFusion
    np.testing.assert_array_equal(back.predict_proba(NEW), expected)


class _Custom(LogisticRegression):
    """A class skops does not know: loading it must be asked for."""


def test_load_refuses_untrusted_types_unless_trusted(deep_tiny, tmp_path):
    pipe = prune_layers(
        make_pipeline(HST(deep_tiny), first_layers(1), _Custom()).fit(TEXTS, Y)
    )
    folder = save_probe(pipe, tmp_path / "p")
    with pytest.raises(ValueError, match="not trusted.*_Custom"):
        load_probe(folder)
    name = f"{_Custom.__module__}._Custom"
    assert load_probe(folder, trusted=[name]).predict(NEW).shape == (4,)


def test_save_writes_a_model_card_from_the_probe_and_its_report(deep_tiny, tmp_path):
    from skloes.report import LayerReport

    labels = np.where(Y == 1, "warm", "cold")
    probe = LayerProbeClassifier(deep_tiny, random_state=0).fit(TEXTS, labels)
    card = (save_probe(probe, tmp_path / "bare") / "README.md").read_text()
    extractor = probe.pipeline_[0]
    layers = ", ".join(map(str, probe.selected_layers_))
    assert extractor.model_fingerprint_ in card and f"- selected: {layers} " in card
    assert "- samples: 36" in card and "cold (18), warm (18)" in card
    assert "Not measured here" in card and "- forward pass: float32" in card
    stack = HST(deep_tiny, max_length=128).fit_transform(TEXTS)
    report = LayerReport(n_layers_to_select=4, random_state=0).fit(stack, labels)
    card = (
        save_probe(probe, tmp_path / "full", report=report, data_name="toy.csv")
        / "README.md"
    ).read_text()
    by = {e["method"]: e for e in report.summary()["methods"]}
    for method in ("loes", "last_layer", "all_layers"):
        assert f"| {method} | " in card and f"{by[method]['score']:.4f}" in card
    assert f"stability across {report.n_splits_} folds" in card
    assert "- source: `toy.csv`" in card and "Not measured" not in card
    assert (
        load_probe(tmp_path / "full").predict(NEW).tolist()
        == probe.predict(NEW).tolist()
    )


def test_save_refuses_to_overwrite_and_bad_inputs(deep_tiny, tmp_path):
    probe = LayerProbeClassifier(deep_tiny, selector=first_layers(1)).fit(TEXTS, Y)
    save_probe(probe, tmp_path / "p")
    with pytest.raises(ValueError, match="overwrite=True"):
        save_probe(probe, tmp_path / "p")
    save_probe(probe, tmp_path / "p", overwrite=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds no saved probe"):
        save_probe(probe, tmp_path / "other", overwrite=True)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    with pytest.raises(TypeError, match="LayerProbeClassifier"):
        save_probe(LogisticRegression(), tmp_path / "q")
    with pytest.raises(ValueError, match="not a saved probe"):
        load_probe(tmp_path / "other")


def test_an_extractor_with_the_auto_pooling_exports_the_pooling_it_resolved(
    deep_tiny, tmp_path
):
    """``pooling="auto"`` (the extractor's default since 0.3) is resolved at
    fit; the exported graph and its manifest name the resolved pooling, and
    the extractor itself keeps ``"auto"``."""
    import skloes.probe_folder as probe_folder

    pruned = prune_layers(
        make_pipeline(
            HST(deep_tiny, device="cpu"), first_layers(2), LogisticRegression()
        ).fit(TEXTS, Y)
    )
    assert pruned.steps[0][1].pooling == "auto"
    assert pruned.steps[0][1].pooling_ == "mean"
    folder = save_probe(pruned, tmp_path / "p", export="onnx", check_texts=TEXTS)
    manifest = json.loads((folder / probe_folder.MANIFEST).read_text())
    assert manifest["export"]["pooling"] == "mean"
    assert pruned.steps[0][1].pooling == "auto"
    np.testing.assert_allclose(
        load_probe(folder).predict_proba(NEW), pruned.predict_proba(NEW), atol=1e-6
    )
