"""Names and frames through every step: every skloes transformer that outputs
columns names them and returns pandas or polars frames under ``set_output``,
alone and after the extractor's layer stack in a ``Pipeline``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from skloes import selection
from skloes.probe import SelectedLayerConcatenation

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

SELECTORS = [
    getattr(selection, name)
    for name in selection.__all__
    if hasattr(getattr(selection, name), "transform")
]


def _make(cls):
    """A seeded instance that fits a 4-layer stack of width 3."""
    if cls is selection.MetricTopKSelector:
        return cls(metric="isotropy", n_layers_to_select=2)
    if cls is selection.LOESSelectorCV:
        return cls(
            cv=3,
            max_layers_to_select=2,
            selector=selection.LOESSelector(random_state=0),
        )
    params = cls().get_params()
    kwargs = {"random_state": 0} if "random_state" in params else {}
    if "n_layers_to_select" in params:
        kwargs["n_layers_to_select"] = 2
    if "cv" in params:
        kwargs["cv"] = 3
    return cls(**kwargs)


@pytest.fixture(scope="module")
def planted():
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], 30)
    H = rng.normal(size=(4, 60, 3))
    H[2] += y[:, None]
    return H, y


def test_every_selector_with_transform_is_tested():
    assert len(SELECTORS) == 10


@pytest.mark.parametrize("cls", SELECTORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("container", ["pandas", "polars"])
def test_every_selector_names_its_columns_in_frames(planted, cls, container):
    H, y = planted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        selector = _make(cls).fit(H, y)
    names = selector.get_feature_names_out()
    expected = [f"layer{l}_{j}" for l in selector.selected_layers_ for j in range(3)]
    assert list(names) == expected
    out = clone(selector).set_output(transform=container).fit(H, y).transform(H)
    frame_type = pd.DataFrame if container == "pandas" else pl.DataFrame
    assert isinstance(out, frame_type) and list(out.columns) == expected
    np.testing.assert_allclose(np.asarray(out), selector.transform(H))
    fusion = SelectedLayerConcatenation(selector).fit().set_output(transform=container)
    fused = fusion.transform(H[selector.selected_layers_])
    assert isinstance(fused, frame_type) and list(fused.columns) == expected


@pytest.mark.parametrize("cls", SELECTORS, ids=lambda c: c.__name__)
def test_a_flat_frame_in_is_read_by_its_layer_names(planted, cls):
    """pandas and polars frames with layer{l}_{j} columns keep their layout."""
    H, y = planted
    flat = np.ascontiguousarray(H.transpose(1, 0, 2)).reshape(60, -1)
    columns = [f"layer{l}_{j}" for l in range(4) for j in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = _make(cls).fit(H, y)
        for frame in (pd.DataFrame(flat, columns=columns), pl.DataFrame(flat, columns)):
            fitted = _make(cls).fit(frame, y)
            assert fitted.n_layers_in_ == 4 and fitted.dim_in_ == 3
            np.testing.assert_array_equal(fitted.selected_layers_, ref.selected_layers_)


def test_a_pipeline_of_the_extractor_and_each_selector_names_and_frames(
    tiny_model_path,
):
    pytest.importorskip("transformers")
    from skloes.extraction import HiddenStatesTransformer

    texts = ["good film", "bad plot", "great fun", "dull movie", "a fine story"] * 6
    y = np.arange(len(texts)) % 2
    for cls in SELECTORS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            pipe = make_pipeline(HiddenStatesTransformer(tiny_model_path), _make(cls))
            pipe.fit(texts, y)
            names = pipe.get_feature_names_out()
            assert list(names) == list(pipe[-1].get_feature_names_out()), cls
            for container, kind in (("pandas", pd.DataFrame), ("polars", pl.DataFrame)):
                out = pipe.set_output(transform=container).transform(texts)
                assert isinstance(out, kind) and list(out.columns) == list(names)


@pytest.mark.parametrize("container", ["pandas", "polars"])
def test_heads_name_their_embedding_and_a_pipeline_ending_with_one_takes_frames(
    planted, container
):
    pytest.importorskip("torch")
    from skloes.heads import GeoRegClassifier, ScalarMixClassifier

    H, y = planted
    for head in (
        GeoRegClassifier(max_epochs=2, proj_dim=4, random_state=0),
        ScalarMixClassifier(max_epochs=2, random_state=0),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            head.fit(H, y)
        name = type(head).__name__.lower()
        width = head.transform(H).shape[1]
        assert list(head.get_feature_names_out()) == [
            f"{name}{i}" for i in range(width)
        ]
        out = clone(head).set_output(transform=container)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = out.fit(H, y).transform(H)
        assert list(out.columns) == list(head.get_feature_names_out())
    pipe = make_pipeline(selection.LOESSelector(n_layers_to_select=2), head)
    pipe.set_output(transform=container)  # it failed: the head had no set_output
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert pipe.fit(H, y).predict(H).shape == (60,)
