"""Bad input to HiddenStatesTransformer: the texts (X), its parameters, the
layers (boolean masks and indices), max_length against the tokenizer's
special tokens, devices that cannot compute, calls before fit.

New in issue 34 (the section at the end): the renamed ``progress``, alone,
with ``verbose``, and of a value ``verbose`` cannot take.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _support.probes import torch_or_skip

torch = torch_or_skip()

from _support.outcomes import err, ok, warns  # noqa: E402
from _support.probes import quiet_hst  # noqa: E402
from _support.texts import LABELLED_TEXTS, PROBE_TEXTS  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from skloes import HiddenStatesTransformer  # noqa: E402

PROGRESS = "verbose"  # HiddenStatesTransformer


def finite(result):
    values = result if isinstance(result, (int, float)) else np.asarray(result, float)
    assert np.all(np.isfinite(values)), values


# --------------------------------------------------------------------------
# HiddenStatesTransformer: the texts, its parameters, calls before fit
# --------------------------------------------------------------------------
TEXTS = PROBE_TEXTS[:4]


def _frame(columns):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(columns)


def n_rows(n):
    def check(out):
        assert out.shape[1] == n and np.isfinite(out).all()

    return check


HST_INPUT_CASES = [
    ("none", lambda: None, err(r"`X`")),
    ("one_string", lambda: "a good movie", err(r"`X`")),
    ("bytes", lambda: b"a good movie", err(r"`X`")),
    ("empty_list", lambda: [], err(r"`X`.*empty")),
    ("ints", lambda: [1, 2, 3], err(r"`X`.*strings")),
    ("bytes_items", lambda: [b"a", b"b"], err(r"`X`.*strings")),
    ("none_item", lambda: ["a", None], err(r"`X`.*item 1")),
    ("nested_lists", lambda: [["a", "b"], ["c"]], err(r"`X`")),
    (
        "frame_two_columns",
        lambda: _frame({"text": TEXTS, "id": range(4)}),
        err(r"`X`.*2 columns"),
    ),
    (
        "array_two_columns",
        lambda: np.array([TEXTS, TEXTS], dtype=object).T,
        err(r"`X`.*2 columns"),
    ),
    ("numeric_array", lambda: np.zeros((4, 3)), err(r"`X`.*strings")),
    ("surrogate", lambda: ["ok", "x \udc80 y"], err(r"`X` item 1.*surrogate")),
    ("frame_one_column", lambda: _frame({"text": TEXTS}), ok(n_rows(4))),
    ("series", lambda: _frame({"text": TEXTS})["text"], ok(n_rows(4))),
    ("generator", lambda: (t for t in TEXTS), ok(n_rows(4))),
    ("tuple", lambda: tuple(TEXTS), ok(n_rows(4))),
    ("numpy_strings", lambda: np.array(TEXTS), ok(n_rows(4))),
    ("empty_string", lambda: ["", "a"], ok(n_rows(2))),
    ("whitespace", lambda: ["   ", "\n\t"], ok(n_rows(2))),
    ("unknown_words", lambda: ["zzzz qqqq", "日本語 😀"], ok(n_rows(2))),
    ("very_long", lambda: ["good " * 10000], ok(n_rows(1))),
    ("nul_character", lambda: ["a\x00b"], ok(n_rows(1))),
    ("duplicates", lambda: ["fun"] * 50, ok(n_rows(50))),
]


@pytest.mark.parametrize(
    "make_X, outcome", [pytest.param(x, o, id=i) for i, x, o in HST_INPUT_CASES]
)
def test_hst_inputs(tiny_model_path, make_X, outcome):
    outcome.check(lambda: quiet_hst(tiny_model_path).fit_transform(make_X()))


HST_PARAM_CASES = [
    ("layers_too_deep", {"layers": [5]}, err(r"`layers`")),
    ("layers_too_negative", {"layers": -9}, err(r"`layers`")),
    ("layers_empty", {"layers": []}, err(r"`layers`")),
    ("layers_float", {"layers": [0.5]}, err(r"`layers`|layers")),
    ("layers_duplicates", {"layers": [1, 1, -2]}, ok(lambda r: r.shape[0] == 1)),
    ("layers_numpy", {"layers": np.array([0, 2])}, ok(lambda r: r.shape[0] == 2)),
    ("batch_size_0", {"batch_size": 0}, err("batch_size")),
    ("max_length_0", {"max_length": 0}, err("max_length")),
    ("max_length_1", {"max_length": 1}, err(r"`max_length` must be at least 3")),
    ("max_length_huge", {"max_length": 10**9}, err(r"`max_length` must be at most 64")),
    ("pooling", {"pooling": "median"}, err("pooling")),
    ("callable_pooling_bad_shape", {"pooling": lambda h, m: h}, err("pooling")),
    ("output", {"output": "table"}, err("output")),
    ("dtype", {"dtype": "float64"}, err("dtype")),
    ("device_bogus", {"device": "gpu9"}, err("device")),
    ("device_number", {"device": 3}, err("device")),
    ("device_cuda_99", {"device": "cuda:99"}, err("device")),
    ("verbose", {PROGRESS: "yes"}, err(PROGRESS)),
    (
        "cache_is_a_file",
        {"cache": __file__},
        warns(
            r"cache.*"
            r"(exists|directory|Not a)"
        ),
    ),
    ("cache_under_a_file", {"cache": os.path.join(__file__, "sub")}, warns(r"cache")),
    ("cache_wrong_type", {"cache": 3}, err("cache")),
]


@pytest.mark.parametrize(
    "params, outcome", [pytest.param(p, o, id=i) for i, p, o in HST_PARAM_CASES]
)
def test_hst_parameters(tiny_model_path, params, outcome):
    outcome.check(lambda: quiet_hst(tiny_model_path, **params).fit_transform(TEXTS))


# --------------------------------------------------------------------------
# What the model can see: a max_length that leaves no
# token of the text is refused at fit, naming the smallest useful value;
# every text is truncated at the model's limit.
# --------------------------------------------------------------------------
WORDS = ["good movie", "dull plot", "fun film", "the story", "awful actor"]


@pytest.fixture(scope="module")
def text_models(tiny_model_path, tiny_models, tmp_path_factory):
    """Tokenizers that add 2 (BERT), 0 (Llama) and 1 (Llama with <s>) special
    tokens, and a BERT whose tokenizer states no limit (only its positions do)."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("text-models")
    unbounded = root / "bert_no_tokenizer_limit"
    shutil.copytree(tiny_model_path, unbounded)
    config = unbounded / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data.pop("model_max_length", None)
    config.write_text(json.dumps(data))
    return {
        "bert": tiny_model_path,
        "bert_unbounded": str(unbounded),
        "llama": tiny_models("llama"),
        "llama_bos": tiny_models("llama", add_bos=True),
    }


def distinct_rows(n):
    def check(out):
        assert len(np.unique(out[-1].round(6), axis=0)) == n, out[-1]

    return check


MAX_LENGTH_CASES = [
    # (id, model, params, texts, outcome)
    (
        "bert_1",
        "bert",
        {"max_length": 1},
        WORDS,
        err(r"`max_length` must be at least 3.*\[CLS\], \[SEP\].*got 1"),
    ),
    (
        "bert_2",
        "bert",
        {"max_length": 2},
        WORDS,
        err(r"`max_length` must be at least 3.*got 2"),
    ),
    (
        "bert_1_long_text",
        "bert",
        {"max_length": 1},
        ["good " * 600],
        err(r"`max_length` must be at least 3"),
    ),
    ("bert_3_sees_one_word", "bert", {"max_length": 3}, WORDS, ok(distinct_rows(5))),
    ("llama_1", "llama", {"max_length": 1}, WORDS, ok(distinct_rows(5))),
    (
        "llama_bos_1",
        "llama_bos",
        {"max_length": 1},
        WORDS,
        err(r"`max_length` must be at least 2.*<s>"),
    ),
    ("llama_bos_2", "llama_bos", {"max_length": 2}, WORDS, ok(distinct_rows(5))),
    (
        "no_tokenizer_limit_long_text",
        "bert_unbounded",
        {"max_length": 512},
        ["good " * 600],
        ok(n_rows(1)),
    ),
    ("llama_long_text", "llama", {"max_length": 512}, ["fun " * 600], ok(n_rows(1))),
    # New in issue 55: above the default, a length the model cannot take is
    # refused (it was capped: 50,000 on Qwen2's 32,768 positions went on).
    (
        "no_tokenizer_limit_beyond_positions",
        "bert_unbounded",
        {"max_length": 10**6},
        ["good " * 600],
        err(r"`max_length` must be at most 64, the longest input .*got 1000000"),
    ),
    (
        "llama_beyond_positions",
        "llama",
        {"max_length": 513},
        WORDS,
        err(r"`max_length` must be at most 64.*got 513"),
    ),
    (
        "bert_beyond_tokenizer_limit",
        "bert",
        {"max_length": 50_000},
        WORDS,
        err(r"`max_length` must be at most 64"),
    ),
]


@pytest.mark.parametrize(
    "model, params, texts, outcome",
    [pytest.param(m, p, t, o, id=i) for i, m, p, t, o in MAX_LENGTH_CASES],
)
def test_max_length(text_models, model, params, texts, outcome):
    outcome.check(lambda: quiet_hst(text_models[model], **params).fit_transform(texts))


@pytest.mark.parametrize("model", ["bert", "bert_unbounded", "llama"])
def test_the_default_max_length_beyond_the_model_limit_is_the_limit(text_models, model):
    """Positions 64: the default 512 truncates where max_length 64 does
    (above 512 a length beyond the model's is refused: test_max_length)."""
    texts = ["good " * 200, "fun film"]
    default = quiet_hst(text_models[model], max_length=512)
    np.testing.assert_array_equal(
        default.fit_transform(texts),
        quiet_hst(text_models[model], max_length=64).fit_transform(texts),
    )
    assert default.max_length_ == 64


def test_max_length_refused_by_every_text_estimator(tiny_model_path):
    from skloes import GeoRegFineTuner
    from skloes.probe import LayerProbeClassifier

    y = [0, 1, 0, 1, 0]
    err(r"`max_length` must be at least 3").check(
        lambda: GeoRegFineTuner(
            tiny_model_path, max_length=2, max_epochs=1, device="cpu"
        ).fit(WORDS, y)
    )
    err(r"`max_length` must be at least 3").check(
        lambda: LayerProbeClassifier(tiny_model_path, max_length=1, device="cpu").fit(
            WORDS, y
        )
    )


def test_hst_transform_before_fit(tiny_model_path):
    err("not fitted").check(lambda: quiet_hst(tiny_model_path).transform(TEXTS))


@pytest.mark.parametrize("device", ["meta", "xpu", "hpu:0"])
def test_devices_that_cannot_compute_are_refused_at_fit(tiny_model_path, device):
    try:
        torch.device(device)
    except RuntimeError:
        pytest.skip(f"torch does not know {device!r}")
    err(rf"`device`='{device}'").check(
        lambda: HiddenStatesTransformer(tiny_model_path, device=device).fit(PROBE_TEXTS)
    )


# --------------------------------------------------------------------------
# Layer lists: a boolean mask is a mask, never the indices 0 and 1
# --------------------------------------------------------------------------
def layers_are(expected):
    def check(hst):
        assert hst.layers_.tolist() == expected, hst.layers_

    return check


LAYER_CASES = [  # the tiny model has 3 hidden states
    ("numpy_mask", np.array([True, False, True]), ok(layers_are([0, 2]))),
    ("list_mask", [False, True, True], ok(layers_are([1, 2]))),
    ("tuple_mask", (False, False, True), ok(layers_are([2]))),
    (
        "numpy_bool_items",
        [np.bool_(True), np.bool_(False), np.bool_(False)],
        ok(layers_are([0])),
    ),
    (
        "support_mask_from_a_selector",
        np.array([False, True, False]),
        ok(layers_are([1])),
    ),
    ("int_indices_0_1", np.array([1, 0]), ok(layers_are([0, 1]))),
    (
        "mask_too_short",
        np.array([True, False]),
        err(r"`layers` is a boolean mask of 2.*one per layer \(3"),
    ),
    ("mask_too_long", [True] * 5, err(r"`layers` is a boolean mask of 5")),
    (
        "mask_selects_none",
        [False, False, False],
        err(r"`layers` is a boolean mask that selects no layer"),
    ),
    ("mask_mixed_with_ints", [True, 1, 2], err(r"`layers` mixes booleans")),
    ("mask_2d", np.array([[True, False, True]]), err(r"`layers` is not 1-D")),
    ("bool_scalar", True, err(r"`layers` must be 'all', an int")),
    ("numpy_bool_scalar", np.bool_(True), err(r"'layers' parameter|`layers`")),
    ("string", "last", err(r"'layers' parameter|`layers`")),
    ("floats", [0.5, 1.5], err(r"`layers` must be 'all', an int")),
    ("ragged", [[0], [1, 2]], err(r"`layers`")),
]


@pytest.mark.parametrize(
    "layers, outcome", [pytest.param(v, o, id=i) for i, v, o in LAYER_CASES]
)
def test_extractor_layers(tiny_model_path, layers, outcome):
    outcome.check(lambda: quiet_hst(tiny_model_path, layers=layers).fit(PROBE_TEXTS))


LABELS = [1, 0, 1, 1, 0, 0]


# ------------------------------------------------------- 1. 2-D text input
def test_two_column_frame_is_an_error_naming_X(tiny_model_path):
    pd = pytest.importorskip("pandas")
    pipe = make_pipeline(
        quiet_hst(tiny_model_path, output="flat"), LogisticRegression()
    )
    pipe.fit(LABELLED_TEXTS, LABELS)
    frame = pd.DataFrame({"text": LABELLED_TEXTS, "id": range(6)})
    with pytest.raises(ValueError, match=r"`X`.*2 columns.*'text', 'id'"):
        pipe.predict(frame)
    with pytest.raises(ValueError, match="`X`.*2 columns"):
        quiet_hst(tiny_model_path).fit(
            np.array([LABELLED_TEXTS, LABELLED_TEXTS], dtype=object).T
        )


def test_one_text_column_is_taken(tiny_model_path):
    pd = pytest.importorskip("pandas")
    hst = quiet_hst(tiny_model_path).fit(LABELLED_TEXTS)
    expected = hst.transform(LABELLED_TEXTS)
    np.testing.assert_array_equal(
        hst.transform(pd.DataFrame({"t": LABELLED_TEXTS})), expected
    )
    column = np.array(LABELLED_TEXTS, dtype=object)[:, None]
    np.testing.assert_array_equal(hst.transform(column), expected)


# ------------------------------------------------- 10. a generator as X
def test_generator_is_materialised_once_by_fit_transform(tiny_model_path):
    expected = quiet_hst(tiny_model_path).fit_transform(LABELLED_TEXTS)
    out = quiet_hst(tiny_model_path).fit_transform(t for t in LABELLED_TEXTS)
    np.testing.assert_array_equal(out, expected)
    hst = quiet_hst(tiny_model_path).fit(iter(LABELLED_TEXTS))
    np.testing.assert_array_equal(hst.transform(iter(LABELLED_TEXTS)), expected)


# ---------------------------------------- 10. a lone surrogate in a text
def test_lone_surrogate_is_an_error_naming_the_item(tiny_model_path):
    with pytest.raises(ValueError, match=r"`X`.*item 1.*surrogate"):
        quiet_hst(tiny_model_path).fit_transform(["fine", "bad \ud800 text"])


# ------------------------------------------- 7. device="cuda" without GPU
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpu_fails_at_fit(tiny_model_path):
    with pytest.raises(ValueError, match="`device`.*'cuda'.*not available"):
        quiet_hst(tiny_model_path, device="cuda").fit(LABELLED_TEXTS)
    with pytest.raises(ValueError, match="`device`.*'cuda:1'"):
        quiet_hst(tiny_model_path, device="cuda:1").fit(LABELLED_TEXTS)


# ==========================================================================
# New in issue 34: the renamed `progress`
# ==========================================================================
PROGRESS_CASES = [
    (
        "former_name",
        {"progress": True},
        warns(
            r"`progress` was renamed `verbose` in 0.2.*Its value True is used",
            category=FutureWarning,
        ),
    ),
    (
        "former_and_new_name",
        {"progress": True, "verbose": 1},
        err(r"set `verbose` only; `progress` is its former name"),
    ),
    (
        "former_name_not_a_number",
        {"progress": "yes"},
        err(r"`progress` \(the former name of `verbose`\) must be a value"),
    ),
]


@pytest.mark.parametrize(
    "params, outcome", [pytest.param(p, o, id=i) for i, p, o in PROGRESS_CASES]
)
def test_renamed_progress(tiny_model_path, params, outcome):
    from skloes import HiddenStatesTransformer

    hst = HiddenStatesTransformer(tiny_model_path, device="cpu", **params)
    outcome.check(lambda: hst.fit(TEXTS))


# --------------------------------------------------------------------------
# New in issue 55: one forward pass's memory is checked before it runs. A
# text longer than `max_batch_tokens` runs alone, and its attention grows with
# the square of its length (40,000 tokens on Qwen2 grew the process past
# 17 GB): a pass the free memory cannot hold is refused, naming `max_length`
# (one text) or `batch_size` and `max_batch_tokens` (a batch), before any pass.
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_llama(tiny_models, tmp_path_factory):
    """The tiny Llama with 100,000 positions (the tokenizer's limit too)."""
    import json
    import shutil

    folder = tmp_path_factory.mktemp("long-llama") / "llama"
    shutil.copytree(tiny_models("llama"), folder)
    for name, key in [
        ("config.json", "max_position_embeddings"),
        ("tokenizer_config.json", "model_max_length"),
    ]:
        data = json.loads((folder / name).read_text())
        data[key] = 100_000
        (folder / name).write_text(json.dumps(data))
    return str(folder)


@pytest.fixture
def no_forward(monkeypatch):
    """Any forward pass fails the test: the refusal comes before one."""
    from skloes.extraction import _hidden_states

    def forward(*args, **kwargs):
        raise AssertionError("a forward pass ran")

    monkeypatch.setattr(_hidden_states, "forward_pooled", forward)


# 64 distinct texts of 400 tokens
TEXTS_400 = ["good " * i + "fun " * (400 - i) for i in range(64)]


def _free(monkeypatch, n_bytes):
    from skloes.models import _inputs

    monkeypatch.setattr(_inputs, "available_memory", lambda: n_bytes)


def _pass(hst, n_texts, n_tokens):
    from skloes.models._inputs import pass_bytes

    return pass_bytes(hst.model_.config, int(max(hst.layers_)), n_texts, n_tokens)


@pytest.mark.parametrize("layers", ["all", [1]])
def test_a_text_too_long_for_the_free_memory_is_refused_naming_max_length(
    long_llama, monkeypatch, no_forward, layers
):
    hst = quiet_hst(long_llama, max_length=50_000, layers=layers).fit(["good"])
    text = "good " * 20_000  # 20,000 tokens: over any token budget, alone
    _free(monkeypatch, _pass(hst, 1, 5_000))
    with pytest.raises(MemoryError, match=r"`max_length`") as caught:
        hst.transform([text, "fun film"])
    message = str(caught.value)
    assert "20,000 tokens" in message and "20,000 x 20,000" in message
    fits = int(message.split("about ")[-1].split(" tokens fit")[0].replace(",", ""))
    # the length it names is the longest that fits
    assert _pass(hst, 1, fits) <= _pass(hst, 1, 5_000) < _pass(hst, 1, fits + 1)


def test_the_length_the_refusal_names_runs(long_llama, monkeypatch):
    hst = quiet_hst(long_llama, max_length=50_000).fit(["good"])
    _free(monkeypatch, _pass(hst, 1, 3_000))
    with pytest.raises(MemoryError, match=r"about 3,000 tokens fit"):
        hst.transform(["good " * 4_000])
    short = quiet_hst(long_llama, max_length=3_000).fit(["good"])
    out = short.transform(["good " * 4_000])
    assert np.isfinite(out).all() and short.max_length_ == 3_000


def test_a_batch_too_wide_for_the_free_memory_names_batch_size(
    long_llama, monkeypatch, no_forward
):
    hst = quiet_hst(long_llama, batch_size=64, max_batch_tokens=None).fit(["good"])
    _free(monkeypatch, _pass(hst, 4, 400))  # one text fits, not 64 of them
    with pytest.raises(
        MemoryError, match=r"64 texts of up to 400 tokens.*`batch_size`"
    ):
        hst.transform(TEXTS_400)


def test_the_token_budget_splits_a_batch_the_memory_cannot_hold(
    long_llama, monkeypatch
):
    """The same texts under the default budget pass one by one: accepted."""
    hst = quiet_hst(long_llama, batch_size=64).fit(["good"])
    _free(monkeypatch, _pass(hst, 4, 400))
    assert hst.transform(TEXTS_400).shape[1] == 64
