"""Images at scale and in the column encoder: a table of image file paths.

The model is a small CLIP checkpoint built from its real configuration
(random weights; both towers, so the job must pick the vision tower from the
paths); the images are real LFW faces and non-faces written as PNG files.
"""

from __future__ import annotations

import numpy as np
import pytest
from _support.rounding import assert_same_states

pytest.importorskip("torch")
pytest.importorskip("transformers")
skimage_data = pytest.importorskip("skimage.data")
Image = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    from skloes.models._testing import make_tiny_vision_model

    return make_tiny_vision_model("clip", tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="module")
def image_table(tmp_path_factory):
    """24 LFW images as PNG files, and a frame of their paths and labels."""
    import pandas as pd

    root = tmp_path_factory.mktemp("images")
    images = skimage_data.lfw_subset()
    index = np.r_[0:12, 100:112]
    paths = []
    for i in index:
        path = root / f"{i:03d}.png"
        Image.fromarray(np.rint(images[i] * 255).astype(np.uint8)).save(path)
        paths.append(str(path))
    labels = ["face" if i < 100 else "other" for i in index]
    frame = pd.DataFrame(
        {"path": paths, "label": labels, "id": [f"im{i}" for i in index]}
    )
    return frame, images[index]


def test_a_store_of_image_paths_holds_the_vision_tower_s_layers(
    clip, image_table, tmp_path
):
    from skloes import HiddenStatesTransformer
    from skloes.scale import extract_to_store

    frame, arrays = image_table
    store = extract_to_store(
        frame,
        tmp_path / "store",
        model=clip,
        text_column="path",
        id_column="id",
        columns=["label"],
        shard_size=10,
        device="cpu",
        verbose=0,
    )
    hst = HiddenStatesTransformer(clip, pooling="mean", device="cpu")
    expected = hst.fit_transform(list(arrays))
    assert hst.modality_ == "image"
    assert store.read().shape == expected.shape
    assert_same_states(store.read(), expected)
    assert list(store.column("id")) == frame.id.tolist()
    assert store.manifest["extraction"]["modality"] == "image"


def test_predictions_of_image_paths_equal_the_probe(clip, image_table, tmp_path):
    import pandas as pd

    from skloes.probe import LayerProbeClassifier, save_probe
    from skloes.scale import predict_to_parquet

    frame, arrays = image_table
    probe = LayerProbeClassifier(clip, pooling="auto", device="cpu", random_state=0)
    probe.fit(list(frame.path), frame.label)
    folder = save_probe(probe, tmp_path / "probe")
    frame.to_csv(tmp_path / "new.csv", index=False)
    out = predict_to_parquet(
        folder,
        tmp_path / "new.csv",
        tmp_path / "preds.parquet",
        text_column="path",
        id_column="id",
        shard_size=10,
        verbose=0,
    )
    got = pd.read_parquet(out)
    assert got["id"].tolist() == frame.id.tolist()
    assert got["prediction"].tolist() == probe.predict(list(arrays)).tolist()
    np.testing.assert_allclose(
        got[["proba_face", "proba_other"]].to_numpy(),
        probe.predict_proba(list(arrays)),
        atol=1e-6,
    )


def test_the_column_encoder_takes_an_image_column(clip, image_table):
    import pandas as pd

    from skloes.probe import LayerTextEncoder
    from skloes.selection import LOESSelector

    frame, arrays = image_table
    encoder = LayerTextEncoder(
        clip, selector=LOESSelector(n_layers_to_select=2), device="cpu"
    )
    by_path = encoder.fit_transform(frame["path"], frame.label)
    assert encoder.get_feature_names_out()[0].startswith("path__layer")
    assert by_path.shape == (24, 2 * encoder.dim_)
    # the same pictures as arrays, PIL images and a 3-D batch: the same features
    pil = pd.Series([Image.open(p) for p in frame.path], name="path")
    batch = np.stack([np.rint(a * 255).astype(np.uint8) for a in arrays])
    for column in (pil, batch, list(arrays)):
        np.testing.assert_allclose(encoder.transform(column), by_path, atol=1e-5)
    with pytest.raises(TypeError, match="must hold strings"):
        encoder.transform(pd.Series([1.5] * 24, name="path"))
