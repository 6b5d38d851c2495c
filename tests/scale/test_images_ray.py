"""extract_to_store of image paths on a local Ray cluster: the workers fit
their extractor on a blank image (the job's modality travels in its spec)
and write the store the local engine writes."""

from __future__ import annotations

import numpy as np
import pytest
from _support.rounding import assert_same_states

pytest.importorskip("torch")
pytest.importorskip("transformers")
skimage_data = pytest.importorskip("skimage.data")
Image = pytest.importorskip("PIL.Image")

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_ray_workers_write_the_local_store_of_image_paths(ray_cluster, tmp_path):
    from skloes.models._testing import make_tiny_vision_model
    from skloes.scale import extract_to_store

    model = make_tiny_vision_model("vit", tmp_path / "vit")
    images = skimage_data.lfw_subset()[np.r_[0:6, 100:106]]
    paths = []
    for i, image in enumerate(images):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(np.rint(image * 255).astype(np.uint8)).save(paths[-1])
    kw = {"model": model, "shard_size": 4, "device": "cpu", "verbose": 0}
    local = extract_to_store(paths, tmp_path / "local", **kw)
    on_ray = extract_to_store(paths, tmp_path / "ray", engine="ray", **kw)
    assert on_ray.manifest["extraction"]["modality"] == "image"
    assert_same_states(on_ray.read(), local.read())
