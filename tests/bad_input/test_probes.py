"""The probes (LayerProbeClassifier, LayerProbeRegressor) and the text-column
encoder (LayerTextEncoder): nested extractor_params that collide, heads
without probabilities, fit_stack, metadata routing.

Outcomes (``tests/_support/outcomes.py``): ``err`` (one line naming what is
wrong), ``warns`` (a warning, then a result), ``ok`` (a correct result).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err  # noqa: E402

from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    LayerProbeRegressor,
    load_probe,
)
from skloes.selection import LastKSelector  # noqa: E402

PROBE_TEXTS = ["a good movie", "a dull plot", "fun", "the story was great"] * 3
Y = [1, 0, 1, 0] * 3


def _first_layer():
    return LastKSelector(n_layers_to_select=1)


# --------------------------------------------------------------------------
# Nested parameters that collide: an error naming both, never an override
# --------------------------------------------------------------------------
COLLIDING = {
    "model": "/another/model",
    "pooling": "max",
    "max_length": 16,
    "batch_size": 4,
    "cache": "/tmp/elsewhere",
    "device": "cpu",
    "verbose": 1,
}
SET_BY_PROBE = {"layers": [1], "output": "flat"}
PROBES = {
    "classifier": (LayerProbeClassifier, Y),
    "regressor": (LayerProbeRegressor, np.arange(12.0)),
}


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("key", list(COLLIDING))
def test_extractor_params_that_are_the_probes_own_are_refused(
    tiny_model_path, probe, key
):
    cls, y = PROBES[probe]
    est = cls(tiny_model_path, device="cpu", extractor_params={key: COLLIDING[key]})
    err(
        rf"`extractor_params` sets '{key}', which is the estimator's own "
        rf"parameter `{key}`"
    ).check(lambda: est.fit(PROBE_TEXTS, y))


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("key", list(SET_BY_PROBE))
def test_extractor_params_that_the_probe_sets_are_refused(tiny_model_path, probe, key):
    cls, y = PROBES[probe]
    est = cls(tiny_model_path, device="cpu", extractor_params={key: SET_BY_PROBE[key]})
    err(rf"`extractor_params` sets '{key}', which the estimator sets itself").check(
        lambda: est.fit(PROBE_TEXTS, y)
    )


@pytest.mark.parametrize("key", ["pool", "max_lenght", "trust_remote"])
def test_unknown_extractor_params_are_refused(tiny_model_path, key):
    est = LayerProbeClassifier(tiny_model_path, device="cpu", extractor_params={key: 1})
    err(
        rf"`extractor_params` key '{key}' is not a HiddenStatesTransformer parameter"
    ).check(lambda: est.fit(PROBE_TEXTS, Y))


ALLOWED = {
    "precision": "bfloat16",
    "exclude_tokens": "special",
    "max_batch_tokens": 16,
    "dtype": "float16",
    "trust_remote_code": False,
}


@pytest.mark.parametrize("key", list(ALLOWED))
def test_extractor_params_of_the_extractor_are_taken(tiny_model_path, key):
    est = LayerProbeClassifier(
        tiny_model_path,
        device="cpu",
        selector=_first_layer(),
        extractor_params={key: ALLOWED[key]},
    ).fit(PROBE_TEXTS, Y)
    assert est.pipeline_[0].get_params()[key] == ALLOWED[key]


@pytest.mark.parametrize(
    "head", ["linear_svc", "ridge_classifier", "svc_no_probability"]
)
def test_a_head_without_probabilities_hides_predict_proba(saved_probes, head):
    probe, folder = saved_probes[head]
    assert not hasattr(probe, "predict_proba")
    assert not hasattr(load_probe(folder), "predict_proba")
