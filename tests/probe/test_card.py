"""The model card tells the truth about the folder and the answer it saved."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from _support.texts import REVIEWS

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("skops")

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.probe import LayerProbeClassifier, save_probe  # noqa: E402
from skloes.report import LayerReport  # noqa: E402
from skloes.selection import AllLayersSelector, LOESSelector  # noqa: E402

TEXTS = REVIEWS[:8] * 4
Y = np.array(["fresh", "rotten"] * 16)


@pytest.fixture(scope="module")
def model_in_home(tmp_path_factory):
    """A tiny model under a folder that stands for the user's home."""
    from skloes.models._testing import make_tiny_model

    home = tmp_path_factory.mktemp("home")
    return home, make_tiny_model(home / "models" / "tiny", num_hidden_layers=4)


def _card(folder):
    return (Path(folder) / "README.md").read_text(encoding="utf-8")


def test_a_weight_free_card_says_the_weights_are_elsewhere(model_in_home, tmp_path):
    _, model = model_in_home
    probe = LayerProbeClassifier(model, device="cpu", random_state=0).fit(TEXTS, Y)
    card = _card(save_probe(probe, tmp_path / "p"))
    assert "The weights are not in this folder" in card
    assert "exported graph" not in card


def test_an_exported_card_says_the_folder_holds_the_blocks_and_the_check(
    model_in_home, tmp_path
):
    pytest.importorskip("onnxruntime")
    _, model = model_in_home
    probe = LayerProbeClassifier(
        model, selector=LOESSelector(n_layers_to_select=2), device="cpu"
    ).fit(TEXTS, Y)
    folder = save_probe(probe, tmp_path / "p", export="onnx-int8", check_texts=TEXTS)
    card = _card(folder)
    deepest = int(probe.selected_layers_.max())
    assert "The weights are not in this folder" not in card
    assert f"weights through block {deepest}, in `graph-int8.onnx`" in card
    assert "int8 matrix products" in card and "without torch" in card
    assert "- exported graph: int8 (checked on 32 held-in texts" in card
    assert "the same prediction on" in card


def test_no_absolute_path_of_the_model_or_the_data_is_shared(model_in_home, tmp_path):
    home, model = model_in_home
    data = home / "data" / "reviews.csv"
    data.parent.mkdir(exist_ok=True)
    data.write_text("text,label\n")
    probe = LayerProbeClassifier(model, device="cpu", random_state=0).fit(TEXTS, Y)
    folder = save_probe(probe, home / "probes" / "p", data_name=str(data))
    card = _card(folder)
    assert str(home) not in card and os.sep + "tmp" not in card
    assert "`../../models/tiny` (relative to this folder)" in card
    assert "- source: `../../data/reviews.csv`" in card
    moved = shutil.copytree(folder, tmp_path / "copy")  # still true once shared
    assert _card(moved) == card


def test_the_stability_is_the_saved_answers_own(model_in_home, tmp_path):
    """A probe of all layers is not described by the LOES picks' stability."""
    _, model = model_in_home
    stack = HiddenStatesTransformer(model, device="cpu").fit_transform(TEXTS)
    report = LayerReport(n_layers_to_select=2, metrics=(), random_state=0).fit(stack, Y)
    loes_folds = report.summary()["fold_selections"]
    every = LayerProbeClassifier(model, selector=AllLayersSelector(), device="cpu")
    card = _card(save_probe(every.fit(TEXTS, Y), tmp_path / "all", report=report))
    assert "(all_layers): the same layers in every fold" in card
    assert "| all_layers | 0,1,2,3,4 |" in card and "| yes |" in card
    shown = " | ".join(",".join(map(str, sorted(f))) for f in loes_folds)
    assert len({tuple(sorted(f)) for f in loes_folds}) == 1 or shown not in card
    loes = LayerProbeClassifier(
        model, selector=LOESSelector(n_layers_to_select=2, random_state=0)
    )
    card = _card(save_probe(loes.fit(TEXTS, Y), tmp_path / "loes", report=report))
    assert "folds (loes)" in card


def test_layers_no_method_chose_are_not_given_a_stability(model_in_home, tmp_path):
    _, model = model_in_home
    stack = HiddenStatesTransformer(model, device="cpu").fit_transform(TEXTS)
    report = LayerReport(
        n_layers_to_select=2, metrics=(), baselines=("last_layer",), random_state=0
    ).fit(stack, Y)
    other = LayerProbeClassifier(model, selector=AllLayersSelector(), device="cpu")
    card = _card(save_probe(other.fit(TEXTS, Y), tmp_path / "p", report=report))
    assert "not measured for these layers" in card
    assert "| yes |" not in card
