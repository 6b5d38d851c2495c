"""A fitted probe's notebook display: scikit-learn's estimator display, with
its selected layers and fusion added."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import config_context

from skloes.probe import LayerProbeClassifier, LayerProbeRegressor
from skloes.selection import MetricTopKSelector

TEXTS = ["a good movie", "dull and boring", "fun and warm", "bad plot"] * 6
Y = np.array([1, 0, 1, 0] * 6)


def _layers(n):
    return MetricTopKSelector(
        metric="layer_scores",
        n_layers_to_select=n,
        layer_scores=-np.arange(3),
        include_embedding=False,
    )


@pytest.mark.torch
@pytest.mark.parametrize("fusion", ["average", "auto"])
def test_a_fitted_probe_shows_its_layers_and_fusion(tiny_model_path, fusion):
    probe = LayerProbeClassifier(
        tiny_model_path, selector=_layers(2), fusion=fusion, random_state=0
    )
    before = probe._repr_mimebundle_()
    assert "skloes-probe-fit" not in before["text/html"]
    assert "layers [" not in before["text/plain"]
    probe.fit(TEXTS, Y)
    bundle = probe._repr_mimebundle_()
    assert bundle["text/html"].startswith(before["text/html"][:20])  # sklearn's
    assert "sk-top-container" in bundle["text/html"]
    html = bundle["text/html"]
    layers = ", ".join(str(v) for v in probe.selected_layers_)
    assert f"<span data-selected-layers>{layers}</span>" in html
    assert f"<span data-fusion>{probe.fusion_}</span>" in html
    if fusion == "auto":  # the leave-one-out scores it chose by
        for name, score in probe.fusion_scores_.items():
            assert f"{name} {score:.4f}" in html
    assert f"layers {probe.selected_layers_.tolist()}" in bundle["text/plain"]
    assert probe._repr_html_().endswith("</div>") and "data-fusion" in (
        probe._repr_html_()
    )
    with config_context(display="text"):
        assert list(probe._repr_mimebundle_()) == ["text/plain"]


@pytest.mark.torch
def test_a_fitted_regressor_shows_them_too(tiny_model_path):
    y = np.linspace(0, 1, len(TEXTS))
    probe = LayerProbeRegressor(
        tiny_model_path, selector=_layers(1), random_state=0
    ).fit(TEXTS, y)
    html = probe._repr_mimebundle_()["text/html"]
    assert f"<span data-fusion>{probe.fusion_}</span>" in html
