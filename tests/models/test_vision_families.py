"""The vision families and Mamba in the family table, checked on real images.

No pretrained vision weights ship offline, so each family is built from its
own transformers config at a small size with random weights
(:func:`skloes.models._testing.make_tiny_vision_model`): its prefix tokens,
its last hidden state and its processor are the family's. The images are
real and ship offline: scikit-image's LFW faces and scikit-learn's digits.
Each pooling rule is compared with a hand computation from
``output_hidden_states`` of the model loaded straight from transformers.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
skimage_data = pytest.importorskip("skimage.data")
Image = pytest.importorskip("PIL.Image")

import transformers  # noqa: E402

from skloes import HiddenStatesTransformer as HST  # noqa: E402
from skloes.models._families import model_family  # noqa: E402
from skloes.models._testing import (  # noqa: E402
    VISION_KINDS,
    make_tiny_mamba,
    make_tiny_vision_model,
)

pytestmark = pytest.mark.torch

# kind -> (family name, pooling="auto", prefix tokens)
EXPECTED = {
    "vit": ("vit", "first", 1),
    "deit": ("deit", "first", 2),
    "dinov2": ("dinov2", "first", 1),
    "dinov2-registers": ("dinov2", "first", 5),
    "vit-mae": ("vit-mae", "mean", 1),
    "beit": ("beit", "mean", 1),
    "clip": ("clip-vision", "mean", 1),
    "siglip": ("siglip-vision", "mean", 0),
}
TOWER = {"clip": "CLIPVisionModel", "siglip": "SiglipVisionModel"}


@pytest.fixture(scope="module")
def vision(tmp_path_factory):
    """kind -> the folder of a small random model of that family."""
    return {
        kind: make_tiny_vision_model(kind, tmp_path_factory.mktemp(kind))
        for kind in VISION_KINDS
    }


@pytest.fixture(scope="module")
def faces():
    """Eight LFW images, grey float on 0..1, 25 x 25 (four faces, four not)."""
    images = skimage_data.lfw_subset()
    return np.concatenate([images[:4], images[100:104]])


def _grey_to_rgb(image):
    """What the extractor gives the processor: uint8, grey on three channels."""
    pixels = np.rint(np.asarray(image, dtype=np.float64) * 255).astype(np.uint8)
    return np.repeat(pixels[:, :, None], 3, axis=-1)


def _reference_states(path, kind, images):
    """``hidden_states`` of the model loaded by transformers itself."""
    name = TOWER.get(kind, "AutoModel")
    kwargs = {"mask_ratio": 0.0} if kind == "vit-mae" else {}
    model = getattr(transformers, name).from_pretrained(path, **kwargs).eval()
    processor = transformers.AutoImageProcessor.from_pretrained(path)
    pixels = processor(images=[_grey_to_rgb(i) for i in images], return_tensors="pt")
    inputs = {"pixel_values": pixels["pixel_values"]}
    if kind == "vit-mae":  # the identity shuffle: every patch, in order
        n = model.embeddings.patch_embeddings.num_patches
        inputs["noise"] = torch.arange(n, dtype=torch.float32).expand(len(images), n)
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_family_table_counts_the_prefix_tokens_the_model_has(vision, kind):
    path = vision[kind]
    config = transformers.AutoConfig.from_pretrained(path)
    if kind in TOWER:
        config = config.vision_config
    family = model_family(config)
    name, pooling, n_prefix = EXPECTED[kind]
    assert (family.name, family.pooling, family.n_prefix(config)) == EXPECTED[kind]
    assert family.known and family.pool_exclude == "special"
    states = _reference_states(path, kind, skimage_data.lfw_subset()[:1])
    n_patches = (config.image_size // config.patch_size) ** 2
    assert states[0].shape[1] - n_patches == n_prefix  # counted from the model


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_family_last_state_is_the_last_block_output(vision, kind):
    """``last_state="block"``: hidden_states[-1] is the last block's output
    (the final norm of ViT, DeiT, DINOv2, SigLIP and MAE is not in it)."""
    path = vision[kind]
    name = TOWER.get(kind, "AutoModel")
    model = getattr(transformers, name).from_pretrained(path).eval()
    config = model.config
    assert model_family(config).last_state == "block"
    outputs = []
    from skloes.models._forward import find_blocks

    blocks = find_blocks(model)
    handle = blocks[-1].register_forward_hook(
        lambda m, a, out: outputs.append(out[0] if isinstance(out, tuple) else out)
    )
    kwargs = {"noise": torch.arange(16.0).expand(1, 16)} if kind == "vit-mae" else {}
    with torch.no_grad():
        states = model(
            pixel_values=torch.randn(1, 3, 16, 16), output_hidden_states=True, **kwargs
        ).hidden_states
    handle.remove()
    assert torch.equal(states[-1], outputs[-1])


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_default_pooling_is_the_family_s_against_a_hand_computation(
    vision, faces, kind
):
    path = vision[kind]
    _, pooling, n_prefix = EXPECTED[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checked family: no unknown warning
        hst = HST(path, device="cpu").fit(faces)
    stack = hst.transform(faces)
    assert hst.modality_ == "image"
    assert (hst.pooling_, hst.n_prefix_tokens_) == (pooling, n_prefix)
    assert hst.exclude_tokens_ == "special"
    states = _reference_states(path, kind, faces)
    assert stack.shape == (len(states), len(faces), 16)
    for layer, hidden in enumerate(states):
        expected = hidden[:, 0] if pooling == "first" else hidden[:, n_prefix:].mean(1)
        np.testing.assert_allclose(stack[layer], expected.numpy(), atol=1e-5)


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_mean_and_max_never_include_a_prefix_token(vision, faces, kind):
    path, n_prefix = vision[kind], EXPECTED[kind][2]
    states = _reference_states(path, kind, faces)
    for pooling, reduce in (("mean", torch.mean), ("max", torch.amax)):
        stack = HST(path, pooling=pooling, device="cpu").fit_transform(faces)
        for layer, hidden in enumerate(states):
            expected = reduce(hidden[:, n_prefix:], dim=1)
            np.testing.assert_allclose(stack[layer], expected.numpy(), atol=1e-5)


def test_exclude_tokens_means_for_images_what_it_means_for_texts(vision, faces):
    """ "special": every prefix token; "first": the class token only; None:
    nothing (the mean over every token, as before 0.3)."""
    path = vision["dinov2-registers"]  # a class token and 4 registers
    states = _reference_states(path, "dinov2-registers", faces)
    hand = {
        "special": lambda h: h[:, 5:].mean(1),
        "first": lambda h: h[:, 1:].mean(1),
        None: lambda h: h.mean(1),
    }
    got = {}
    for exclude, reduce in hand.items():
        hst = HST(path, pooling="mean", exclude_tokens=exclude, device="cpu")
        got[exclude] = hst.fit_transform(faces)
        for layer, hidden in enumerate(states):
            np.testing.assert_allclose(
                got[exclude][layer], reduce(hidden).numpy(), atol=1e-5
            )
    # the registers and the class token move the mean
    assert np.abs(got["special"] - got[None]).max() > 1e-3
    assert np.abs(got["special"] - got["first"]).max() > 1e-3


def test_class_token_pooling_refused_without_a_class_token(vision, faces):
    with pytest.raises(ValueError, match="siglip-vision models have none"):
        HST(vision["siglip"], pooling="cls", device="cpu").fit(faces)


@pytest.mark.parametrize("kind", VISION_KINDS)
def test_an_image_alone_and_in_a_batch_give_the_same_features(vision, faces, kind):
    hst = HST(vision[kind], batch_size=8, device="cpu").fit(faces)
    batch = hst.transform(faces)
    for i in (0, 5):
        alone = hst.transform(faces[i : i + 1])
        np.testing.assert_allclose(alone[:, 0], batch[:, i], atol=1e-5)


def test_mae_gives_the_same_features_on_every_call(vision, faces):
    path = vision["vit-mae"]
    hst = HST(path, device="cpu").fit(faces)
    first, second = hst.transform(faces), hst.transform(faces)
    np.testing.assert_array_equal(first, second)
    assert hst.model_.config.mask_ratio == 0.0
    # the model as transformers loads it masks 75 % of the patches at random
    model = transformers.ViTMAEModel.from_pretrained(path).eval()
    pixels = torch.from_numpy(np.random.RandomState(0).rand(2, 3, 16, 16)).float()
    with torch.no_grad():
        a, b = (model(pixel_values=pixels).last_hidden_state for _ in range(2))
    assert a.shape[1] == 1 + 4 and not torch.equal(a, b)


def _png_bytes(image):
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_every_input_form_gives_the_same_features(vision, faces, tmp_path):
    face = faces[0]  # float on 0..1, (25, 25)
    rgb = _grey_to_rgb(face)
    pil = Image.fromarray(rgb[:, :, 0], mode="L")
    file = tmp_path / "face.png"
    pil.save(file)
    forms = {
        "grey float 0..1": face,
        "grey uint8": rgb[:, :, 0],
        "(H, W, 1)": rgb[:, :, :1],
        "(H, W, 3)": rgb,
        "(H, W, 4) RGBA": np.dstack([rgb, np.full(face.shape, 255, np.uint8)]),
        "(C, H, W)": np.moveaxis(rgb, -1, 0),
        "(C, H, W) float 0..1": np.repeat(face[None], 3, axis=0),
        "tensor (C, H, W)": torch.from_numpy(np.moveaxis(rgb, -1, 0).copy()),
        "PIL grey": pil,
        "PIL RGB": pil.convert("RGB"),
        "path str": str(file),
        "pathlib path": file,
        "datasets dict (bytes)": {"bytes": _png_bytes(pil), "path": None},
        "datasets dict (path)": {"bytes": None, "path": str(file)},
    }
    hst = HST(vision["vit"], device="cpu").fit([face])
    reference = hst.transform([face])
    for name, form in forms.items():
        np.testing.assert_allclose(
            hst.transform([form]), reference, atol=1e-6, err_msg=name
        )
    # a binary image is black and white
    mask = faces[1] > 0.5
    np.testing.assert_allclose(
        hst.transform([mask]),
        hst.transform([mask.astype(np.uint8) * 255]),
        atol=1e-6,
    )
    # batches: a 3-D grey array, a 4-D (n, H, W, C) array and tensor
    batch = np.stack([rgb, rgb])
    for form in (faces[:2], batch, torch.from_numpy(np.moveaxis(batch, -1, 1))):
        out = hst.transform(form)
        np.testing.assert_allclose(out[:, 0], reference[:, 0], atol=1e-6)


def test_digits_on_their_0_to_16_scale_are_scaled(vision):
    from sklearn.datasets import load_digits

    digits = load_digits().images[:3]  # float, whole numbers 0..16
    hst = HST(vision["vit"], device="cpu").fit(digits)
    scaled = np.rint(digits * 255 / 16).astype(np.uint8)
    np.testing.assert_allclose(hst.transform(digits), hst.transform(scaled), atol=1e-6)
    np.testing.assert_allclose(
        hst.transform(digits.astype(np.int64)), hst.transform(scaled), atol=1e-6
    )
    # unscaled (as before 0.3), a digit is nearly black: other features
    assert np.abs(hst.transform(digits) - hst.transform(digits.astype(np.uint8))).max()


def test_ready_pixel_values_skip_the_processor(vision, faces):
    path = vision["vit"]
    hst = HST(path, device="cpu").fit(faces)
    processor = transformers.AutoImageProcessor.from_pretrained(path)
    pixels = processor(images=[_grey_to_rgb(f) for f in faces], return_tensors="pt")
    pixels = pixels["pixel_values"]
    np.testing.assert_allclose(
        hst.transform(pixels.numpy()), hst.transform(faces), atol=1e-6
    )
    np.testing.assert_allclose(
        hst.transform(list(pixels)), hst.transform(faces), atol=1e-6
    )


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (["https://example.com/face.png"], "is a URL"),
        (["/no/such/face.png"], "is not a file here"),
        ([{"bytes": None, "path": None}], "must hold 'bytes' or 'path'"),
        ([{"bytes": b"not an image", "path": None}], "cannot be read as an image"),
        ([-np.ones((8, 8))], "negative values"),
        ([np.full((8, 8), 300.0)], "values up to 300"),
        ([np.full((8, 8), np.nan)], "NaN or inf"),
        ([np.zeros((8, 8, 7))], "1, 3 or 4 channels"),
    ],
)
def test_bad_images_are_refused_naming_x(vision, bad, match):
    with pytest.raises(ValueError, match=match):
        HST(vision["vit"], device="cpu").fit(bad)


# ------------------------------------------------------------ two towers
def _tower_states(path, name, **inputs):
    model = getattr(transformers, name).from_pretrained(path).eval()
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_a_two_tower_checkpoint_routes_each_input_to_its_tower(vision, faces, kind):
    path = vision[kind]
    images = HST(path, device="cpu").fit(faces)
    assert (images.modality_, images.family_) == ("image", f"{kind}-vision")
    assert type(images.model_).__name__ == TOWER[kind]
    texts = ["a good movie", "the plot is very dull"]
    text = HST(path, device="cpu").fit(texts)
    assert (text.modality_, text.family_, text.pooling_) == (
        "text",
        f"{kind}-text",
        "mean",
    )
    assert type(text.model_).__name__ == TOWER[kind].replace("Vision", "Text")
    tokens = transformers.AutoTokenizer.from_pretrained(path)(
        texts, padding=True, return_tensors="pt"
    )
    states = _tower_states(path, TOWER[kind].replace("Vision", "Text"), **tokens)
    mask = tokens["attention_mask"].unsqueeze(-1).float()
    stack = text.transform(texts)
    for layer, hidden in enumerate(states):
        expected = (hidden * mask).sum(1) / mask.sum(1)
        np.testing.assert_allclose(stack[layer], expected.numpy(), atol=1e-5)


def test_siglip_texts_need_no_max_length_padding_for_their_states(vision):
    """SigLIP's text tower is run with ``padding="max_length"`` (its training
    and the transformers docs); its tokenizer gives an attention mask, which
    skloes passes, so a text's real-token states are the same under the
    batch's own padding: padded to the maximum length, alone or beside a
    longer text."""
    path = vision["siglip"]
    texts = ["fun", "the plot is very dull and boring", "a good movie"]
    hst = HST(path, device="cpu", batch_size=3).fit(texts)
    stack = hst.transform(texts)
    alone = np.concatenate([hst.transform([t]) for t in texts], axis=1)
    np.testing.assert_allclose(stack, alone, atol=1e-6)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    tokens = tokenizer(texts, padding="max_length", max_length=16, return_tensors="pt")
    assert tokens["input_ids"].shape[1] == 16 and "attention_mask" in tokens
    states = _tower_states(path, "SiglipTextModel", **tokens)
    mask = tokens["attention_mask"].unsqueeze(-1).float()
    for layer, hidden in enumerate(states):
        expected = (hidden * mask).sum(1) / mask.sum(1)
        np.testing.assert_allclose(stack[layer], expected.numpy(), atol=1e-5)


def test_image_files_go_to_the_vision_tower_and_other_strings_to_text(
    vision, faces, tmp_path
):
    paths = []
    for i, face in enumerate(faces[:2]):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(_grey_to_rgb(face)).save(paths[-1])
    hst = HST(vision["clip"], device="cpu").fit(paths)
    assert hst.modality_ == "image"
    np.testing.assert_allclose(hst.transform(paths), hst.transform(faces[:2]), 1e-6)
    assert HST(vision["clip"], device="cpu").fit(["a.png is a file"]).modality_ == (
        "text"
    )


# ----------------------------------------------------------------- Mamba
@pytest.fixture(scope="module")
def mamba(tmp_path_factory):
    return make_tiny_mamba(tmp_path_factory.mktemp("mamba"))


TEXTS = ["a good movie", "the plot is very dull and boring", "fun"]


def _mamba_states(path, text):
    """Mamba's states as skloes indexes every model's: the embedding output
    (transformers' ``hidden_states`` of Mamba leave it out), blocks 1..L-1,
    then the final norm's output."""
    model = transformers.MambaModel.from_pretrained(path).eval()
    ids = transformers.AutoTokenizer.from_pretrained(path)([text], return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=ids["input_ids"], output_hidden_states=True)
        embeddings = model.get_input_embeddings()(ids["input_ids"])
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    return [embeddings, *out.hidden_states[:-2], out.last_hidden_state], out


def test_mamba_family_rules(mamba):
    config = transformers.AutoConfig.from_pretrained(mamba)
    family = model_family(config)
    assert family.name == "mamba" and family.decoder
    assert (family.pooling, family.pool_exclude) == ("mean", None)
    assert (family.padding_side, family.positions) == ("right", "model")
    assert family.float16_store and family.last_state == "output"


def test_mamba_mean_keeps_every_token_against_a_hand_computation(mamba):
    hst = HST(mamba, device="cpu").fit(TEXTS)
    assert (hst.family_, hst.pooling_, hst.exclude_tokens_) == ("mamba", "mean", None)
    stack = hst.transform(TEXTS)
    for i, text in enumerate(TEXTS):
        states, _ = _mamba_states(mamba, text)
        for layer, hidden in enumerate(states):
            np.testing.assert_allclose(
                stack[layer, i], hidden[0].mean(0).numpy(), atol=1e-5
            )


def test_mamba_last_state_is_the_output_after_its_final_norm(mamba):
    states, out = _mamba_states(mamba, TEXTS[1])
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    hst = HST(mamba, pooling="last", layers=[-1], device="cpu").fit(TEXTS)
    np.testing.assert_allclose(
        hst.transform(TEXTS[1:2])[0, 0],
        out.last_hidden_state[0, -1].numpy(),
        atol=1e-5,
    )


def test_mamba_full_pass_indexes_layers_as_the_hooks_do(mamba):
    """A full ``output_hidden_states`` pass (layerdrop, fine-tuning) gives
    the layers the hooks give: the embedding output first."""
    from skloes.models._forward import forward_hidden_states, full_hidden_states

    model = transformers.MambaModel.from_pretrained(mamba).eval()
    ids = transformers.AutoTokenizer.from_pretrained(mamba)(
        TEXTS[:1], return_tensors="pt"
    )
    with torch.no_grad():
        full = full_hidden_states(model, dict(ids))
        hooked = forward_hidden_states(model, dict(ids), 1)  # stops at block 1
    expected, _ = _mamba_states(mamba, TEXTS[0])
    assert len(full) == len(expected) == 3
    for got, want in zip(full, expected, strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)
    for got, want in zip(hooked, full[:2], strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


def test_mamba_pads_on_the_right_whatever_its_tokenizer_says(mamba):
    assert transformers.AutoTokenizer.from_pretrained(mamba).padding_side == "left"
    hst = HST(mamba, batch_size=3, device="cpu").fit(TEXTS)
    assert hst.processor_.padding_side == "right"
    batch = hst.transform(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(hst.transform([text])[:, 0], batch[:, i], atol=1e-5)


def test_mamba_float16_store_and_its_range_check(mamba, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float16_store: no warning at fit
        half = HST(mamba, dtype="float16", device="cpu").fit(TEXTS)
    full = HST(mamba, device="cpu").fit_transform(TEXTS)
    out = half.transform(TEXTS)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, full, atol=2e-3, rtol=2e-3)
    # a residual stream beyond float16's range is refused, naming the layer
    model = transformers.MambaModel.from_pretrained(mamba)
    with torch.no_grad():
        model.embeddings.weight.mul_(1e6)
    model.save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(mamba).save_pretrained(tmp_path)
    big = HST(str(tmp_path), dtype="float16", device="cpu").fit(TEXTS)
    with pytest.raises(ValueError, match="layer 0 of .* beyond float16's range"):
        big.transform(TEXTS)


# ------------------------------------------------------ the loop on images
@pytest.fixture(scope="module")
def faces_and_labels():
    """30 LFW faces and 30 non-faces (25 x 25 grey), with their labels."""
    images = skimage_data.lfw_subset()
    index = np.r_[0:30, 100:130]
    return images[index], np.array(["face"] * 30 + ["other"] * 30)


@pytest.mark.parametrize("pooling", ["auto", "mean"])
def test_a_probe_on_images_fits_predicts_saves_and_loads(
    vision, faces_and_labels, pooling, tmp_path
):
    from skloes.probe import LayerProbeClassifier, load_probe, save_probe

    X, y = faces_and_labels
    probe = LayerProbeClassifier(
        vision["dinov2-registers"], pooling=pooling, device="cpu", random_state=0
    )
    if pooling == "auto":  # the class token of layer 0 holds no image yet
        with pytest.warns(UserWarning, match=r"layers \[0\] are degenerate"):
            probe.fit(X, y)
    else:
        probe.fit(X, y)
    extractor = probe.pipeline_.steps[0][1]
    assert extractor.modality_ == "image" and extractor.n_prefix_tokens_ == 5
    assert extractor.pooling_ == ("first" if pooling == "auto" else "mean")
    proba = probe.predict_proba(X)
    assert proba.shape == (60, 2) and np.allclose(proba.sum(axis=1), 1)
    assert set(probe.predict(X)) <= {"face", "other"}
    # pruned: the extractor runs the selected layers only, and they give
    # what every layer's extraction gives at those layers
    np.testing.assert_array_equal(extractor.layers_, np.sort(probe.selected_layers_))
    every = HST(vision["dinov2-registers"], pooling=pooling, device="cpu")
    stack = every.fit_transform(X)[extractor.layers_]
    np.testing.assert_allclose(
        probe.pipeline_[1:].predict_proba(stack), proba, atol=1e-6
    )
    save_probe(probe, tmp_path / "probe")
    back = load_probe(tmp_path / "probe")
    np.testing.assert_array_equal(back.predict_proba(X), proba)
    card = (tmp_path / "probe" / "README.md").read_text()
    assert extractor.pooling_ in card


def test_a_layer_report_on_image_features_writes_its_page(
    vision, faces_and_labels, tmp_path
):
    from skloes.report import LayerReport

    X, y = faces_and_labels
    stack = HST(vision["clip"], device="cpu").fit_transform(X)
    report = LayerReport(n_layers_to_select=2, cv=3, random_state=0).fit(stack, y)
    assert report.summary()["n_layers"] == 3
    report.save(tmp_path / "report")
    written = {path.name for path in (tmp_path / "report").iterdir()}
    assert {"report.html", "layers.csv", "selection.json"} <= written
