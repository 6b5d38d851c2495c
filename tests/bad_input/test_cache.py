"""The hidden-states cache (damaged, copied or stale entries are recomputed,
never served), settings changed after fit (they take effect or are refused,
never filed under another setting's key), a LOESSelector(memory=...) folder
(no pickle, no code runs, damaged results computed again) and its codec.

New in issue 34 (the section at the end): memory= with labels of every
dtype (str, object, bool, ints, floats, unicode, pandas columns) and the
labels every selector refuses (mixed types, bytes).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from _support.probes import torch_or_skip

torch = torch_or_skip()

from _support.outcomes import err, ok, snapshot, warns  # noqa: E402
from _support.probes import quiet_hst, tiny_probe  # noqa: E402
from _support.remote_models import no_code_ran  # noqa: E402
from _support.rounding import assert_same_states  # noqa: E402
from _support.texts import PROBE_NEW, PROBE_TEXTS, PROBE_Y  # noqa: E402

from skloes import LOESSelector  # noqa: E402

# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
RNG = np.random.RandomState(0)


# --------------------------------------------------------------------------
# The hidden-states cache: an interrupted write, damaged entries
# --------------------------------------------------------------------------
TEXTS = PROBE_TEXTS[:4]


@pytest.mark.cpu_sensitive
def test_hst_interrupted_cache_write_leaves_a_working_cache(tiny_model_path, tmp_path):
    """A run killed mid-write leaves a ``.part`` file: ignored, later pruned."""
    from skloes import prune_cache

    expected = quiet_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    entry = next(p for p in tmp_path.rglob("*.npy"))
    part = entry.parent / ".tmp-killed.part"
    part.write_bytes(entry.read_bytes()[:50])
    entry.unlink()
    # the lost text is recomputed alone, not in the batch of four
    assert_same_states(
        quiet_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS), expected
    )
    os.utime(part, (1e9, 1e9))
    prune_cache(tmp_path, older_than=10**12)
    assert not part.exists()


# --------------------------------------------------------------------------
# What was computed: a cache entry carries its dtype,
# shape and a digest of its key and payload, checked on read; a bad entry is
# recomputed and rewritten. A fitted extractor refuses changed or gone
# weights when it loads them again.
# --------------------------------------------------------------------------
def _other_entry(entry, good, entries):
    return next(e for e in entries if e != entry).read_bytes()


def _npy(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _assert_rewritten(entry, good):
    """The entry written again: its text recomputed alone (not in the batch of
    four that wrote ``good``), so the same header and the same values up to
    rounding; a hit on the next run."""
    import io

    new = entry.read_bytes()
    assert new[:128] == good[:128] and len(new) == len(good)
    assert_same_states(np.load(entry), np.load(io.BytesIO(good[:-20])), axis=0)


ENTRY_DAMAGE = {  # (entry path, its good bytes, every entry) -> new bytes
    "foreign_float64": lambda e, g, es: _npy(RNG.randn(3, 8) * 3),
    "garbage_behind_header": lambda e, g, es: g[:128]
    + RNG.randn(24).astype(np.float32).tobytes()
    + g[-20:],
    "plain_npy_float32": lambda e, g, es: _npy(RNG.randn(3, 8).astype(np.float32)),
    "float16_right_shape": lambda e, g, es: _npy(RNG.randn(3, 8).astype(np.float16)),
    "one_flipped_byte": lambda e, g, es: g[:140] + bytes([g[140] ^ 1]) + g[141:],
    "another_inputs_entry": _other_entry,
    "fortran_header": lambda e, g, es: g.replace(
        b"'fortran_order': False", b"'fortran_order': True "
    ),
    "bytes_after_trailer": lambda e, g, es: g + b"\x00" * 8,
    "transposed_header": lambda e, g, es: g.replace(b"(3, 8)", b"(8, 3)"),
}


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("damage", list(ENTRY_DAMAGE))
def test_cache_entry_damage_is_recomputed_and_rewritten(
    tiny_model_path, tmp_path, damage
):
    cold = quiet_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    entries = sorted(p for p in tmp_path.rglob("*.npy"))
    good = {e: e.read_bytes() for e in entries}
    entry = entries[0]
    entry.write_bytes(ENTRY_DAMAGE[damage](entry, good[entry], entries))
    # the damaged entry's text is recomputed alone: equal up to rounding
    ok(lambda out: assert_same_states(out, cold)).check(
        lambda: quiet_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    )
    _assert_rewritten(entry, good[entry])


def test_cache_memory_mapped_output_foreign_file_is_recomputed(
    tiny_model_path, tmp_path, monkeypatch
):
    from skloes.extraction import _hidden_states

    monkeypatch.setattr(_hidden_states, "MEMMAP_MIN_BYTES", 1)
    cold = np.array(quiet_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS))
    output = next(tmp_path.rglob("outputs/*.npy"))
    np.save(output, RNG.randn(*cold.shape).astype(np.float32))
    out = quiet_hst(tiny_model_path, cache=tmp_path).fit_transform(TEXTS)
    np.testing.assert_array_equal(out, cold)  # exact: every text a hit


# --------------------------------------------------------------------------
# LOESSelector(memory=...): a cached result that cannot be
# read is removed with a warning and computed again; a folder that cannot be
# used is an error naming `memory`.
# --------------------------------------------------------------------------
MEMORY_STACK = np.random.RandomState(7).randn(6, 40, 5)
MEMORY_Y = np.arange(40) % 2


def _loes_given(memory, k=3):
    return LOESSelector(n_layers_to_select=k, memory=memory, random_state=0)


def _cached_outputs(folder, function):
    """The stored results (no pickle since 0.3: .npz archives, see issue 26)."""
    prefix = {"_cached_run": "run-", "_cached_prepare": "prepared"}[function]
    return sorted(p for p in Path(folder).rglob(f"{prefix}*.npz"))


RESULT_DAMAGE = {  # bytes of a damaged stored result
    "truncated": lambda good: good[: len(good) // 2],
    "garbage": lambda good: RNG.bytes(len(good)),
    "empty": lambda good: b"",
    "another_object": lambda good: __import__("pickle").dumps(None),
    "another_objects_pickle": lambda good: __import__("pickle").dumps({"run": 1}),
}


@pytest.mark.parametrize("function", ["_cached_run", "_cached_prepare"])
@pytest.mark.parametrize("damage", list(RESULT_DAMAGE))
def test_memory_unreadable_result_is_computed_again(tmp_path, damage, function):
    k = 3 if function == "_cached_run" else 5  # 5: the 3-path cannot serve it
    expected = (
        _loes_given(None, k).fit(MEMORY_STACK, MEMORY_Y).get_support(indices=True)
    )
    _loes_given(str(tmp_path)).fit(MEMORY_STACK, MEMORY_Y)
    outputs = _cached_outputs(tmp_path, function)
    assert outputs
    for output in outputs:
        output.write_bytes(RESULT_DAMAGE[damage](output.read_bytes()))
    warns(
        r"`memory`.*could not be read.*computed again",
        then=lambda est: (
            np.testing.assert_array_equal(est.get_support(indices=True), expected)
        ),
    ).check(lambda: _loes_given(str(tmp_path), k).fit(MEMORY_STACK, MEMORY_Y))
    with warnings.catch_warnings():  # rewritten: the next fit reads it
        warnings.simplefilter("error")
        again = _loes_given(str(tmp_path), k).fit(MEMORY_STACK, MEMORY_Y)
    np.testing.assert_array_equal(again.get_support(indices=True), expected)


def test_memory_damaged_longer_path_serves_a_smaller_budget(tmp_path):
    expected = (
        _loes_given(None, k=2).fit(MEMORY_STACK, MEMORY_Y).get_support(indices=True)
    )
    _loes_given(str(tmp_path), k=4).fit(MEMORY_STACK, MEMORY_Y)
    for output in _cached_outputs(tmp_path, "_cached_run"):
        output.write_bytes(b"\x80\x04garbage")
    warns(
        r"`memory`",
        then=lambda est: np.testing.assert_array_equal(
            est.get_support(indices=True), expected
        ),
    ).check(lambda: _loes_given(str(tmp_path), k=2).fit(MEMORY_STACK, MEMORY_Y))


def _memory_then_a_file(tmp):
    import shutil

    import joblib

    memory = joblib.Memory(str(tmp / "m"), verbose=0)
    shutil.rmtree(tmp / "m")
    (tmp / "m").write_text("x")
    return memory


MEMORY_FOLDER_CASES = {
    "a_file": (
        lambda tmp: (tmp / "f").write_text("x") and str(tmp / "f"),
        r"`memory` folder .*is a file.*memory=None",
    ),
    "under_a_file": (
        lambda tmp: (tmp / "f").write_text("x") and str(tmp / "f" / "m"),
        r"`memory` folder .*is a file",
    ),
    "joblib_memory_folder_replaced_by_a_file": (
        _memory_then_a_file,
        r"`memory` folder .*is a file",
    ),
}


@pytest.mark.parametrize("case", list(MEMORY_FOLDER_CASES))
def test_memory_folder_that_cannot_be_used(tmp_path, case):
    make, needle = MEMORY_FOLDER_CASES[case]
    err(needle).check(lambda: _loes_given(make(tmp_path)).fit(MEMORY_STACK, MEMORY_Y))


def test_memory_folder_that_fails_to_write_names_memory(tmp_path, monkeypatch):
    """A full disk or a read-only folder (root ignores chmod: faked)."""
    from skloes.core import _atomic

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path))

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", full)
    err(r"`memory` folder .*No space left on device").check(
        lambda: _loes_given(str(tmp_path)).fit(MEMORY_STACK, MEMORY_Y)
    )


OTHER_SETTINGS = {
    "pooling": {"pooling": "max"},
    "max_length": {"max_length": 6},
    "layers": {"layers": [1, 2]},
    "dtype": {"dtype": "float16"},
    "precision": {"precision": "bfloat16"},
    "exclude_tokens": {"exclude_tokens": "special"},
}


def _entries(folder):
    return {p.stem: p for p in Path(folder).glob("*/*/*.npy")}


@pytest.mark.parametrize("setting", list(OTHER_SETTINGS))
def test_an_entry_copied_into_other_settings_is_recomputed(
    tiny_model_path, tmp_path, setting
):
    params = OTHER_SETTINGS[setting]
    cache = tmp_path / "c"
    quiet_hst(tiny_model_path, cache=cache).fit_transform(PROBE_TEXTS)
    expected = quiet_hst(tiny_model_path, **params).fit_transform(PROBE_TEXTS)
    other = quiet_hst(tiny_model_path, cache=cache, **params).fit(PROBE_TEXTS)
    root = other._store().root
    for key, entry in _entries(cache).items():  # planted by hand
        target = root / key[:2] / f"{key}.npy"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(entry, target)
    # exact: every entry refused, so the same batch as ``expected``
    np.testing.assert_array_equal(other.transform(PROBE_TEXTS), expected)
    np.testing.assert_array_equal(other.transform(PROBE_TEXTS), expected)  # rewritten


def test_a_memory_mapped_output_copied_into_other_settings_is_recomputed(
    tiny_model_path, tmp_path, monkeypatch
):
    from skloes.extraction import _hidden_states

    monkeypatch.setattr(_hidden_states, "MEMMAP_MIN_BYTES", 0)
    cache = tmp_path / "c"
    first = quiet_hst(tiny_model_path, cache=cache).fit(PROBE_TEXTS)
    first.transform(PROBE_TEXTS)
    expected = quiet_hst(tiny_model_path, pooling="max").fit_transform(PROBE_TEXTS)
    other = quiet_hst(tiny_model_path, cache=cache, pooling="max").fit(PROBE_TEXTS)
    source = first._store().output_path([])
    target = other._store().output_path([])
    for output in source.parent.glob("*.npy"):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(output, target.parent / output.name)
    np.testing.assert_array_equal(np.asarray(other.transform(PROBE_TEXTS)), expected)


def test_an_entry_of_an_older_skloes_is_recomputed(tiny_model_path, tmp_path):
    from skloes.core import _cache

    cache = tmp_path / "c"
    expected = quiet_hst(tiny_model_path, cache=cache).fit_transform(PROBE_TEXTS)
    for key, entry in _entries(cache).items():  # 0.2's trailer: key, no settings
        body = entry.read_bytes()[:-20]
        entry.write_bytes(body + _cache._trailer(key, body))
    hst = quiet_hst(tiny_model_path, cache=cache).fit(PROBE_TEXTS)
    assert all(hst._store().read(key) is None for key in _entries(cache))
    np.testing.assert_array_equal(hst.transform(PROBE_TEXTS), expected)


# Settings changed after the model loaded: they take effect (a reload) ...
TAKE_EFFECT = {  # (the setting at fit, the setting after the load)
    "precision_int8": ({}, {"precision": "int8"}),
    "precision_bfloat16": ({}, {"precision": "bfloat16"}),
    "precision_back_to_float32": ({"precision": "int8"}, {"precision": "float32"}),
    "dtype_float16": ({}, {"dtype": "float16"}),
    "device_auto_to_cpu": ({"device": "auto"}, {"device": "cpu"}),
    "batch_size": ({}, {"batch_size": 1}),
    "max_batch_tokens": ({}, {"max_batch_tokens": 8}),
}


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("with_cache", [False, True], ids=["no_cache", "cache"])
@pytest.mark.parametrize("setting", list(TAKE_EFFECT))
def test_a_setting_changed_after_load_takes_effect(
    tiny_model_path, tmp_path, setting, with_cache
):
    before, params = TAKE_EFFECT[setting]
    cache = tmp_path / "c" if with_cache else None
    hst = quiet_hst(tiny_model_path, cache=cache, **before).fit(PROBE_TEXTS)
    hst.transform(PROBE_TEXTS)
    assert hst._model is not None  # loaded
    hst.set_params(**params)
    expected = quiet_hst(tiny_model_path, **params).fit_transform(PROBE_TEXTS)
    # batch_size and max_batch_tokens (cache hits of the first batches among
    # them) change the batches: equal up to rounding
    assert_same_states(hst.transform(PROBE_TEXTS), expected)
    if with_cache:  # what a correctly built extractor reads back is right
        fresh = quiet_hst(tiny_model_path, cache=cache, **params).fit(PROBE_TEXTS)
        assert_same_states(fresh.transform(PROBE_TEXTS), expected)


def test_trust_remote_code_switched_off_after_load_is_honoured(remote, marker):
    model, _ = remote["config_auto_map"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        hst = quiet_hst(model, trust_remote_code=True).fit(PROBE_TEXTS)
        hst.transform(PROBE_TEXTS)
    hst.set_params(trust_remote_code=False)
    no_code_ran(
        marker,
        lambda: err(r"trust_remote_code").check(lambda: hst.transform(PROBE_NEW)),
    )


def test_precision_changed_on_an_unpickled_extractor_takes_effect(tiny_model_path):
    import pickle

    hst = quiet_hst(tiny_model_path).fit(PROBE_TEXTS)
    hst.transform(PROBE_TEXTS)
    back = pickle.loads(pickle.dumps(hst))
    back.set_params(precision="int8")
    expected = quiet_hst(tiny_model_path, precision="int8").fit_transform(PROBE_TEXTS)
    # exact: the same int8 model over the same batch
    np.testing.assert_array_equal(back.transform(PROBE_TEXTS), expected)


# ... or are refused until the next fit, naming the parameter.
FIXED = {
    "model": {"model": "/another/model"},
    "pooling": {"pooling": "max"},
    "exclude_tokens": {"exclude_tokens": "special"},
    "layers": {"layers": [1]},
    "layers_mask": {"layers": [True, False, True]},
    "max_length": {"max_length": 6},
}


@pytest.mark.parametrize("setting", list(FIXED))
def test_a_setting_fixed_at_fit_is_refused_after_fit(
    tiny_model_path, tmp_path, setting
):
    params = FIXED[setting]
    cache = tmp_path / "c"
    hst = quiet_hst(tiny_model_path, cache=cache).fit(PROBE_TEXTS)
    hst.transform(PROBE_TEXTS)
    written = snapshot(cache)
    hst.set_params(**params)
    name = next(iter(params))
    err(rf"`{name}` is .* but was .* at fit.*set `{name}` back").check(
        lambda: hst.transform(PROBE_NEW)
    )
    assert snapshot(cache) == written  # nothing filed under any key
    if setting != "model":  # the next fit takes it
        assert hst.fit(PROBE_TEXTS).transform(PROBE_NEW).shape[1] == 2


PROBE_FIXED = {
    "max_length": ({"max_length": 6}, r"`max_length`"),
    "pooling": ({"pooling": "max"}, r"`pooling`"),
    "model": ({"model": "/another/model"}, r"`model`"),
    "exclude_tokens": (
        {"extractor_params": {"exclude_tokens": "special"}},
        r"`extractor_params\['exclude_tokens'\]`",
    ),
}


@pytest.mark.parametrize("setting", list(PROBE_FIXED))
def test_a_probe_refuses_a_setting_fixed_at_fit(tiny_model_path, setting):
    params, needle = PROBE_FIXED[setting]
    probe = tiny_probe(tiny_model_path).fit(PROBE_TEXTS, PROBE_Y)
    probe.set_params(**params)
    err(rf"LayerProbeClassifier: {needle} is .* at fit").check(
        lambda: probe.predict(PROBE_NEW)
    )


PROBE_TAKE_EFFECT = {
    "precision": {"extractor_params": {"precision": "int8"}},
    "dtype": {"extractor_params": {"dtype": "float16"}},
    "batch_size": {"batch_size": 1},
    "device": {"device": "auto"},
}


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("setting", list(PROBE_TAKE_EFFECT))
def test_a_probe_honours_a_setting_changed_after_fit(tiny_model_path, setting):
    params = PROBE_TAKE_EFFECT[setting]
    probe = tiny_probe(tiny_model_path).fit(PROBE_TEXTS, PROBE_Y)
    probe.predict(PROBE_NEW)
    probe.set_params(**params)
    assert probe.predict(PROBE_NEW).shape == (2,)  # gives the extractor the settings
    features = probe.pipeline_[0].transform(PROBE_NEW)
    expected = quiet_hst(
        tiny_model_path,
        max_length=128,
        layers=probe.selected_layers_.tolist(),
        **params.get("extractor_params", {}),
    ).fit_transform(PROBE_NEW)
    assert_same_states(features, expected)  # batch_size=1: other batches


class Planted:
    """A pickle that writes the marker when anything unpickles it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('unpickled')",))


def _loes(memory, k=3, **params):
    from skloes import LOESSelector

    memory = None if memory is None else str(memory)
    return LOESSelector(n_layers_to_select=k, memory=memory, random_state=0, **params)


def _stored(folder, prefix):
    return sorted(Path(folder).rglob(f"skloes_loes/*/{prefix}*.npz"))


def _state_naming(name):  # a well-formed state that names another class
    import io

    from skloes.core._safe_state import _FORMAT

    tree = {"format": _FORMAT, "root": {"o": name, "state": {}}}
    buffer = io.BytesIO()
    np.savez(
        buffer, **{"state.json": np.frombuffer(json.dumps(tree).encode(), np.uint8)}
    )
    return buffer.getvalue()


def _object_array_npz():
    import io

    buffer = io.BytesIO()
    np.savez(buffer, **{"state.json": np.array([Planted("/nowhere")], dtype=object)})
    return buffer.getvalue()


PLANTED_RESULTS = {  # what a hostile or careless writer puts in the folder
    "pickle_that_runs_code": lambda m, good: __import__("pickle").dumps(Planted(m)),
    "object_array_in_npz": lambda m, good: _object_array_npz(),
    "state_naming_os_system": lambda m, good: _state_naming("posix.system"),
    "state_naming_a_skloes_estimator": lambda m, good: _state_naming(
        "skloes.selection._loes._estimators.LOESSelector"
    ),
    "truncated": lambda m, good: good[: len(good) // 2],
    "empty": lambda m, good: b"",
    "garbage": lambda m, good: np.random.RandomState(0).bytes(len(good)),
}


@pytest.mark.parametrize("prefix", ["run-", "prepared"])
@pytest.mark.parametrize("plant", list(PLANTED_RESULTS))
def test_memory_results_never_run_code(tmp_path, marker, plant, prefix):
    k = 3 if prefix == "run-" else 5  # 5: the 3-path cannot serve it
    expected = _loes(None, k).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    _loes(tmp_path).fit(MEMORY_STACK, MEMORY_Y)
    stored = _stored(tmp_path, prefix)
    assert stored
    for file in stored:
        file.write_bytes(PLANTED_RESULTS[plant](marker, file.read_bytes()))

    def fit():
        est = _loes(tmp_path, k).fit(MEMORY_STACK, MEMORY_Y)
        np.testing.assert_array_equal(est.selection_order_, expected)

    no_code_ran(
        marker,
        lambda: warns(r"`memory`.*could not be read.*computed again").check(fit),
    )


def test_memory_never_reads_joblibs_pickles(tmp_path, marker):
    """Paths cached by 0.2 through joblib sit in <memory>/joblib/: unread."""
    expected = _loes(None).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    import joblib

    old = joblib.Memory(tmp_path, verbose=0).cache(lambda x: x)
    old(1)  # joblib's own layout, with an output.pkl
    for output in tmp_path.rglob("output.pkl"):
        output.write_bytes(__import__("pickle").dumps(Planted(marker)))
    assert list(tmp_path.rglob("output.pkl"))
    no_code_ran(
        marker,
        lambda: np.testing.assert_array_equal(
            _loes(tmp_path).fit(MEMORY_STACK, MEMORY_Y).selection_order_, expected
        ),
    )


def test_a_memory_result_copied_from_other_inputs_is_not_served(tmp_path):
    other_stack = np.random.RandomState(8).randn(6, 40, 5)
    expected = _loes(None).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    _loes(tmp_path / "a").fit(other_stack, MEMORY_Y)
    _loes(tmp_path / "b").fit(MEMORY_STACK, MEMORY_Y)
    for source, target in zip(
        _stored(tmp_path / "a", "run-"), _stored(tmp_path / "b", "run-"), strict=True
    ):
        shutil.copy(source, target)  # the other inputs' path, under this key
    warns(
        r"`memory`.*belongs to other inputs",
        lambda est: np.testing.assert_array_equal(est.selection_order_, expected),
    ).check(lambda: _loes(tmp_path / "b").fit(MEMORY_STACK, MEMORY_Y))


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="robust"),
        pytest.param({"variant": "reference"}, id="reference"),
        pytest.param({"task": "label_free"}, id="label_free"),
        pytest.param({"task": "regression"}, id="regression"),
    ],
)
def test_memory_round_trip_gives_the_selection_of_no_memory(tmp_path, params):
    y = MEMORY_Y.astype(float) if params.get("task") == "regression" else MEMORY_Y
    y = None if params.get("task") == "label_free" else y
    plain = _loes(None, 3, **params).fit(MEMORY_STACK, y)
    for _ in range(2):  # written, then read back: exact, the same computation
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            est = _loes(tmp_path, 3, **params).fit(MEMORY_STACK, y)
        np.testing.assert_array_equal(est.selection_order_, plain.selection_order_)
        for key, value in est.scores_.items():
            np.testing.assert_array_equal(value, plain.scores_[key])
    assert not list(tmp_path.rglob("*.pkl"))


# The codec itself: builtins, arrays and the classes given, nothing else.
class _Node:
    pass


def _nested():
    shared = np.arange(6.0).reshape(2, 3)
    node = _Node()
    node.values, node.same, node.kind = shared, shared, _Node
    node.table = {1: "one", (2, 3): [np.float32(1.5), np.int64(7), np.bool_(True)]}
    node.inner = _Node()
    node.inner.parent_values = shared
    node.flags = (None, True, float("nan"), -0.0, float("inf"))
    return node


def test_safe_state_keeps_object_arrays_of_plain_values():
    """Class labels from a pandas column are an object array: kept as values."""
    from skloes.core._safe_state import dumps_state, loads_state

    labels = np.array(["fresh", 2, None, True, 1.5, np.str_("x")], dtype=object)
    grid = labels.reshape(2, 3)
    back = loads_state(dumps_state({"y": labels, "grid": grid}, []), [])
    assert back["y"].dtype == object and back["grid"].shape == (2, 3)
    assert back["y"].tolist() == ["fresh", 2, None, True, 1.5, "x"]
    assert [type(v) for v in back["y"]] == [str, int, type(None), bool, float, str]


def test_safe_state_round_trip_keeps_values_types_and_identities():
    from skloes.core._safe_state import dumps_state, loads_state

    back = loads_state(dumps_state(_nested(), [_Node]), [_Node])
    assert isinstance(back, _Node) and back.kind is _Node
    np.testing.assert_array_equal(back.values, np.arange(6.0).reshape(2, 3))
    assert back.values is back.same is back.inner.parent_values
    assert back.table[1] == "one"
    items = back.table[(2, 3)]
    assert [type(v) for v in items] == [np.float32, np.int64, np.bool_]
    assert back.flags[:2] == (None, True) and np.isnan(back.flags[2])
    assert str(back.flags[3]) == "-0.0" and back.flags[4] == float("inf")


SAFE_STATE_REFUSALS = [
    (
        "class_not_given",
        lambda d, l: l(d(_nested(), [_Node]), []),
        r"may not be constructed",
    ),
    (
        "pickle_bytes",
        lambda d, l: l(__import__("pickle").dumps({"a": 1}), [_Node]),
        r"not a saved state",
    ),
    (
        "object_array",
        lambda d, l: l(_object_array_npz(), [_Node]),
        r"not a saved state",
    ),
    ("empty", lambda d, l: l(b"", [_Node]), r"not a saved state"),
    (
        "truncated",
        lambda d, l: l(d(_nested(), [_Node])[:100], [_Node]),
        r"not a saved state",
    ),
    (
        "names_a_builtin",
        lambda d, l: l(_state_naming("builtins.exec"), [_Node]),
        r"may not be constructed",
    ),
    (
        "dump_unknown_object",
        lambda d, l: d(object(), [_Node]),
        r"cannot be saved as a state",
    ),
    (
        "dump_object_array",  # plain values (labels) are kept since issue 34
        lambda d, l: d(np.array([1, object()], dtype=object), []),
        r"an array holding a object cannot be saved as a state",
    ),
    (
        "dump_unknown_class_ref",
        lambda d, l: d(dict, []),
        r"class builtins\.dict cannot be saved",
    ),
]


@pytest.mark.parametrize(
    "run, needle", [pytest.param(r, n, id=i) for i, r, n in SAFE_STATE_REFUSALS]
)
def test_safe_state_refuses_what_it_did_not_write(run, needle):
    from skloes.core._safe_state import dumps_state, loads_state

    err(needle).check(lambda: run(dumps_state, loads_state))


def test_minilm_int8_set_after_load_is_computed_in_int8(
    minilm_path, real_texts, tmp_path
):
    """The issue's case: int8 set after the model loaded was computed in
    float32 and cached under the int8 key (a max difference of 0.131)."""
    texts = real_texts[0][:16]
    cache = tmp_path / "c"
    hst = quiet_hst(minilm_path, max_length=32, cache=cache).fit(texts)
    float32 = hst.transform(texts)
    hst.set_params(precision="int8")
    changed = hst.transform(texts)
    fresh = quiet_hst(minilm_path, max_length=32, precision="int8").fit_transform(texts)
    np.testing.assert_allclose(changed, fresh, rtol=1e-5, atol=1e-5)
    assert np.abs(changed - float32).max() > 1e-3  # int8 moves the features
    reader = quiet_hst(minilm_path, max_length=32, cache=cache, precision="int8").fit(
        texts
    )
    np.testing.assert_allclose(reader.transform(texts), fresh, rtol=1e-5, atol=1e-5)


def test_memory_takes_a_pathlib_folder(tmp_path):
    expected = _loes(None).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    from skloes import LOESSelector

    est = LOESSelector(n_layers_to_select=3, memory=tmp_path, random_state=0)
    np.testing.assert_array_equal(
        est.fit(MEMORY_STACK, MEMORY_Y).selection_order_, expected
    )
    assert _stored(tmp_path, "run-")


# ==========================================================================
# New in issue 34: memory= with labels of every dtype
# ==========================================================================
def _labels(kind):
    pd = pytest.importorskip("pandas") if kind.startswith("pandas") else None
    y = MEMORY_Y
    words = np.where(y == 0, "neg", "pos")
    return {
        "str": words,
        "object_str": words.astype(object),
        "bool": y.astype(bool),
        "int8": y.astype(np.int8),
        "int_huge": y.astype(np.int64) + 10**15,
        "negative_ints": y - 5,
        "float_labels": y + 0.5,
        "unicode": np.where(y == 0, "négatif", "позитив"),
        "pandas_series": pd.Series(words, name="label") if pd else None,
        "pandas_category": pd.Series(words, dtype="category") if pd else None,
        "pandas_string": pd.Series(words, dtype="string") if pd else None,
        "object_ints": y.astype(object),
    }[kind]


MEMORY_LABELS = [
    "str",
    "object_str",
    "bool",
    "int8",
    "int_huge",
    "negative_ints",
    "float_labels",
    "unicode",
    "pandas_series",
    "pandas_category",
    "pandas_string",
    "object_ints",
]


@pytest.mark.parametrize("kind", MEMORY_LABELS)
def test_memory_with_labels_of_every_dtype(tmp_path, kind):
    """Written, then read back: the selection of memory=None, no warning (a
    pandas label column failed with a raw TypeError, issue 34)."""
    y = _labels(kind)
    expected = _loes(None).fit(MEMORY_STACK, y).selection_order_
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            got = _loes(tmp_path).fit(MEMORY_STACK, y).selection_order_
        np.testing.assert_array_equal(got, expected)
    assert _stored(tmp_path, "run-") and not list(tmp_path.rglob("*.pkl"))


@pytest.mark.parametrize(
    "y, needle",
    [
        pytest.param(
            np.array([0, "a"] * 20, dtype=object),
            r"`y` mixes text and number labels \(0 at row 0, 'a' at row 1\)",
            id="mixed_int_str",
        ),
        pytest.param(
            np.array([b"n", b"p"] * 20),
            r"`y` holds bytes labels; decode them to str",
            id="bytes",
        ),
    ],
)
def test_memory_refuses_the_labels_the_selector_refuses(tmp_path, y, needle):
    err(needle).check(lambda: _loes(tmp_path).fit(MEMORY_STACK, y))
    assert not _stored(tmp_path, "run-")


# --------------------------------------------------------------------------
# New in issue 55: a cached LOES result whose arrays are not what was written
# (another dtype, another shape, a NaN, indices out of range) is never used:
# each array's dtype, shape and finiteness are recorded beside it and checked
# on reading, and a path or preparation is checked against the stack it is
# for (an edit that keeps the record too). Either is computed again.
# --------------------------------------------------------------------------
def _edit_state(data, attrs, change, record=False):
    """``data`` (a stored result) with the array at ``attrs`` (the result's
    attributes, in turn) replaced by ``change(array)``; ``record``: the
    array's record is rewritten to match, as a careful editor would."""
    import io

    from skloes.core._safe_state import _array_record

    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    tree = json.loads(members["state.json"].tobytes())
    node = dict(tree["root"]["d"])["result"]
    for attr in attrs:
        node = node["state"][attr] if "state" in node else dict(node["d"])[attr]
    members[node["a"]] = new = change(members[node["a"]])
    if record:
        node["m"] = _array_record(new)
    members["state.json"] = np.frombuffer(json.dumps(tree).encode(), np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **members)
    return buffer.getvalue()


def _nan_first(a):
    a = a.copy()
    a.flat[0] = np.nan
    return a


ARRAY_EDITS = {  # (file prefix, attributes, change)
    "order_as_floats": ("run-", ["selection_order"], lambda a: a.astype(float)),
    "order_out_of_range": ("run-", ["selection_order"], lambda a: a + 100),
    "order_repeats_a_layer": ("run-", ["selection_order"], lambda a: a * 0),
    "order_as_int32": ("run-", ["selection_order"], lambda a: a.astype(np.int32)),
    "layer_mean_nan": ("run-", ["layer_mean"], _nan_first),
    "layer_mean_transposed": ("run-", ["layer_mean"], lambda a: a.T.copy()),
    "residual_nan": ("run-", ["residual"], _nan_first),
    "step_fits_one_step_short": ("run-", ["step_fits"], lambda a: a[1:]),
    "scores_a_row_short": ("run-", ["scores", "score"], lambda a: a[1:]),
    "calibration_out_of_range": (
        "run-",
        ["calibration_indices"],
        lambda a: a + 1000,
    ),
    "prepared_mean_nan": ("prepared", ["prep", "layer_mean"], _nan_first),
    "prepared_mean_short": ("prepared", ["prep", "layer_mean"], lambda a: a[:-1]),
    "prepared_rows_out_of_range": ("prepared", ["prep", "rows"], lambda a: a + 99),
    "prepared_Y_short": ("prepared", ["prep", "Y"], lambda a: a[:-1]),
    "prepared_Y_nan": ("prepared", ["prep", "Y"], _nan_first),
}


@pytest.mark.parametrize("record", [False, True], ids=["edited", "record_too"])
@pytest.mark.parametrize("edit", list(ARRAY_EDITS))
def test_memory_results_with_wrong_arrays_are_computed_again(tmp_path, edit, record):
    prefix, attrs, change = ARRAY_EDITS[edit]
    k = 3 if prefix == "run-" else 5  # 5: the 3-path cannot serve it
    plain = _loes(None, k).fit(MEMORY_STACK, MEMORY_Y)
    _loes(tmp_path).fit(MEMORY_STACK, MEMORY_Y)
    (file,) = _stored(tmp_path, prefix)
    edited = _edit_state(file.read_bytes(), attrs, change, record)
    file.write_bytes(edited)
    from skloes.core._safe_state import StateError, _array_record, loads_state
    from skloes.selection._loes._memory import RESULT_CLASSES

    array = _loes_array(_loes(tmp_path / "again"), attrs, prefix)
    recorded = _array_record(array)
    kept = _array_record(change(array))
    other = kept[:2] != recorded[:2] or (recorded[2] and not kept[2])

    def same(est):
        np.testing.assert_array_equal(est.selection_order_, plain.selection_order_)
        for key, value in est.scores_.items():
            np.testing.assert_array_equal(value, plain.scores_[key])
        # an extension of the cached 3-path adds its fits back: rounding
        np.testing.assert_allclose(est.residual_, plain.residual_, atol=1e-12)

    outcome = warns(r"`memory`.*could not be read.*computed again", same)
    if edit == "order_as_int32" and record:  # int32 indices are as good
        outcome = ok(same)
    outcome.check(lambda: _loes(tmp_path, k).fit(MEMORY_STACK, MEMORY_Y))
    if other and not record:  # the record names the member, as it was written
        with pytest.raises(StateError, match=r"member 'a\d+' is .*written as"):
            loads_state(edited, RESULT_CLASSES)


def _loes_array(est, attrs, prefix):
    """The array at ``attrs`` of the result ``est`` stores under ``prefix``."""
    from skloes.core._safe_state import loads_state
    from skloes.selection._loes._memory import RESULT_CLASSES

    est.fit(MEMORY_STACK, MEMORY_Y)
    (file,) = _stored(est.memory, prefix)
    value = loads_state(file.read_bytes(), RESULT_CLASSES)["result"]
    for attr in attrs:
        value = value[attr] if isinstance(value, dict) else getattr(value, attr)
    return value


def test_safe_state_checks_each_array_against_its_record():
    from skloes.core._safe_state import StateError, dumps_state, loads_state

    state = {"x": np.arange(4.0), "i": np.arange(3), "b": np.ones(2, bool)}
    back = loads_state(dumps_state(state, []), [])
    assert all(np.array_equal(back[k], v) for k, v in state.items())
    nan_ok = {"x": np.array([np.nan, 1.0])}  # written with a NaN: read with it
    assert np.isnan(loads_state(dumps_state(nan_ok, []), [])["x"][0])
    for key, change in [
        ("x", lambda a: a.astype(np.float32)),
        ("x", lambda a: a.reshape(2, 2)),
        ("x", _nan_first),
        ("i", lambda a: a.astype(float)),
        ("b", lambda a: a.astype(np.uint8)),
    ]:
        data = dumps_state({"result": state}, [])
        edited = _edit_state(data, [key], change)
        with pytest.raises(StateError, match=r"member 'a\d+' is .* written as"):
            loads_state(edited, [])
