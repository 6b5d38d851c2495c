"""``skloes probe`` and ``skloes predict`` on image files.

The model is a small DINOv2 with registers built from its real configuration
(random weights, saved with ``save_pretrained``); the images are real:
scikit-image's LFW faces and non-faces, written as PNG files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from skloes.cli import main

pytest.importorskip("transformers")
skimage_data = pytest.importorskip("skimage.data")
Image = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _in_a_fresh_folder(tmp_path_factory, monkeypatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="module")
def dinov2(tmp_path_factory):
    from skloes.models._testing import make_tiny_vision_model

    return make_tiny_vision_model("dinov2-registers", tmp_path_factory.mktemp("dinov2"))


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    """``face/`` and ``other/``: 16 LFW images each, as 8-bit grey PNG files."""
    root = tmp_path_factory.mktemp("images")
    images = skimage_data.lfw_subset()
    for label, start in (("face", 0), ("other", 100)):
        (root / label).mkdir()
        for i in range(start, start + 16):
            pixels = np.rint(images[i] * 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / label / f"{i:03d}.png")
    (root / "face" / "notes.txt").write_text("not an image")
    return root


def _probe(model, data, out, *options):
    where = ["--data", str(data), "--out", str(out), "--device", "cpu"]
    return ["probe", "--model", model, *where, "--n-layers-to-select", "2", *options]


def test_probe_on_a_folder_of_images_writes_the_report_and_a_probe_that_predicts(
    dinov2, image_folder, tmp_path, capsys
):
    from skloes.probe import load_probe

    saved = tmp_path / "saved"
    options = ["--save", str(saved), "--export", "onnx"]
    status = main(_probe(dinov2, image_folder, tmp_path / "out", *options))
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "32 images, 2 classes" in captured.out
    assert "pooling auto (first)" in captured.out  # the class token of a DINOv2
    assert "1 file(s)" in captured.err and "not images" in captured.err
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"report.html", "layers.csv", "selection.json"} <= written
    page = (tmp_path / "out" / "report.html").read_text()
    assert "32 images" in page
    selection = json.loads((tmp_path / "out" / "selection.json").read_text())
    probe = load_probe(saved, runtime="torch")
    assert probe.selected_layers_.tolist() == selection["recommendation"]["layers"]
    assert type(load_probe(saved)).__name__ == "ExportedImageProbe"
    assert probe.pipeline_.steps[0][1].pooling_ == "first"

    # predict (the exported graph, no torch): a table of image file names,
    # relative to the table's folder
    files = sorted(image_folder.glob("*/*.png"))[::5]
    table = image_folder / "new.csv"
    relative = [str(f.relative_to(image_folder)) for f in files]
    table.write_text("text\n" + "\n".join(relative) + "\n")
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(saved), "--data", str(table), "--out", str(out)]) == 0
    import pandas as pd

    frame = pd.read_csv(out)
    arrays = [np.asarray(Image.open(f)) for f in files]
    assert frame["prediction"].tolist() == probe.predict(arrays).tolist()
    np.testing.assert_allclose(
        frame[["proba_face", "proba_other"]].to_numpy(),
        probe.predict_proba(arrays),
        atol=1e-6,
    )


def test_probe_reads_a_table_of_image_paths_like_the_folder(
    dinov2, image_folder, tmp_path, capsys
):
    files = sorted(image_folder.glob("*/*.png"))
    table = tmp_path / "images.csv"
    rows = [f"{f},{f.parent.name}" for f in files]
    table.write_text("path,label\n" + "\n".join(rows) + "\n")
    by_table = _probe(dinov2, table, tmp_path / "a", "--text-column", "path")
    assert main(by_table) == 0, capsys.readouterr().err
    assert main(_probe(dinov2, image_folder, tmp_path / "b")) == 0
    capsys.readouterr()
    a = (tmp_path / "a" / "layers.csv").read_text()
    assert a == (tmp_path / "b" / "layers.csv").read_text()


def _one_line_error(capsys, status, needle):
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("skloes probe: error:")]
    assert status == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert needle in errors[0], errors[0]


def test_image_data_user_errors_are_one_line(
    dinov2, image_folder, tmp_path, capsys, tiny_model_path
):
    loose = tmp_path / "loose"
    (loose / "a").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(loose / "top.png")
    status = main(_probe(dinov2, loose, tmp_path / "o1"))
    _one_line_error(capsys, status, "one subfolder per class")
    empty = tmp_path / "empty"
    (empty / "a").mkdir(parents=True)
    _one_line_error(
        capsys, main(_probe(dinov2, empty, tmp_path / "o2")), "no image file"
    )
    status = main(_probe(dinov2, image_folder, tmp_path / "o3", "--task", "regression"))
    _one_line_error(capsys, status, "--task regression")
    table = tmp_path / "gone.csv"
    table.write_text("text,label\nface/000.png,a\nnowhere.png,b\n")
    _one_line_error(
        capsys, main(_probe(dinov2, table, tmp_path / "o4")), "are not files"
    )
    status = main(_probe(tiny_model_path, image_folder, tmp_path / "o5"))
    _one_line_error(capsys, status, "holds images")
