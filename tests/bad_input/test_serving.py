"""Exported folders (save_probe(..., export=...)) as load_exported, load_probe,
open_exported and ``skloes predict`` read them, and ExportedProbe's methods.

Every case here is new in issue 34 (the newest surface, tried as a new user
would): an ``export`` entry edited field by field, the graph, tokenizer and
head tampered with, missing, swapped or replaced, the card and the estimator
deleted, and ExportedProbe's texts, ``tokenize``, ``predict_with_proba``,
``predict_proba`` and ``batch_size``.

Outcomes (``tests/_support/outcomes.py``): ``err`` (one line naming what is
wrong), ``ok`` (a correct result); loading never writes a file (each case
snapshots the folder).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from _support.outcomes import cli_error, err, ok, snapshot  # noqa: E402
from _support.rounding import (  # noqa: E402
    TINY_BERT_TERMS,
    assert_equal_up_to_rounding,
    head_scale,
)
from _support.texts import PROBE_NEW, PROBE_TEXTS  # noqa: E402
from sklearn.svm import LinearSVC  # noqa: E402

from skloes import probe_folder  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    LayerProbeRegressor,
    load_probe,
    save_probe,
)
from skloes.selection import LastKSelector  # noqa: E402
from skloes.serving import ExportedProbe, load_exported, open_exported  # noqa: E402

LABELS = ["yes", "no", "yes", "no"] * 3
NEW = [*PROBE_NEW, "fun"]


@pytest.fixture(scope="module")
def exported(tiny_model_path, tmp_path_factory):
    """name -> (fitted probe, exported folder): a classifier in float32 and in
    int8, a regressor and a classifier whose head gives no probabilities."""
    root = tmp_path_factory.mktemp("exported")

    def probe(cls, layers, y, **params):
        selector = LastKSelector(n_layers_to_select=layers)
        return cls(tiny_model_path, device="cpu", selector=selector, **params).fit(
            PROBE_TEXTS, y
        )

    made = {
        "clf": (probe(LayerProbeClassifier, 2, LABELS), "onnx"),
        "clf8": (probe(LayerProbeClassifier, 2, LABELS), "onnx-int8"),
        "other": (probe(LayerProbeClassifier, 1, LABELS), "onnx"),
        "reg": (probe(LayerProbeRegressor, 1, np.arange(12.0)), "onnx"),
        "svc": (probe(LayerProbeClassifier, 1, LABELS, estimator=LinearSVC()), "onnx"),
    }
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # int8 agreement notes
        for name, (est, export) in made.items():
            folder = save_probe(
                est, root / name, export=export, check_texts=PROBE_TEXTS
            )
            out[name] = (est, folder)
    return out


@pytest.fixture
def copy_of(exported, tmp_path):
    def copy(name="clf"):
        return shutil.copytree(exported[name][1], tmp_path / f"copy_{name}")

    return copy


def _manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def _write_manifest(folder, manifest):
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))


def _loads_nothing_written(folder, run, outcome):
    """``outcome`` of ``run``; the folder is unchanged afterwards."""
    before = snapshot(folder)
    outcome.check(run)
    assert snapshot(folder) == before


# --------------------------------------------------------------------------
# The export entry edited by hand: refused by field, or by its digest when the
# new value is valid but not what the save wrote and checked
# --------------------------------------------------------------------------
def _set(*path, value=None, drop=False):
    def edit(manifest):
        node = manifest["export"]
        for key in path[:-1]:
            node = node[key]
        if drop:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return edit


DIGEST = r"manifest\.json has an `export` entry that is not the one the save wrote"
EDITS = [  # (id, edit(manifest), needle)
    ("head_kind_to_linear", _set("head", "kind", value="linear"), r"export\.head"),
    (
        "classes_reversed",
        _set("head", "classes", "values", value=["yes", "no"]),
        DIGEST,
    ),
    (
        "classes_three",
        _set("head", "classes", "values", value=["a", "b", "c"]),
        DIGEST,
    ),
    ("classes_one", _set("head", "classes", "values", value=["yes"]), "classes"),
    (
        "classes_nested",
        _set("head", "classes", "values", value=[["no"], ["yes"]]),
        r"export\.head\.classes",
    ),
    (
        "classes_dtype_int",
        _set("head", "classes", "dtype", value="int64"),
        r"export\.head\.classes",
    ),
    (
        "classes_dtype_bogus",
        _set("head", "classes", "dtype", value="bogus"),
        r"export\.head\.classes",
    ),
    ("classes_dropped", _set("head", "classes", value=None), r"export\.head\.classes"),
    ("layers_fewer", _set("layers", value=[2]), DIGEST),
    ("layers_more", _set("layers", value=[0, 1, 2]), DIGEST),
    ("layers_other", _set("layers", value=[0, 2]), DIGEST),
    ("layers_beyond_the_model", _set("layers", value=[1, 99]), DIGEST),
    ("pooling_other", _set("pooling", value="max"), DIGEST),
    ("exclude_tokens_other", _set("exclude_tokens", value="special"), DIGEST),
    ("max_length_1", _set("tokenizer", "max_length", value=1), DIGEST),
    ("max_length_huge", _set("tokenizer", "max_length", value=10**9), DIGEST),
    ("padding_left", _set("tokenizer", "padding_side", value="left"), DIGEST),
    ("pad_token_other", _set("tokenizer", "pad_token_id", value=5), DIGEST),
    ("batch_size_1", _set("batching", "batch_size", value=1), DIGEST),
    ("max_batch_tokens_1", _set("batching", "max_batch_tokens", value=1), DIGEST),
    ("optimized_dropped", _set("graph", "optimized", drop=True), DIGEST),
    ("weight_max_huge", _set("graph", "weight_max", value=500), r"weight_max"),
    ("weight_max_text", _set("graph", "weight_max", value="64"), r"weight_max"),
    ("graph_inputs_edited", _set("graph", "inputs", value=["input_ids"]), DIGEST),
    ("check_edited", _set("check", "same_prediction", value=0.1), DIGEST),
    ("check_dropped", _set("check", drop=True), DIGEST),
    ("runtime_edited", _set("runtime", value="tensorrt"), DIGEST),
    ("digest_dropped", _set("digest", drop=True), DIGEST),
    ("digest_other", _set("digest", value="0" * 64), DIGEST),
    ("format_as_text", _set("format", value="1"), r"format '1'; this skloes reads"),
    ("precision_other", _set("precision", value="int8"), r"export\.graph\.file"),
    (
        "export_null",
        lambda m: m.update(export=None),
        r"holds no exported graph",
    ),
    ("export_empty", lambda m: m.update(export={}), r"format None"),
]


@pytest.mark.parametrize(
    "edit, needle", [pytest.param(e, n, id=i) for i, e, n in EDITS]
)
def test_an_edited_export_entry_is_refused_by_field(copy_of, edit, needle):
    folder = copy_of()
    manifest = _manifest(folder)
    edit(manifest)
    _write_manifest(folder, manifest)
    _loads_nothing_written(
        folder,
        lambda: load_exported(folder),
        err(re.escape(str(folder)) + ".*" + needle),
    )


EVERY_READER = {
    "load_probe": lambda folder: load_probe(folder),
    "load_probe_onnx": lambda folder: load_probe(folder, runtime="onnx"),
    "open_exported": lambda folder: open_exported(
        folder,
        probe_folder.export_entry(_manifest(folder), folder, "me"),
        owner="me",
    ),
}


@pytest.mark.parametrize("reader", list(EVERY_READER))
@pytest.mark.parametrize("edit", ["head_kind_to_linear", "classes_reversed"])
def test_every_reader_refuses_an_edited_entry(copy_of, reader, edit):
    """The edits that served raw scores as labels, or swapped the labels."""
    folder = copy_of()
    manifest = _manifest(folder)
    dict((i, e) for i, e, _ in EDITS)[edit](manifest)
    _write_manifest(folder, manifest)
    err(r"export\.(head|digest)|`export` entry").check(
        lambda: EVERY_READER[reader](folder)
    )


def test_skloes_predict_refuses_an_edited_entry(copy_of, tmp_path, capsys):
    folder = copy_of()
    manifest = _manifest(folder)
    manifest["export"]["tokenizer"]["max_length"] = 2
    _write_manifest(folder, manifest)
    data = tmp_path / "new.csv"
    data.write_text("text\n" + "\n".join(NEW) + "\n")
    cli_error(["predict", str(folder), "--data", str(data)], r"`export` entry", capsys)


@pytest.mark.parametrize("runtime", ["auto", "onnx", "torch"])
def test_every_runtime_refuses_an_edited_entry(copy_of, runtime):
    """The manifest is read whole by every reader: runtime="torch" does not
    serve from the entry, but a folder edited by hand is not the one saved."""
    folder = copy_of()
    manifest = _manifest(folder)
    manifest["export"]["layers"] = [0]
    _write_manifest(folder, manifest)
    err(DIGEST).check(lambda: load_probe(folder, runtime=runtime))


# --------------------------------------------------------------------------
# The graph, the tokenizer and the head: tampered, missing, swapped, replaced
# --------------------------------------------------------------------------
def _flip_last_byte(folder, name, exported):
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


def _truncate(folder, name, exported):
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) // 2])


def _delete(folder, name, exported):
    (folder / name).unlink()


def _a_folder(folder, name, exported):
    (folder / name).unlink()
    (folder / name).mkdir()


def _from_another_export(folder, name, exported):
    shutil.copy(exported["other"][1] / name, folder / name)


def _garbage_rehashed(folder, name, exported):
    """A tamperer who also writes the file's hash, and seals the entry."""
    (folder / name).write_bytes(b"garbage bytes, not a " + name.encode())
    manifest = _manifest(folder)
    part = {"graph.onnx": "graph", "tokenizer.json": "tokenizer", "head.npz": "head"}
    digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    manifest["export"][part[name]]["sha256"] = digest
    probe_folder.seal_export(manifest["export"])
    _write_manifest(folder, manifest)


FILE_DAMAGE = {  # damage -> the needle of the error (it names the file)
    "flipped_byte": (_flip_last_byte, r"{name} in .* does not hash as when"),
    "truncated": (_truncate, r"{name} in .* does not hash as when"),
    "deleted": (_delete, r"{name} \(recorded in manifest\.json\) is missing"),
    "a_folder": (_a_folder, r"{name} \(recorded in manifest\.json\) is not a file"),
    "from_another_export": (_from_another_export, r"{name} in .* does not hash"),
    "garbage_rehashed": (_garbage_rehashed, r"{name} is not a readable"),
}


@pytest.mark.parametrize("name", ["graph.onnx", "tokenizer.json", "head.npz"])
@pytest.mark.parametrize("damage", list(FILE_DAMAGE))
def test_a_damaged_export_file_is_one_line_naming_it(exported, copy_of, damage, name):
    folder = copy_of()
    make, needle = FILE_DAMAGE[damage]
    if damage == "from_another_export":
        same = (exported["other"][1] / name).read_bytes() == (
            folder / name
        ).read_bytes()
        if same:  # the tokenizer of one model is the same file: it serves
            make(folder, name, exported)
            ok(lambda p: p.predict(NEW)).check(lambda: load_exported(folder))
            return
    make(folder, name, exported)
    needle = (
        f"(?=.*{re.escape(str(folder))})(?=.*{needle.format(name=re.escape(name))})"
    )
    _loads_nothing_written(folder, lambda: load_exported(folder), err(needle))


def test_a_graph_of_the_other_precision_is_refused(exported, copy_of):
    folder = copy_of()
    shutil.copy(exported["clf8"][1] / "graph-int8.onnx", folder / "graph.onnx")
    err(r"graph\.onnx in .* does not hash").check(lambda: load_exported(folder))


# --------------------------------------------------------------------------
# The card and the estimator: one rule for every reader of the folder
# --------------------------------------------------------------------------
READERS = {
    "load_exported": lambda folder: load_exported(folder),
    "load_probe": lambda folder: load_probe(folder),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_folder_without_its_card_still_serves(exported, copy_of, reader):
    """The card documents the probe; nothing reads it to predict."""
    folder = copy_of()
    (folder / "README.md").unlink()
    expected = exported["clf"][0].predict(NEW)
    _loads_nothing_written(
        folder,
        lambda: READERS[reader](folder),
        ok(lambda p: np.testing.assert_array_equal(p.predict(NEW), expected)),
    )


@pytest.mark.parametrize("reader", list(READERS))
def test_an_edited_card_still_serves(exported, copy_of, reader):
    folder = copy_of()
    (folder / "README.md").write_text("# my notes\n")
    ok(lambda p: p.predict(NEW)).check(lambda: READERS[reader](folder))
    assert (folder / "README.md").read_text() == "# my notes\n"


@pytest.mark.parametrize("reader", list(READERS))
def test_a_folder_without_its_estimator_is_refused_by_every_reader(copy_of, reader):
    folder = copy_of()
    (folder / "estimator.skops").unlink()
    err(r"estimator\.skops \(recorded in manifest\.json\) is missing").check(
        lambda: READERS[reader](folder)
    )


def test_a_moved_folder_with_a_file_of_the_user_serves(exported, copy_of, tmp_path):
    folder = copy_of()
    moved = folder.rename(tmp_path / "moved elsewhere")
    (moved / "notes.txt").write_text("mine")
    expected = exported["clf"][0].predict_proba(NEW)
    ok(
        lambda p: np.testing.assert_allclose(p.predict_proba(NEW), expected, atol=1e-5)
    ).check(lambda: load_exported(moved))


# --------------------------------------------------------------------------
# ExportedProbe's texts: the rule of every text model
# --------------------------------------------------------------------------
def _frame(columns):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(columns)


TEXT_CASES = [  # (id, X, outcome of predict; None: as predict(NEW))
    ("none", lambda: None, err(r"ExportedProbe: `X` must be a list or array")),
    ("one_string", lambda: "a fun film", err(r"`X` must be a list or array.*str")),
    ("ints", lambda: [1, 2], err(r"`X` must hold strings.*item 0 is 1")),
    ("bytes_items", lambda: [b"a film"], err(r"`X` must hold strings.*bytes")),
    ("none_item", lambda: ["a film", None], err(r"item 1 is None")),
    ("empty", lambda: [], err(r"`X` is empty")),
    ("surrogate", lambda: ["a \ud800 film"], err(r"`X` item 0 holds a lone surrogate")),
    (
        "two_column_frame",
        lambda: _frame({"text": NEW, "id": [1, 2, 3]}),
        err(r"`X` is a 2-D table with 2 columns \('text', 'id'\)"),
    ),
    (
        "two_column_array",
        lambda: np.array([NEW, NEW], dtype=object).T,
        err(r"`X` is a 2-D table with 2 columns"),
    ),
    ("one_column_frame", lambda: _frame({"text": NEW}), None),
    ("one_column_array", lambda: np.array(NEW, dtype=object)[:, None], None),
    ("series", lambda: _frame({"text": NEW})["text"], None),
    ("generator", lambda: (t for t in NEW), None),
    ("numpy_strings", lambda: np.array(NEW), None),
    ("tuple", lambda: tuple(NEW), None),
]


@pytest.mark.parametrize(
    "make_X, outcome", [pytest.param(x, o, id=i) for i, x, o in TEXT_CASES]
)
def test_exported_probe_texts(exported, make_X, outcome):
    """A one-column frame was read as its column *names* (one prediction, of
    the word 'text'); it is read as its column, as the extractor reads it."""
    probe = load_exported(exported["clf"][1])
    if outcome is None:
        expected = probe.predict_proba(NEW)
        outcome = ok(lambda out: np.testing.assert_allclose(out, expected, rtol=1e-6))
    outcome.check(lambda: probe.predict_proba(make_X()))


TOKENIZE_CASES = [
    ("none", None, err(r"`X` must be a list or array")),
    ("one_string", "a film", err(r"`X` must be a list or array.*str")),
    ("ints", [1], err(r"`X` must hold strings")),
    ("empty", [], err(r"`X` is empty")),
    ("surrogate", ["\udc80"], err(r"lone surrogate")),
    ("empty_text", [""], ok(lambda ids: len(ids) == 1 and len(ids[0]) == 2)),
    ("long_text", ["fun " * 500], ok(lambda ids: len(ids[0]) == 64)),
]


@pytest.mark.parametrize(
    "X, outcome", [pytest.param(x, o, id=i) for i, x, o in TOKENIZE_CASES]
)
def test_tokenize(exported, X, outcome):
    probe = load_exported(exported["clf"][1])
    outcome.check(lambda: probe.tokenize(X))


def test_tokenize_gives_the_ids_of_the_model_tokenizer(exported, tiny_model_path):
    from transformers import AutoTokenizer

    ids = load_exported(exported["clf"][1]).tokenize(NEW)
    assert ids == AutoTokenizer.from_pretrained(tiny_model_path)(NEW)["input_ids"]


# --------------------------------------------------------------------------
# predict_with_proba, predict_proba, batch_size
# --------------------------------------------------------------------------
def test_predict_with_proba_is_predict_and_predict_proba(exported):
    probe = load_exported(exported["clf"][1])
    labels, proba = probe.predict_with_proba(NEW)
    np.testing.assert_array_equal(labels, probe.predict(NEW))
    np.testing.assert_allclose(proba, probe.predict_proba(NEW))
    np.testing.assert_array_equal(labels, exported["clf"][0].predict(NEW))


@pytest.mark.parametrize("name", ["reg", "svc"])
def test_without_probabilities_predict_proba_does_not_exist(exported, name):
    """As scikit-learn's ``available_if``: ``hasattr`` says False (it said
    True, then the call failed)."""
    probe = load_exported(exported[name][1])
    assert not probe.has_proba()
    assert not hasattr(probe, "predict_proba")
    err(r"gives no probabilities|regressor has no predict_proba", AttributeError).check(
        lambda: probe.predict_proba(NEW)
    )
    values, proba = probe.predict_with_proba(NEW)
    assert proba is None
    expected = exported[name][0].predict(NEW)
    if name == "reg":
        np.testing.assert_allclose(values, expected, rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_array_equal(values, expected)


BATCH_SIZES = [
    ("zero", 0, err(r"ExportedProbe: `batch_size` must be a positive int; got 0")),
    ("negative", -1, err(r"`batch_size` must be a positive int")),
    ("text", "8", err(r"`batch_size` must be a positive int; got '8'")),
    ("none", None, err(r"`batch_size` must be a positive int; got None")),
    ("float", 2.5, err(r"`batch_size` must be a positive int")),
    ("bool", True, err(r"`batch_size` must be a positive int")),
    ("numpy_int", np.int64(2), None),
    ("one", 1, None),
]


def _same_probabilities(fitted, texts, expected):
    """Probabilities of ``texts`` from other batches (another batch size, other
    threads): equal up to the float32 rounding of the states through the
    concatenating probe's head."""
    assert fitted.fusion_ == "concatenate"
    scaler, head = fitted.pipeline_[-1]
    scale = head_scale(
        head.coef_,
        fitted.pipeline_[:2].transform(texts),
        feature_scale=scaler.scale_,
        probabilities=True,
    )

    def check(out):
        assert_equal_up_to_rounding(out, expected, terms=TINY_BERT_TERMS, scale=scale)

    return check


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize(
    "value, outcome", [pytest.param(v, o, id=i) for i, v, o in BATCH_SIZES]
)
def test_batch_size_set_on_the_probe(exported, value, outcome):
    probe = load_exported(exported["clf"][1])
    expected = probe.predict_proba(NEW * 3)

    def run():
        probe.batch_size = value
        return probe.predict_proba(NEW * 3)

    if outcome is None:
        outcome = ok(_same_probabilities(exported["clf"][0], NEW * 3, expected))
    outcome.check(run)


LOAD_PARAMS = [
    ("batch_size_numpy", {"batch_size": np.int64(2)}, None),
    ("n_threads_numpy", {"n_threads": np.int32(1)}, None),
    ("n_threads_zero", {"n_threads": 0}, err(r"load_exported: `n_threads`")),
    ("batch_size_text", {"batch_size": "4"}, err(r"load_exported: `batch_size`")),
    ("trusted_text", {"trusted": "sklearn.svm.SVC"}, err(r"`trusted` must be a list")),
    ("trusted_ints", {"trusted": [1]}, err(r"`trusted` must be a list")),
]


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize(
    "kwargs, outcome", [pytest.param(k, o, id=i) for i, k, o in LOAD_PARAMS]
)
def test_load_exported_parameters(exported, kwargs, outcome):
    folder = exported["clf"][1]
    if outcome is None:
        expected = load_exported(folder).predict_proba(NEW)
        same = _same_probabilities(exported["clf"][0], NEW, expected)
        outcome = ok(lambda p: same(p.predict_proba(NEW)))
    outcome.check(lambda: load_exported(folder, **kwargs))


@pytest.mark.parametrize(
    "path, needle",
    [
        pytest.param(None, r"load_exported: `path` must be a folder", id="none"),
        pytest.param(3, r"load_exported: `path` must be a folder", id="int"),
        pytest.param("a\x00b", r"`path` holds a NUL", id="nul"),
    ],
)
def test_load_exported_path(path, needle):
    err(needle).check(lambda: load_exported(path))


def test_open_exported_checks_its_batch_size(exported):
    folder = exported["clf"][1]
    export = probe_folder.export_entry(_manifest(folder), folder, "me")
    err(r"me: `batch_size` must be a positive int").check(
        lambda: open_exported(folder, export, batch_size=0, owner="me")
    )
    assert isinstance(open_exported(folder, export, owner="me"), ExportedProbe)


# --------------------------------------------------------------------------
# New in issue 55: a head's arrays are checked at load, whatever their hash
# says: dtype, shape, finiteness, names; each refusal names the array.
# --------------------------------------------------------------------------
def _rewrite_head(folder, edit):
    """``edit(arrays)`` on head.npz, written back with its hash sealed (a
    tamperer, or another writer, who also records the hash)."""
    with np.load(folder / "head.npz") as data:
        arrays = dict(data)
    edit(arrays)
    np.savez(folder / "head.npz", **arrays)
    manifest = _manifest(folder)
    manifest["export"]["head"]["sha256"] = hashlib.sha256(
        (folder / "head.npz").read_bytes()
    ).hexdigest()
    probe_folder.seal_export(manifest["export"])
    _write_manifest(folder, manifest)


def _put(name, value):
    def edit(arrays):
        arrays[name] = value(arrays[name]) if callable(value) else value

    return edit


def _nan_at(a):
    a = a.copy()
    a.flat[0] = np.nan
    return a


HEAD_EDITS = [  # (id, edit, needle)
    (
        "coef_ints",
        _put("coef", lambda a: np.round(a * 10).astype(np.int64)),
        r"'coef' must hold float32 or float64 numbers; got int64",
    ),
    ("coef_bools", _put("coef", lambda a: a > 0), r"'coef' must hold float.*got bool"),
    (
        "coef_complex",
        _put("coef", lambda a: a.astype(complex)),
        r"'coef' must hold float.*complex",
    ),
    ("coef_nan", _put("coef", _nan_at), r"'coef' holds NaN or infinite"),
    ("coef_inf", _put("coef", lambda a: a * np.inf), r"'coef' holds NaN or infinite"),
    ("intercept_nan", _put("intercept", _nan_at), r"'intercept' holds NaN"),
    ("coef_1d", _put("coef", lambda a: a.ravel()), r"'coef' must be 2-D"),
    (
        "coef_short",
        _put("coef", lambda a: a[:, :-1]),
        r"'fusion_mean' must be 2-D .* with \d+ values|'scaler_mean' must have shape",
    ),
    (
        "intercept_long",
        _put("intercept", lambda a: np.r_[a, a]),
        r"'intercept' must have shape \(1,\)",
    ),
    (
        "intercept_scalar",
        _put("intercept", lambda a: a[0]),
        r"'intercept' must have shape \(1,\); got \(\)",
    ),
    ("no_coef", lambda arrays: arrays.pop("coef"), r"lacks the array\(s\) \['coef'\]"),
    (
        "an_extra_array",
        _put("payload", np.zeros(3)),
        r"holds array\(s\) \['payload'\] that no logistic head has",
    ),
]


def _scaler_edits(folder):
    with np.load(folder / "head.npz") as data:
        names = set(data)
    cases = []
    for name in sorted(
        names & {"fusion_scale", "scaler_scale", "fusion_mean", "scaler_mean"}
    ):
        cases.append((f"{name}_nan", _put(name, _nan_at), rf"'{name}' holds NaN"))
        if name.endswith("scale"):
            cases.append(
                (f"{name}_zero", _put(name, lambda a: a * 0), rf"'{name}' holds a zero")
            )
        cases.append(
            (f"{name}_short", _put(name, lambda a: a.ravel()[:-1]), rf"'{name}' must")
        )
    return cases


@pytest.mark.parametrize(
    "edit, needle", [pytest.param(e, n, id=i) for i, e, n in HEAD_EDITS]
)
@pytest.mark.parametrize("reader", ["load_exported", "load_probe"])
def test_a_head_whose_arrays_are_not_its_kinds_is_refused_naming_the_array(
    copy_of, reader, edit, needle
):
    folder = copy_of()
    _rewrite_head(folder, edit)
    read = load_exported if reader == "load_exported" else load_probe
    _loads_nothing_written(folder, lambda: read(folder), err(rf"head\.npz .*{needle}"))


def test_a_head_whose_scalers_are_damaged_is_refused_naming_them(copy_of):
    folder = copy_of()
    cases = _scaler_edits(folder)
    assert cases, "the exported head has no scaler to damage"
    for _, edit, needle in cases:
        shutil.rmtree(folder)
        folder = copy_of()
        _rewrite_head(folder, edit)
        err(rf"head\.npz .*{needle}").check(lambda f=folder: load_exported(f))


def test_a_float32_head_still_serves(copy_of, exported):
    """The check is of kind, not of one dtype: float32 arrays serve."""
    folder = copy_of()
    _rewrite_head(
        folder,
        lambda arrays: arrays.update(
            {k: v.astype(np.float32) for k, v in arrays.items()}
        ),
    )
    probe = load_exported(folder)
    assert (probe.predict(NEW) == exported["clf"][0].predict(NEW)).all()


def _ensemble_arrays(n_layers=3, rows=1, dim=4, final=True):
    rng = np.random.RandomState(0)
    arrays = {
        "layer_coef": rng.randn(n_layers, rows, dim),
        "layer_intercept": rng.randn(n_layers, rows),
        "layer_scaler_mean": rng.randn(n_layers, dim),
        "layer_scaler_scale": rng.rand(n_layers, dim) + 0.5,
        "fusion_mean": rng.randn(n_layers, dim),
        "fusion_scale": rng.rand(n_layers, dim) + 0.5,
    }
    if final:
        arrays["final_coef"] = rng.randn(1, n_layers)
        arrays["final_intercept"] = rng.randn(1)
    return arrays


ENSEMBLE_EDITS = [  # (id, kind, n_outputs, edit, needle or None for fine)
    ("stack_fine", "stack", 2, lambda a: None, None),
    (
        "average_fine",
        "average",
        2,
        lambda a: [a.pop("final_coef"), a.pop("final_intercept")],
        None,
    ),
    ("regression_fine", "stack", None, lambda a: None, None),
    (
        "layer_coef_2d",
        "stack",
        2,
        _put("layer_coef", lambda a: a[0]),
        r"'layer_coef' must be 3-D",
    ),
    (
        "layer_intercept_flat",
        "stack",
        2,
        _put("layer_intercept", lambda a: a.ravel()),
        r"'layer_intercept' must have shape \(3, 1\)",
    ),
    (
        "layer_scale_of_one_layer",
        "stack",
        2,
        _put("layer_scaler_scale", lambda a: a[:1]),
        r"'layer_scaler_scale' must have shape \(3, 4\)",
    ),
    (
        "final_coef_wide",
        "stack",
        2,
        _put("final_coef", lambda a: np.c_[a, a]),
        r"'final_coef' must have shape \(1, 3\)",
    ),
    (
        "final_without_intercept",
        "stack",
        2,
        lambda a: a.pop("final_intercept"),
        r"only one of 'final_coef'",
    ),
    (
        "fusion_of_other_width",
        "stack",
        2,
        _put("fusion_mean", lambda a: a[:, :-1]),
        r"'fusion_mean' must be 2-D .* 12 values",
    ),
    (
        "layer_coef_float16",
        "stack",
        2,
        _put("layer_coef", lambda a: a.astype(np.float16)),
        r"'layer_coef' must hold float32 or float64",
    ),
    (
        "final_nan",
        "stack",
        2,
        _put("final_intercept", _nan_at),
        r"'final_intercept' holds NaN",
    ),
    (
        "layer_scale_zero",
        "average",
        2,
        _put("layer_scaler_scale", lambda a: a * 0),
        r"'layer_scaler_scale' holds a zero",
    ),
    (
        "linear_arrays_in_an_ensemble",
        "stack",
        2,
        _put("coef", np.ones((1, 12))),
        r"\['coef'\] that no stack head has",
    ),
]


@pytest.mark.parametrize(
    "kind, n_outputs, edit, needle",
    [pytest.param(k, o, e, n, id=i) for i, k, o, e, n in ENSEMBLE_EDITS],
)
def test_the_arrays_of_an_ensemble_head_are_checked(kind, n_outputs, edit, needle):
    from skloes.serving import check_head_arrays

    arrays = _ensemble_arrays()
    edit(arrays)
    if needle is None:
        check_head_arrays(arrays, kind, n_outputs)
    else:
        err(needle).check(lambda: check_head_arrays(arrays, kind, n_outputs))
