"""The content-addressed hidden-states cache: keys, atomic .npy entries, memmap."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from skloes.core._cache import HiddenStatesCache, content_key, model_fingerprint

SETTINGS = {
    "model": "abc",
    "pooling": "mean",
    "max_length": 64,
    "layers": [0, 1],
    "dtype": "float32",
}


def test_entry_round_trip_is_an_npy_with_a_checksum(tmp_path):
    store = HiddenStatesCache(tmp_path, SETTINGS, (2, 3), "float32")
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    key = content_key("a text")
    assert store.read(key) is None
    store.write(key, value)
    np.testing.assert_array_equal(store.read(key), value)
    # Readable by numpy with pickling disabled: no pickle inside; numpy
    # ignores the trailer (magic + digest of the header and payload).
    np.testing.assert_array_equal(np.load(store.path(key), allow_pickle=False), value)
    data = store.path(key).read_bytes()
    assert data[-20:-16] == b"SKLC" and len(data) == 128 + value.nbytes + 20
    assert (store.root / "settings.json").exists()


def test_settings_change_the_folder(tmp_path):
    a = HiddenStatesCache(tmp_path, SETTINGS, (2, 3), "float32")
    for change in (
        {"pooling": "max"},
        {"max_length": 32},
        {"layers": [1]},
        {"model": "abd"},
        {"dtype": "float16"},
    ):
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

    from skloes.core import _cache

    def crash(src, dst):  # killed after the temporary file, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(_cache.os, "replace", crash)
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
    from skloes.models._testing import make_tiny_model

    other = make_tiny_model(tmp_path / "other", seed=1)
    same = tmp_path / "copy"
    shutil.copytree(tiny_model_path, same)
    assert model_fingerprint(tiny_model_path) == model_fingerprint(str(same))
    assert model_fingerprint(tiny_model_path) != model_fingerprint(other)


# ------------------------------------------------- through the transformer
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.rounding import assert_same_states  # noqa: E402

from skloes import HiddenStatesTransformer  # noqa: E402

TEXTS = ["a good movie", "a dull plot", "fun", "the story was great", "fun"]


def _hst(path, cache, **params):
    return HiddenStatesTransformer(path, device="cpu", cache=cache, **params)


def test_cached_transform_equals_uncached_and_reuses_entries(tiny_model_path, tmp_path):
    plain = _hst(tiny_model_path, None).fit_transform(TEXTS)
    cold = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)
    np.testing.assert_array_equal(cold, plain)  # all misses: the same batch
    entries = list(tmp_path.rglob("*.npy"))
    assert len(entries) == len(set(TEXTS))
    # Partial hit: only the new text is computed and stored.
    _hst(tiny_model_path, tmp_path).fit_transform(TEXTS + ["not fun"])
    assert len(list(tmp_path.rglob("*.npy"))) == len(set(TEXTS)) + 1


def test_other_weights_never_hit_the_same_entries(tiny_model_path, tmp_path):
    from skloes.models._testing import make_tiny_model

    other = make_tiny_model(tmp_path / "other", seed=1)
    a = _hst(tiny_model_path, tmp_path / "c").fit_transform(TEXTS)
    b = _hst(other, tmp_path / "c").fit_transform(TEXTS)
    assert not np.allclose(a, b)
    # exact: all misses, the same batch
    np.testing.assert_array_equal(b, _hst(other, None).fit_transform(TEXTS))


def test_corrupt_entry_is_recomputed(tiny_model_path, tmp_path):
    cold = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)
    for entry in tmp_path.rglob("*.npy"):
        entry.write_bytes(b"garbage")
    np.testing.assert_array_equal(  # exact: every entry recomputed, one batch
        _hst(tiny_model_path, tmp_path).fit_transform(TEXTS), cold
    )


def test_large_output_is_memory_mapped(tiny_model_path, tmp_path, monkeypatch):
    from skloes.extraction import _hidden_states

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


# ------------------------------------------- entries validated on read
def _entries(folder):
    return sorted(p for p in folder.rglob("*.npy") if "outputs" not in p.parts)


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize(
    "damage", ["empty", "nan", "inf", "wrong_shape", "header_only", "pickle"]
)
def test_damaged_entry_is_recomputed_and_overwritten(tiny_model_path, tmp_path, damage):
    cold = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)
    entry = _entries(tmp_path)[0]
    good = entry.read_bytes()
    if damage == "empty":
        entry.write_bytes(b"")
    elif damage == "header_only":
        entry.write_bytes(good[:128])
    elif damage in ("nan", "inf"):  # with a valid digest: the finite check
        from skloes.core import _cache

        value = np.load(entry)
        value[0, 0] = np.nan if damage == "nan" else np.inf
        body = good[: -20 - value.nbytes] + value.tobytes()
        sealed = _cache.sealed_key(entry.parent.parent.name, entry.stem)
        entry.write_bytes(body + _cache._trailer(sealed, body))
        assert len(entry.read_bytes()) == len(good)  # the header is valid
    elif damage == "wrong_shape":
        np.save(entry, np.zeros((1, 3), np.float32))
    else:
        np.save(entry, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for _ in range(2):  # the second run reads the rewritten entry
        # its text recomputed alone, not in the batch of four: up to rounding
        assert_same_states(_hst(tiny_model_path, tmp_path).fit_transform(TEXTS), cold)
    new = entry.read_bytes()
    assert new[:128] == good[:128] and len(new) == len(good)
    assert_same_states(
        np.load(entry), np.frombuffer(good[128:-20], np.float32).reshape(3, 8), axis=0
    )


# ---------------------------------------- write failures never lose work
@pytest.mark.cpu_sensitive
def test_write_failure_warns_once_and_returns_the_result(
    tiny_model_path, tmp_path, monkeypatch
):
    from skloes.core import _cache

    plain = _hst(tiny_model_path, None).fit_transform(TEXTS)
    calls = []

    def full(path, array):
        calls.append(path)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_cache, "_atomic_save", full)
    hst = _hst(tiny_model_path, tmp_path, batch_size=1)
    with pytest.warns(UserWarning, match="cache.*No space left") as record:
        out = hst.fit_transform(TEXTS)
    assert len([w for w in record if "cache" in str(w.message)]) == 1
    assert len(calls) == 1  # the cache is off for the rest of this transform
    assert_same_states(out, plain)  # batches of one, not one of four
    with pytest.warns(UserWarning, match="cache"):  # and one warning per transform
        hst.transform(TEXTS)


def test_read_only_warm_cache_serves_its_hits(tiny_model_path, tmp_path, monkeypatch):
    from skloes.core import _atomic, _cache

    warm = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", refuse)
    monkeypatch.setattr(_cache.Path, "mkdir", refuse)
    hst = _hst(tiny_model_path, tmp_path).fit(TEXTS)
    hst._load = None  # all hits: the model is never needed
    np.testing.assert_array_equal(hst.transform(TEXTS), warm)  # the stored bytes
    with pytest.warns(UserWarning, match="Permission denied"):  # a miss: computed
        out = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS + ["not fun"])
    np.testing.assert_array_equal(out[:, : len(TEXTS)], warm)  # hits: exact


@pytest.mark.cpu_sensitive
def test_cache_folder_deleted_mid_run(tiny_model_path, tmp_path, monkeypatch):
    from skloes.core import _cache

    plain = _hst(tiny_model_path, None).fit_transform(TEXTS)
    real = _cache.HiddenStatesCache.write

    def write_then_delete(self, key, array):
        real(self, key, array)
        shutil.rmtree(tmp_path / "c")

    monkeypatch.setattr(_cache.HiddenStatesCache, "write", write_then_delete)
    out = _hst(tiny_model_path, tmp_path / "c", batch_size=1).fit_transform(TEXTS)
    assert_same_states(out, plain)  # batches of one, not one of four


def test_memmap_output_failure_falls_back_to_memory(
    tiny_model_path, tmp_path, monkeypatch
):
    from skloes.core import _atomic
    from skloes.extraction import _hidden_states

    monkeypatch.setattr(_hidden_states, "MEMMAP_MIN_BYTES", 1)
    plain = _hst(tiny_model_path, None).fit_transform(TEXTS)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", full)
    with pytest.warns(UserWarning, match="No space left"):
        out = _hst(tiny_model_path, tmp_path).fit_transform(TEXTS)
    np.testing.assert_array_equal(out, plain)  # all misses: the same batch


# -------------------------------------- two processes fill one cache at once
_FILL = """
import sys
import numpy as np
from skloes import HiddenStatesTransformer
texts = [f"the movie {i} was good" for i in range(16)]
hst = HiddenStatesTransformer(sys.argv[1], device="cpu", cache=sys.argv[2],
                              batch_size=2)
np.save(sys.argv[3], hst.fit_transform(texts))
"""


@pytest.mark.cpu_sensitive
def test_two_processes_fill_one_cache(tiny_model_path, tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _FILL,
                tiny_model_path,
                str(tmp_path / "cache"),
                str(tmp_path / f"{i}.npy"),
            ],
            env=env,
        )
        for i in range(2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    a, b = np.load(tmp_path / "0.npy"), np.load(tmp_path / "1.npy")
    # each serves the other's entries as hits, so its own misses may batch
    # differently: equal up to rounding
    assert_same_states(a, b)
    entries = _entries(tmp_path / "cache")
    assert len(entries) == 16
    store_files = [np.load(p, allow_pickle=False) for p in entries]
    assert all(e.shape == (3, 8) and np.isfinite(e).all() for e in store_files)
    assert not any(p.name.endswith(".part") for p in (tmp_path / "cache").rglob("*"))
    texts = [f"the movie {i} was good" for i in range(16)]
    # batches of 32, not of 2
    assert_same_states(_hst(tiny_model_path, None).fit_transform(texts), a)


# ------------------------------------------------- size and pruning
def _fill(path, cache, texts, **params):
    return _hst(path, cache, **params).fit_transform(texts)


def test_cache_info_counts_settings_entries_and_bytes(tiny_model_path, tmp_path):
    from skloes import cache_info

    empty = cache_info(tmp_path / "none")
    assert (empty["n_entries"], empty["n_bytes"], empty["settings"]) == (0, 0, [])
    _fill(tiny_model_path, tmp_path, TEXTS)
    _fill(tiny_model_path, tmp_path, TEXTS, max_length=8)
    info = cache_info(tmp_path)
    assert info["n_entries"] == 2 * len(set(TEXTS))
    assert info["n_bytes"] == sum(
        p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()
    )
    assert len(info["settings"]) == 2
    lengths = sorted(s["settings"]["max_length"] for s in info["settings"])
    assert lengths == [8, 64]  # 512 capped at the tiny model's 64 positions
    assert all(s["n_entries"] == len(set(TEXTS)) for s in info["settings"])


def test_prune_older_than_and_max_bytes(tiny_model_path, tmp_path):
    from skloes import cache_info, prune_cache

    _fill(tiny_model_path, tmp_path, TEXTS)
    old = _entries(tmp_path)
    for p in old:
        os.utime(p, (1e9, 1e9))  # written in 2001
    _fill(tiny_model_path, tmp_path, ["brand new text"])
    stale = tmp_path / old[0].parent / ".tmp-interrupted.part"
    stale.write_bytes(b"half")
    os.utime(stale, (1e9, 1e9))
    removed = prune_cache(tmp_path, older_than=86400)
    assert removed["n_entries"] == len(old) and removed["n_bytes"] > 0
    assert not stale.exists() and len(_entries(tmp_path)) == 1
    # Size bound: oldest first, down to at most max_bytes.
    _fill(tiny_model_path, tmp_path, TEXTS, max_length=8)
    before = cache_info(tmp_path)["n_bytes"]
    prune_cache(tmp_path, max_bytes=before // 2)
    assert cache_info(tmp_path)["n_bytes"] <= before // 2
    prune_cache(tmp_path, max_bytes=0)
    assert cache_info(tmp_path)["n_entries"] == 0
    # A pruned cache still works (recomputes; all misses, the same batch).
    np.testing.assert_array_equal(
        _fill(tiny_model_path, tmp_path, TEXTS),
        _hst(tiny_model_path, None).fit_transform(TEXTS),
    )


def test_prune_validates_its_arguments(tmp_path):
    from skloes import prune_cache

    with pytest.raises(ValueError, match="`max_bytes`"):
        prune_cache(tmp_path, max_bytes=-1)
    with pytest.raises(ValueError, match="`older_than`"):
        prune_cache(tmp_path, older_than=-5)
    with pytest.raises(ValueError, match="`path`.*not a skloes cache"):
        (tmp_path / "file.txt").write_text("x")
        prune_cache(tmp_path / "file.txt", max_bytes=0)


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_an_entry_name_that_is_a_link_or_a_pipe_is_a_miss_never_followed(
    tmp_path, kind
):
    """Reading never opens it (a pipe would block); writing refuses it with
    the cache's warning and writes nothing outside the cache (issue 55)."""
    store = HiddenStatesCache(tmp_path / "c", SETTINGS, (2, 3), "float32")
    value = np.ones((2, 3), dtype=np.float32)
    store.write(content_key("other"), value)  # the settings folder exists
    key, outside = content_key("a text"), tmp_path / "outside.npy"
    other = HiddenStatesCache(tmp_path / "c", SETTINGS, (2, 3), "float32")
    other.write(key, value)
    outside.write_bytes(store.path(key).read_bytes())  # the very bytes
    store.path(key).unlink()
    if kind == "link":
        store.path(key).symlink_to(outside)
    elif kind == "dangling":
        store.path(key).symlink_to(tmp_path / "nowhere")
    else:
        os.mkfifo(store.path(key))
    assert store.read(key) is None
    before = outside.read_bytes()
    with pytest.warns(UserWarning, match="cannot write to the hidden-states cache"):
        store.write(key, 2 * value)
    assert outside.read_bytes() == before and not (tmp_path / "nowhere").exists()
    assert os.path.lexists(store.path(key))
