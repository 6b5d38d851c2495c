"""The content-addressed hidden-states cache: keys, atomic .npy entries, memmap."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from skloes._cache import HiddenStatesCache, content_key, model_fingerprint

SETTINGS = {"model": "abc", "pooling": "mean", "max_length": 64, "layers": [0, 1],
            "dtype": "float32"}


def test_entry_round_trip_is_a_plain_npy(tmp_path):
    store = HiddenStatesCache(tmp_path, SETTINGS, (2, 3), "float32")
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    key = content_key("a text")
    assert store.read(key) is None
    store.write(key, value)
    np.testing.assert_array_equal(store.read(key), value)
    # Readable by numpy with pickling disabled: no pickle inside.
    np.testing.assert_array_equal(np.load(store.path(key), allow_pickle=False), value)
    assert (store.root / "settings.json").exists()


def test_settings_change_the_folder(tmp_path):
    a = HiddenStatesCache(tmp_path, SETTINGS, (2, 3), "float32")
    for change in ({"pooling": "max"}, {"max_length": 32}, {"layers": [1]},
                   {"model": "abd"}, {"dtype": "float16"}):
        b = HiddenStatesCache(tmp_path, {**SETTINGS, **change}, (2, 3), "float32")
        assert a.root != b.root, change


def test_content_keys_separate_types_and_content():
    assert content_key("abc") == content_key("abc")
    assert content_key("abc") != content_key("abd")
    wave = np.zeros(4, dtype=np.float32)
    assert content_key(wave) != content_key(wave.astype(np.float64))
    assert content_key(wave) != content_key(wave.reshape(2, 2))
    assert content_key(wave) == content_key(wave.copy())


def test_no_half_written_entry_is_ever_read(tmp_path, monkeypatch):
    store = HiddenStatesCache(tmp_path, SETTINGS, (2, 3), "float32")
    key = content_key("x")

    def crash(handle, array, allow_pickle):
        handle.write(b"\x93NUMPY partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np.lib.format, "write_array", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write(key, np.zeros((2, 3), np.float32))
    assert store.read(key) is None
    assert not any(p.name.endswith(".part") for p in store.root.rglob("*"))


def test_truncated_or_foreign_entry_is_a_miss(tmp_path):
    store = HiddenStatesCache(tmp_path, SETTINGS, (2, 3), "float32")
    key = content_key("y")
    store.write(key, np.ones((2, 3), np.float32))
    data = store.path(key).read_bytes()
    store.path(key).write_bytes(data[:-4])
    assert store.read(key) is None
    np.save(store.path(key), np.ones((5,), np.float32))
    assert store.read(key) is None


def test_fingerprint_follows_the_weights(tiny_model_path, tmp_path):
    from skloes.utils._testing import make_tiny_model

    other = make_tiny_model(tmp_path / "other", seed=1)
    same = tmp_path / "copy"
    shutil.copytree(tiny_model_path, same)
    assert model_fingerprint(tiny_model_path) == model_fingerprint(str(same))
    assert model_fingerprint(tiny_model_path) != model_fingerprint(other)


# ------------------------------------------------- through the transformer
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from skloes import HiddenStatesTransformer  # noqa: E402

TEXTS = ["a good movie", "a dull plot", "fun", "the story was great", "fun"]


def _hst(path, cache, **params):
    return HiddenStatesTransformer(path, device="cpu", progress=False, cache=cache,
                                   **params)


def test_cached_transform_equals_uncached_and_reuses_entries(tiny_model_path, tmp_path):
    plain = _hst(tiny_model_path, None).fit_transform(TEXTS)
    cold = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)
    np.testing.assert_array_equal(cold, plain)
    entries = list(tmp_path.rglob("*.npy"))
    assert len(entries) == len(set(TEXTS))
    # Partial hit: only the new text is computed and stored.
    _hst(tiny_model_path, tmp_path).fit_transform(TEXTS + ["not fun"])
    assert len(list(tmp_path.rglob("*.npy"))) == len(set(TEXTS)) + 1


def test_other_weights_never_hit_the_same_entries(tiny_model_path, tmp_path):
    from skloes.utils._testing import make_tiny_model

    other = make_tiny_model(tmp_path / "other", seed=1)
    a = _hst(tiny_model_path, tmp_path / "c").fit_transform(TEXTS)
    b = _hst(other, tmp_path / "c").fit_transform(TEXTS)
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(b, _hst(other, None).fit_transform(TEXTS))


def test_corrupt_entry_is_recomputed(tiny_model_path, tmp_path):
    cold = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)
    for entry in tmp_path.rglob("*.npy"):
        entry.write_bytes(b"garbage")
    np.testing.assert_array_equal(_hst(tiny_model_path, tmp_path).fit_transform(TEXTS),
                                  cold)


def test_large_output_is_memory_mapped(tiny_model_path, tmp_path, monkeypatch):
    from skloes import _hidden_states

    monkeypatch.setattr(_hidden_states, "MEMMAP_MIN_BYTES", 1)
    plain = _hst(tiny_model_path, None, output="flat").fit_transform(TEXTS)
    hst = _hst(tiny_model_path, tmp_path)
    out = hst.fit_transform(TEXTS)
    assert isinstance(out, np.memmap) and not out.flags.writeable
    np.testing.assert_array_equal(
        np.asarray(out).transpose(1, 0, 2).reshape(len(TEXTS), -1), plain
    )
    again = _hst(tiny_model_path, tmp_path).fit(TEXTS)
    again._load = None  # a warm rerun must not need the model
    assert isinstance(again.transform(TEXTS), np.memmap)
    assert not any(p.name.endswith(".part") for p in tmp_path.rglob("*"))


def test_callable_pooling_bypasses_the_cache(tiny_model_path, tmp_path):
    _hst(tiny_model_path, tmp_path, pooling=lambda h, m: h[:, 0]).fit_transform(TEXTS)
    assert not os.listdir(tmp_path)
