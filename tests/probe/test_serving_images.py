"""Torch-free serving of image probes: Pillow and numpy preprocessing, ONNX graph.

No pretrained vision weights ship offline, so each family is a small model
built from its real transformers configuration with random weights
(:func:`skloes.models._testing.make_tiny_vision_model`); the images are real
(scikit-image's LFW faces and non-faces, scikit-learn's digits). The
torch-free preprocessing is compared with each family's own image processor
(transformers' Pillow backend), and an exported probe predicts in a process
where torch and transformers cannot be imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skimage_data = pytest.importorskip("skimage.data")
Image = pytest.importorskip("PIL.Image")

import transformers  # noqa: E402

from skloes.core._images import read_images, to_pixels  # noqa: E402
from skloes.core._pixels import check_spec, pixel_values, processor_spec  # noqa: E402
from skloes.models._testing import VISION_KINDS, make_tiny_vision_model  # noqa: E402

pytestmark = pytest.mark.torch

# A process that cannot import torch nor transformers (a meta-path hook
# raises), then loads each exported folder and predicts the saved images.
SERVE = """
import json, sys
import numpy as np
class _Forbid:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError("forbidden import: " + name)
        return None
sys.meta_path.insert(0, _Forbid())
from skloes.serving import load_exported
images = np.load(sys.argv[1])
out = {}
for folder in sys.argv[2:]:
    probe = load_exported(folder)
    labels, proba = probe.predict_with_proba(images)
    out[folder] = [labels.tolist(), proba.tolist(), type(probe).__name__]
loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")]
assert not loaded, loaded
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def real_images():
    """Real images in the forms users hold: LFW grey floats (25 x 25), a
    non-square RGB crop of them as uint8, and digits on their 0..16 scale."""
    faces = skimage_data.lfw_subset()
    rgb = np.rint(np.stack([faces[3], faces[104], faces[7]], axis=-1) * 255)
    digits = pytest.importorskip("sklearn.datasets").load_digits().images
    return [faces[0], faces[150], rgb[2:25, 5:17].astype(np.uint8), digits[0]]


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_torch_free_preprocessing_equals_the_family_s_image_processor(
    kind, real_images, tmp_path
):
    path = make_tiny_vision_model(kind, tmp_path / kind, image_size=12)
    processor = transformers.AutoImageProcessor.from_pretrained(path)
    spec = processor_spec(processor)
    assert check_spec(spec) is None
    theirs = processor(
        images=[to_pixels(a) for a in read_images(real_images)], return_tensors="np"
    )["pixel_values"]
    ours = pixel_values(real_images, spec)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (4, 3, 12, 12)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("size", [(40, 90), (90, 40), (8, 8)])
def test_shortest_edge_resize_and_crop_follow_the_processor_on_any_shape(size):
    processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 20}, crop_size={"height": 24, "width": 16}
    )
    faces = skimage_data.lfw_subset()
    picture = Image.fromarray(np.rint(faces[9] * 255).astype(np.uint8))
    image = np.asarray(picture.convert("RGB").resize(size[::-1]))
    theirs = processor(images=[image], return_tensors="np")["pixel_values"]
    ours = pixel_values([image], processor_spec(processor))
    np.testing.assert_array_equal(ours, theirs)  # a crop larger than the image pads


class _Settings:
    """An image processor as the spec reads it (its ``to_dict()``)."""

    def __init__(self, **settings):
        self.settings = {
            "image_processor_type": "MadeUpImageProcessor",
            "do_resize": True,
            "size": {"height": 8, "width": 8},
            "resample": 2,
            **settings,
        }

    def to_dict(self):
        return dict(self.settings)


@pytest.mark.parametrize(
    "settings, needle",
    [
        ({"do_pad": True}, "pads images"),
        ({"size": {"longest_edge": 8}}, "resizes by ['longest_edge']"),
        ({"size": {"shortest_edge": 8}}, "more than one size"),
        ({"do_resize": False}, "more than one size"),
        ({"resample": 9}, "filter 9"),
        ({"do_normalize": True, "image_mean": [0.5] * 2, "image_std": [1] * 2}, "2"),
    ],
)
def test_a_processor_the_spec_does_not_reproduce_is_refused(settings, needle):
    with pytest.raises(ValueError, match="MadeUpImageProcessor") as info:
        processor_spec(_Settings(**settings), owner="save_probe")
    assert needle in str(info.value) and "save without `export`" in str(info.value)


def test_check_spec_names_a_bad_field():
    good = processor_spec(_Settings(do_normalize=True, image_mean=0.5, image_std=0.5))
    assert check_spec(good) is None
    for field, value in [
        ("resize", {"height": -1, "width": 8}),
        ("resample", 7),
        ("std", [0.0]),
        ("channels", 9),
        ("ready_shape", [3, 8]),
    ]:
        problem = check_spec({**good, field: value})
        assert problem is not None and field in problem, (field, problem)
    assert check_spec({"resize": None}) is not None


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A probe on a small DINOv2 with registers (class-token pooling) and
    one on a CLIP checkpoint's vision tower (mean of the patches), each
    fitted on 60 LFW images."""
    from skloes.probe import LayerProbeClassifier

    images = skimage_data.lfw_subset()
    X = images[np.r_[0:30, 100:130]]
    y = np.array(["face"] * 30 + ["other"] * 30)
    probes = {}
    for kind in ("dinov2-registers", "clip"):
        path = make_tiny_vision_model(kind, tmp_path_factory.mktemp(kind))
        probe = LayerProbeClassifier(path, pooling="auto", device="cpu", random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # layer 0's class token is constant
            probe.fit(X, y)
        probes[kind] = probe
    return probes, X, images[np.r_[30:45, 130:145]]


@pytest.mark.parametrize("export", ["onnx", "onnx-int8"])
def test_an_exported_image_probe_predicts_where_torch_cannot_be_imported(
    fitted, export, tmp_path
):
    from skloes.probe import save_probe
    from skloes.serving import load_exported

    probes, X, new = fitted
    folders = {}
    for kind, probe in probes.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # int8 on random weights may warn
            folders[kind] = save_probe(
                probe, tmp_path / kind, export=export, check_texts=list(X)
            )
        manifest = json.loads((folders[kind] / "manifest.json").read_text())
        entry = manifest["export"]
        assert entry["modality"] == "image" and "tokenizer" not in entry
        assert entry["check"]["max_abs_pixel_diff"] == 0.0
        assert not (folders[kind] / "tokenizer.json").exists()
        assert "image processor's settings" in (folders[kind] / "README.md").read_text()
    np.save(tmp_path / "new.npy", new)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            SERVE,
            str(tmp_path / "new.npy"),
            *map(str, folders.values()),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    served = json.loads(out.stdout)
    for kind, probe in probes.items():
        labels, proba, name = served[str(folders[kind])]
        assert name == "ExportedImageProbe"
        here = load_exported(folders[kind])
        np.testing.assert_array_equal(labels, here.predict(new))
        # the same images as PNG files give the same answers
        files = []
        for i, image in enumerate(new[:4]):
            files.append(tmp_path / f"{kind}{i}.png")
            Image.fromarray(np.rint(image * 255).astype(np.uint8)).save(files[-1])
        np.testing.assert_allclose(here.predict_proba(files), proba[:4], atol=1e-6)
        if export == "onnx":  # the float graph gives the torch probe's answers
            np.testing.assert_array_equal(labels, probe.predict(new))
            np.testing.assert_allclose(proba, probe.predict_proba(new), atol=1e-5)
        else:  # int8: the agreement the save measured is stored with it
            check = here.export_check_
            assert 0 <= check["same_prediction"] <= 1 and check["n_texts"] == 60
    with pytest.raises(TypeError, match="no tokenizer"):
        here.tokenize(new)
