"""HiddenStatesTransformer: tiny random models, and the real MiniLM on real text."""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _support.rounding import assert_same_states  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.models._forward import find_blocks, forward_hidden_states  # noqa: E402
from skloes.models._inputs import token_batches  # noqa: E402
from skloes.models._testing import make_tiny_vit, make_tiny_wav2vec2  # noqa: E402

TEXTS = [
    "a good movie",
    "the plot was very dull and boring",
    "fun",
    "i really loved this film",
    "bad actor , bad story",
    "not great",
    "quite lovely",
    "the film is awful",
    "this movie was fun and the story good",
]


# BERT's last block output is its last_hidden_state, so no one-row probe runs
# (skloes.models._forward._settle_last_state); a Llama or a ViT would add one row.
PROBE = 0


def HST(model, **params):
    params.setdefault("device", "cpu")
    params.setdefault("verbose", 0)
    return HiddenStatesTransformer(model, **params)


@pytest.fixture
def counters(monkeypatch):
    """Count samples through any model forward, and weight loads."""
    counts = {"samples": 0, "calls": 0, "loads": 0}
    classes = (
        transformers.BertModel,
        transformers.ViTModel,
        transformers.Wav2Vec2Model,
    )
    for cls in classes:
        original = cls.forward

        def forward(self, *args, _original=original, **kwargs):
            first = next(iter(kwargs.values())) if kwargs else args[0]
            counts["calls"] += 1
            counts["samples"] += int(first.shape[0])
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "forward", forward)
    original_load = transformers.AutoModel.from_pretrained

    def from_pretrained(*args, **kwargs):
        counts["loads"] += 1
        return original_load(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", from_pretrained)
    return counts


def _bert_reference(path, texts, pooling, max_length=64):
    """Pooled states by hand: one direct model call, numpy pooling under the mask."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = tokenizer(
        list(texts),
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )
    with torch.no_grad():
        states = model(**batch, output_hidden_states=True).hidden_states
    mask = batch["attention_mask"].numpy().astype(bool)
    out = []
    for layer in states:
        h = layer.numpy()
        rows = []
        for i in range(len(texts)):
            real = h[i][mask[i]]
            rows.append(
                {
                    "mean": real.mean(0),
                    "first": real[0],
                    "cls": real[0],
                    "last": real[-1],
                    "max": real.max(0),
                }[pooling]
            )
        out.append(np.stack(rows))
    return np.stack(out)


# ---------------------------------------------------------------- basics
def test_init_only_stores_and_clone_never_loads(tiny_model_path, counters):
    hst = HST("/no/such/folder", pooling="max", layers=[0])
    assert hst.get_params()["model"] == "/no/such/folder"
    fitted = HST(tiny_model_path).fit(TEXTS)
    fitted.transform(TEXTS[:2])
    assert counters["loads"] == 1
    clone(fitted)
    assert counters["loads"] == 1


def test_fit_reads_config_only_and_transform_loads_once(tiny_model_path, counters):
    hst = HST(tiny_model_path).fit(TEXTS)
    assert counters["loads"] == 0
    assert hst.n_model_layers_ == 3 and hst.modality_ == "text"
    hst.transform(TEXTS)
    hst.transform(TEXTS[:3])
    assert counters["loads"] == 1


def test_stack_shape_and_resolved_layers(tiny_model_path):
    stack = HST(tiny_model_path).fit_transform(TEXTS)
    assert stack.shape == (3, len(TEXTS), 8) and stack.dtype == np.float32
    hst = HST(tiny_model_path, layers=[-1, 0]).fit(TEXTS)
    np.testing.assert_array_equal(hst.layers_, [0, 2])
    np.testing.assert_allclose(hst.transform(TEXTS), stack[[0, 2]], atol=1e-6)


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("pooling", ["mean", "cls", "last", "max"])
def test_pooling_equals_hand_computed_reference(tiny_model_path, pooling):
    got = HST(tiny_model_path, pooling=pooling, batch_size=4).fit_transform(TEXTS)
    expected = _bert_reference(tiny_model_path, TEXTS, pooling)
    # batches of 4 against one batch, numpy pooling against torch's
    assert_same_states(got, expected)


def test_flat_output_names_and_pandas(tiny_model_path):
    pd = pytest.importorskip("pandas")
    stack = HST(tiny_model_path, layers=[1, 2]).fit_transform(TEXTS)
    hst = HST(tiny_model_path, layers=[1, 2], output="flat").fit(TEXTS)
    flat = hst.transform(TEXTS)
    assert flat.shape == (len(TEXTS), 16)
    np.testing.assert_array_equal(flat[:, 8:], stack[1])
    names = hst.get_feature_names_out()
    assert names[0] == "layer1_0" and names[8] == "layer2_0" and len(names) == 16
    frame = hst.set_output(transform="pandas").transform(TEXTS)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(names)
    pl = pytest.importorskip("polars")
    frame = hst.set_output(transform="polars").transform(pd.Series(TEXTS))
    assert isinstance(frame, pl.DataFrame) and frame.columns == list(names)
    np.testing.assert_array_equal(frame.to_numpy(), flat)


def test_a_stack_is_named_by_its_flat_columns_and_stays_3d(tiny_model_path):
    """The stack has no frame form: set_output leaves it as is, and its names
    are those of the flat table (so a Pipeline's next step can ask)."""
    flat = HST(tiny_model_path, layers=[1, 2], output="flat").fit(TEXTS)
    hst = HST(tiny_model_path, layers=[1, 2]).fit(TEXTS)
    np.testing.assert_array_equal(
        hst.get_feature_names_out(), flat.get_feature_names_out()
    )
    for container in ("pandas", "polars"):
        out = hst.set_output(transform=container).transform(TEXTS)
        assert isinstance(out, np.ndarray) and out.shape == (2, len(TEXTS), 8)


def test_a_polars_frame_of_one_text_column_is_read_as_its_column(tiny_model_path):
    pl = pytest.importorskip("polars")
    hst = HST(tiny_model_path).fit(TEXTS)
    np.testing.assert_array_equal(
        hst.transform(pl.DataFrame({"text": TEXTS})), hst.transform(TEXTS)
    )
    with pytest.raises(ValueError, match="2 columns"):
        hst.transform(pl.DataFrame({"a": TEXTS, "b": TEXTS}))


def test_float16_output(tiny_model_path):
    full = HST(tiny_model_path).fit_transform(TEXTS)
    half = HST(tiny_model_path, dtype="float16").fit_transform(TEXTS)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, full, atol=1e-2, rtol=1e-2)


def test_identical_inputs_are_computed_once(tiny_model_path, counters):
    texts = TEXTS[:3] * 4
    out = HST(tiny_model_path).fit(texts).transform(texts)
    assert counters["samples"] == 3 + PROBE
    np.testing.assert_array_equal(out[:, :3], out[:, 9:])


@pytest.mark.cpu_sensitive
def test_batch_size_and_input_order_do_not_change_results(tiny_model_path):
    ref = HST(tiny_model_path, batch_size=64).fit_transform(TEXTS)
    perm = np.random.RandomState(0).permutation(len(TEXTS))
    out = HST(tiny_model_path, batch_size=2).fit_transform([TEXTS[i] for i in perm])
    assert_same_states(out[:, np.argsort(perm)], ref)


def test_token_batches_respect_both_caps_and_keep_the_order():
    lengths = [9, 7, 7, 5, 3, 3, 3, 2, 1, 1]
    order = np.arange(10)
    batches = token_batches(order, lengths, 4, 14)
    # 9 alone (2 x 9 > 14); 7 + 7; 5 + 3 (3 x 5 > 14); then 4 texts of <= 3 tokens
    assert [b.tolist() for b in batches] == [[0], [1, 2], [3, 4], [5, 6, 7, 8], [9]]
    for b in batches:
        assert len(b) <= 4
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 14
    # a text longer than the budget runs alone; no budget reached: batch_size only
    assert [len(b) for b in token_batches(order, lengths, 4, 5)] == [1] * 7 + [2, 1]
    assert [len(b) for b in token_batches(order, lengths, 3, 10**6)] == [3, 3, 3, 1]


@pytest.mark.cpu_sensitive
def test_max_batch_tokens_splits_batches_without_changing_results(
    tiny_model_path, monkeypatch
):
    ref = HST(tiny_model_path, batch_size=64).fit_transform(TEXTS)
    shapes = []
    original = transformers.BertModel.forward

    def forward(self, *args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(transformers.BertModel, "forward", forward)
    out = HST(tiny_model_path, batch_size=64, max_batch_tokens=12).fit_transform(TEXTS)
    assert len(shapes) > 2
    # "auto" on the CPU: 256 tokens (AUTO_BATCH_TOKENS, measured); None: no split
    assert HST(tiny_model_path).fit(TEXTS).max_batch_tokens_ == 256
    assert (
        HST(tiny_model_path, max_batch_tokens=None).fit(TEXTS).max_batch_tokens_ is None
    )
    assert sum(n for n, _ in shapes) == len(TEXTS)
    assert all(n == 1 or n * t <= 12 for n, t in shapes)
    assert_same_states(out, ref)


def test_token_budget_is_not_part_of_the_cache_key(tiny_model_path, tmp_path, counters):
    cold = HST(tiny_model_path, cache=tmp_path, max_batch_tokens=None).fit_transform(
        TEXTS
    )
    calls = counters["calls"]
    warm = HST(tiny_model_path, cache=tmp_path, max_batch_tokens=12).fit_transform(
        TEXTS
    )
    assert counters["calls"] == calls  # served from the cache, no forward
    np.testing.assert_array_equal(warm, cold)  # the stored bytes


def test_long_text_is_truncated_at_max_length(tiny_model_path):
    long_text = " ".join(["good"] * 200)
    hst = HST(tiny_model_path, max_length=8).fit([long_text])
    # 8 tokens = [CLS] + 6 words + [SEP]: the same ids alone in a batch
    np.testing.assert_allclose(
        hst.transform([long_text]),
        hst.transform([" ".join(["good"] * 6)]),
        atol=1e-6,
    )
    # The tokenizer's own limit (64 positions) applies under the default 512;
    # a max_length above both is refused.
    assert HST(tiny_model_path, max_length=512).fit([long_text]).max_length_ == 64
    with pytest.raises(ValueError, match=r"`max_length` must be at most 64"):
        HST(tiny_model_path, max_length=10_000).fit([long_text])


def test_callable_pooling_width_and_validation(tiny_model_path):
    def sum_first3(hidden, mask):
        return (hidden * mask.unsqueeze(-1)).sum(1)[:, :3]

    hst = HST(tiny_model_path, pooling=sum_first3, output="flat").fit(TEXTS)
    flat = hst.transform(TEXTS)
    assert flat.shape == (len(TEXTS), 9) and hst.dim_ == 3
    assert hst.get_feature_names_out()[3] == "layer1_0"
    mean = HST(tiny_model_path).fit_transform(TEXTS)
    lengths = _bert_lengths(tiny_model_path, TEXTS)
    np.testing.assert_allclose(
        flat[:, :3], mean[0][:, :3] * lengths[:, None], rtol=1e-5, atol=1e-5
    )
    with pytest.raises(ValueError, match="callable `pooling` must return"):
        HST(tiny_model_path, pooling=lambda h, m: h).fit_transform(TEXTS)


def _bert_lengths(path, texts):
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return np.array([len(ids) for ids in tokenizer(list(texts))["input_ids"]])


def test_pickle_carries_no_weights_and_reloads_identically(tiny_model_path):
    hst = HST(tiny_model_path).fit(TEXTS)
    before = hst.transform(TEXTS)
    blob = pickle.dumps(hst)
    assert len(blob) < 10_000
    again = pickle.loads(blob)
    assert again._model is None
    np.testing.assert_array_equal(again.transform(TEXTS), before)


def test_progress_bar_stays_quiet_for_small_or_piped_runs(tiny_model_path, capsys):
    HiddenStatesTransformer(tiny_model_path, device="cpu", verbose=1).fit_transform(
        TEXTS * 30
    )
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "params, X, exc, match",
    [
        ({}, [], ValueError, "`X` is empty"),
        ({}, None, TypeError, "`X` must be a list"),
        ({}, "one string", TypeError, "`X` must be a list"),
        ({}, ["ok", None], TypeError, "must hold strings"),
        ({}, ["ok", 3], TypeError, "must hold strings"),
        ({"pooling": "median"}, TEXTS, ValueError, "pooling"),
        ({"output": "wide"}, TEXTS, ValueError, "output"),
        ({"dtype": "float64"}, TEXTS, ValueError, "dtype"),
        ({"layers": [5]}, TEXTS, ValueError, "`layers` index 5 is out of range"),
        ({"layers": [-4]}, TEXTS, ValueError, "out of range"),
        ({"layers": []}, TEXTS, ValueError, "at least one layer"),
        ({"layers": ["x"]}, TEXTS, TypeError, "layers"),
        ({"batch_size": 0}, TEXTS, ValueError, "batch_size"),
        ({"max_batch_tokens": 0}, TEXTS, ValueError, "max_batch_tokens"),
        ({"max_batch_tokens": "big"}, TEXTS, ValueError, "max_batch_tokens"),
        ({"max_batch_tokens": 1.5}, TEXTS, ValueError, "max_batch_tokens"),
        ({"max_length": 0}, TEXTS, ValueError, "max_length"),
        ({"device": "gpu-please"}, TEXTS, ValueError, "`device` must be"),
    ],
)
def test_bad_input_is_a_clear_error(tiny_model_path, params, X, exc, match):
    with pytest.raises(exc, match=match):
        HST(tiny_model_path, **params).fit(X)


def test_y_of_another_length_is_rejected(tiny_model_path):
    with pytest.raises(ValueError, match="`y` must have one entry per sample"):
        HST(tiny_model_path).fit(TEXTS, [0, 1])


# ---------------------------------------------------------------- forward stop
def _models_under_test(tiny_model_path, tmp_path):
    yield "bert", transformers.AutoModel.from_pretrained(tiny_model_path).eval()
    yield (
        "vit",
        transformers.AutoModel.from_pretrained(make_tiny_vit(tmp_path / "vit")).eval(),
    )
    for stable in (True, False):
        yield (
            f"wav2vec2-stable={stable}",
            transformers.AutoModel.from_pretrained(
                make_tiny_wav2vec2(tmp_path / f"w2v{stable}", stable_layer_norm=stable)
            ).eval(),
        )
    config = transformers.MPNetConfig(
        vocab_size=40,
        hidden_size=8,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=40,
    )
    torch.manual_seed(0)
    yield "mpnet", transformers.MPNetModel(config).eval()


def _dummy_inputs(model):
    torch.manual_seed(1)
    if model.main_input_name == "pixel_values":
        return {"pixel_values": torch.randn(2, 3, 16, 16)}
    if model.main_input_name == "input_values":
        mask = torch.ones(2, 800, dtype=torch.long)
        mask[1, 500:] = 0
        return {"input_values": torch.randn(2, 800), "attention_mask": mask}
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    return {"input_ids": torch.randint(5, 30, (2, 7)), "attention_mask": mask}


def test_forward_stops_after_deepest_block_and_is_exact(tiny_model_path, tmp_path):
    for name, model in _models_under_test(tiny_model_path, tmp_path):
        blocks = find_blocks(model)
        assert blocks is not None and len(blocks) == model.config.num_hidden_layers
        inputs = _dummy_inputs(model)
        with torch.inference_mode():
            full = model(**inputs, output_hidden_states=True).hidden_states
        calls = [0] * len(blocks)

        def count(module, args, output, i, calls=calls):
            calls[i] += 1

        hooks = [
            b.register_forward_hook(functools.partial(count, i=i))
            for i, b in enumerate(blocks)
        ]
        try:
            for depth in range(len(full)):
                calls[:] = [0] * len(blocks)
                with torch.inference_mode():
                    states = forward_hidden_states(model, inputs, depth, blocks=blocks)
                assert len(states) == depth + 1, name
                for l in range(depth + 1):
                    torch.testing.assert_close(states[l], full[l], msg=name)
                assert calls == [1] * depth + [0] * (len(blocks) - depth), name
        finally:
            for hook in hooks:
                hook.remove()


def test_truncated_forward_keeps_gradients(tiny_model_path):
    model = transformers.AutoModel.from_pretrained(tiny_model_path)
    inputs = _dummy_inputs(model)
    states = forward_hidden_states(model, inputs, 1)
    states[1].sum().backward()
    embeddings = model.embeddings.word_embeddings.weight
    assert embeddings.grad is not None and embeddings.grad.abs().sum() > 0
    last = model.encoder.layer[-1].output.dense.weight
    assert last.grad is None  # the last block never ran


# ---------------------------------------------------------------- vision, audio
@pytest.fixture(scope="module")
def vit_path(tiny_models):
    return tiny_models("vit")


def _images(n=5, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randint(0, 255, (20, 20, 3)).astype(np.uint8) for _ in range(n)]


def test_vision_shapes_pooling_and_ready_pixel_values(vit_path):
    images = _images()
    hst = HST(vit_path, pooling="cls").fit(images)
    stack = hst.transform(images)
    assert hst.modality_ == "image" and stack.shape == (3, 5, 8)
    assert hst.max_batch_tokens_ is None  # a token budget is for text only
    pixels = hst.processor_(images=images, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        states = hst.model_(pixel_values=pixels, output_hidden_states=True)
    for l, layer in enumerate(states.hidden_states):
        np.testing.assert_allclose(stack[l], layer[:, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(hst.transform(pixels.numpy()), stack, atol=1e-6)
    # the default pools a ViT by its class token; "mean" averages its patch
    # tokens only, and exclude_tokens=None puts the class token back in
    default = HST(vit_path, layers=[2]).fit_transform(images)
    np.testing.assert_array_equal(default[0], stack[2])
    mean = HST(vit_path, layers=[2], pooling="mean").fit_transform(images)
    patches = states.hidden_states[2][:, 1:].mean(1).numpy()
    np.testing.assert_allclose(mean[0], patches, atol=1e-5)
    every = HST(vit_path, layers=[2], pooling="mean", exclude_tokens=None)
    np.testing.assert_allclose(
        every.fit_transform(images)[0],
        states.hidden_states[2].mean(1).numpy(),
        atol=1e-5,
    )


def test_vision_rejects_strings_and_wrong_rank(vit_path):
    with pytest.raises(ValueError, match="'a picture' is not a file here"):
        HST(vit_path).fit(["a picture"])
    with pytest.raises(ValueError, match="is a URL"):
        HST(vit_path).fit(["https://example.com/cat.png"])
    with pytest.raises(ValueError, match="images of rank 2"):
        HST(vit_path).fit([np.zeros(5)])
    with pytest.raises(ValueError, match="images of rank 2"):
        HST(vit_path).fit([np.zeros((1, 2, 3, 4, 5))])


@pytest.fixture(scope="module")
def wav2vec2_paths(tiny_models):
    return {
        stable: tiny_models("wav2vec2", stable_layer_norm=stable)
        for stable in (True, False)
    }


@pytest.mark.parametrize("stable", [True, False])
@pytest.mark.parametrize("pooling", ["mean", "last", "max"])
def test_audio_padding_never_changes_a_waveform(wav2vec2_paths, stable, pooling):
    path = wav2vec2_paths[stable]
    rng = np.random.RandomState(0)
    waves = [rng.randn(n).astype(np.float32) for n in (300, 1600, 900)]
    hst = HST(path, pooling=pooling, batch_size=3).fit(waves)
    batched = hst.transform(waves)
    assert hst.modality_ == "audio" and batched.shape == (3, 3, 8)
    alone = np.stack([hst.transform([w])[:, 0] for w in waves], axis=1)
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_audio_rejects_strings_and_3d_waveforms(wav2vec2_paths):
    path = wav2vec2_paths[True]
    with pytest.raises(TypeError, match="takes audio waveforms"):
        HST(path).fit(["speech"])
    with pytest.raises(ValueError, match="1-D, or 2-D with at most 8 channels"):
        HST(path).fit([np.zeros((2, 3, 400))])
    with pytest.raises(ValueError, match="at most 8 channels on its shorter axis"):
        HST(path).fit([np.zeros((20, 400))])


def test_fit_returns_self_and_is_idempotent(tiny_model_path):
    hst = HST(tiny_model_path)
    assert hst.fit(TEXTS) is hst
    first = hst.transform(TEXTS)
    np.testing.assert_array_equal(hst.fit(TEXTS[:2]).transform(TEXTS), first)


# ---------------------------------------------------------------- real MiniLM
@pytest.fixture(scope="module")
def real(minilm_path, rotten_tomatoes_small):
    texts, _ = rotten_tomatoes_small
    texts = [str(t) for t in texts[:200]]
    hst = HST(minilm_path, max_length=128).fit(texts)
    return minilm_path, texts, hst, hst.transform(texts)


@pytest.mark.integration
def test_minilm_shape_and_mean_equals_direct_call(real):
    path, texts, hst, stack = real
    assert stack.shape == (7, len(texts), 384)
    model, tokenizer = hst.model_, hst.processor_
    for start in range(0, 64, 32):
        batch = tokenizer(
            texts[start : start + 32],
            padding=True,
            truncation=True,
            max_length=128,
            return_tensors="pt",
        )
        with torch.no_grad():
            states = model(**batch, output_hidden_states=True).hidden_states
        mask = batch["attention_mask"].unsqueeze(-1).double()
        for l, layer in enumerate(states):
            mean = (layer.double() * mask).sum(1) / mask.sum(1)
            np.testing.assert_allclose(
                stack[l, start : start + 32], mean.numpy(), atol=1e-5
            )


@pytest.mark.integration
def test_minilm_batch_size_and_order_independent(real):
    path, texts, _, stack = real
    perm = np.random.RandomState(0).permutation(48)
    out = HST(path, max_length=128, batch_size=5).fit_transform(
        [texts[i] for i in perm]
    )
    np.testing.assert_allclose(out[:, np.argsort(perm)], stack[:, :48], atol=1e-5)


@pytest.mark.integration
def test_minilm_token_budget_does_not_change_results(real):
    path, texts, _, stack = real
    out = HST(path, max_length=128, max_batch_tokens=100).fit_transform(texts[:48])
    np.testing.assert_allclose(out, stack[:, :48], atol=1e-5, rtol=1e-5)


@pytest.mark.integration
def test_minilm_layer_subset_equals_full_rows_and_skips_blocks(real, monkeypatch):
    path, texts, _, stack = real
    calls = []
    original = transformers.models.bert.modeling_bert.BertLayer.forward

    def forward(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(
        transformers.models.bert.modeling_bert.BertLayer, "forward", forward
    )
    out = HST(path, max_length=128, layers=[1, 3], max_batch_tokens=None).fit_transform(
        texts
    )
    np.testing.assert_allclose(out, stack[[1, 3]], atol=1e-5)
    n_batches = -(-len(texts) // 32)  # batch_size only, no token budget
    assert len(calls) == 3 * n_batches  # blocks 4..6 never ran


@pytest.mark.integration
def test_minilm_cache_hit_runs_no_forward_and_loads_nothing(real, tmp_path, counters):
    path, texts, _, stack = real
    subset = texts[:120]
    cold = HST(path, max_length=128, cache=tmp_path).fit_transform(subset)
    assert counters["samples"] == len(set(subset)) + PROBE
    assert counters["loads"] == 1
    np.testing.assert_allclose(cold, stack[:, :120], atol=1e-5)
    counters.update(samples=0, calls=0, loads=0)
    warm = HST(path, max_length=128, cache=tmp_path).fit_transform(subset)
    assert counters == {"samples": 0, "calls": 0, "loads": 0}
    np.testing.assert_array_equal(warm, cold)
    # Fewer layers are served by the every-layer entries: nothing runs.
    part = HST(path, max_length=128, cache=tmp_path, layers=[2]).fit_transform(
        subset[:5]
    )
    assert counters["samples"] == 0
    np.testing.assert_array_equal(part, cold[[2], :5])
    # Another setting (max_length) is another key: it computes again.
    HST(path, max_length=64, cache=tmp_path, layers=[2]).fit_transform(subset[:5])
    assert counters["samples"] == 5


def _pick_layer(stack, layer=1):
    return stack[layer]


@pytest.mark.integration
def test_minilm_grid_search_runs_each_text_once(
    real, rotten_tomatoes_small, tmp_path, counters
):
    _, labels = rotten_tomatoes_small
    path, texts, _, _ = real
    X, y = texts[:120], np.asarray(labels[:120])
    pipe = Pipeline(
        [
            ("hst", HST(path, max_length=128, cache=tmp_path)),
            ("pick", FunctionTransformer(_pick_layer)),
            ("clf", LogisticRegression(max_iter=200)),
        ]
    )
    grid = GridSearchCV(
        pipe,
        {
            "pick__kw_args": [{"layer": 1}, {"layer": 3}, {"layer": 6}],
            "clf__C": [0.1, 1.0],
        },
        cv=3,
        refit=True,
    )
    grid.fit(X, y)
    assert counters["samples"] == len(set(X)) + PROBE
    assert 0.5 < grid.best_score_ <= 1.0


@pytest.mark.integration
def test_minilm_pickle_round_trip(real):
    path, texts, hst, stack = real
    again = pickle.loads(pickle.dumps(hst))
    out = again.transform(texts[:16])
    np.testing.assert_array_equal(out, hst.transform(texts[:16]))
    np.testing.assert_allclose(out, stack[:, :16], atol=1e-5)
