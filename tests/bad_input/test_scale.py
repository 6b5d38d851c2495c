"""The scale surface as a new user meets it (issue 42): extract_to_store,
LayerStore and its views, predict_to_parquet, probe_at_scale, the streaming
heads, and the saved probe folder's last items.

Classes (the grade a failing case gets in the matrix of the issue's closing
note, ``SKLOES_GRADE_FILE``): ``code`` (a Parquet file runs code when read)
and ``files`` (a job deletes or replaces a user's file) are D; the others are
C when the library says nothing (a wrong result, no error) and B when it
raises the wrong, raw or multi-line message. A passing case is A.

- code: Ray's pickled-object extension type (and any extension type) in a
  store shard, an input Parquet file, nested in a struct, with Ray imported;
- files: hidden names a user may give a file, an output that is its input,
  ``_work``, a user's ``predictions.parquet``;
- names: the store's and the predictions' own columns (``row_id``,
  ``layer<l>``, ``prediction``, ``proba_<class>``) and the text column;
- lock: two writers of one store or prediction file; a stale lock;
- values: ids as written, ``rows=``, boolean masks, non-finite values at a
  head, a head's layers, empty labels;
- manifest: duplicate entries, a foreign shard, edited dtypes, rows or dim;
- raw: texts and files pyarrow or pandas would fail on with their traceback.

Outcomes (``tests/_support/outcomes.py``): ``err`` (one line naming what is
wrong), ``ok`` (a correct result).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("torch")

from _support.clusters import ROOT, shared_ray  # noqa: E402
from _support.outcomes import cases, err, ok, snapshot  # noqa: E402
from _support.texts import make_texts  # noqa: E402

SHARD = 16
N = 40


# --------------------------------------------------------------- grading
def _grade(kind, outcome, exc):
    """The grade of a failed case: D for the code and files classes, else C
    when nothing was raised (silently wrong) and B for a wrong message."""
    if kind in ("code", "files"):
        return "D"
    raised = exc is not None and not isinstance(exc, AssertionError)
    if isinstance(outcome, err):
        # err raises pytest's Failed when nothing was raised; an assertion
        # on the message means something was raised, but not the right line
        return "C" if type(exc).__name__ == "Failed" else "B"
    return "B" if raised else "C"


def check(kind, outcome, run, after=None):
    """Run one case; record its grade when ``SKLOES_GRADE_FILE`` is set."""
    exc = None
    try:
        outcome.check(run)
        if after is not None:
            verdict = after()
            assert verdict is None or verdict, "the after-check failed"
    except BaseException as caught:  # noqa: BLE001 - graded, then re-raised
        exc = caught
    grade = "A" if exc is None else _grade(kind, outcome, exc)
    record = os.environ.get("SKLOES_GRADE_FILE")
    if record:
        with open(record, "a", encoding="utf-8") as handle:
            handle.write(
                json.dumps(
                    {"case": os.environ.get("PYTEST_CURRENT_TEST"), "grade": grade}
                )
                + "\n"
            )
    if exc is not None:
        raise exc


# --------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def texts():
    return make_texts(N, seed=5)


@pytest.fixture
def extract(tiny_model_path):
    from _support.probes import quiet_extract

    return quiet_extract(tiny_model_path, SHARD)


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory, tiny_model_path):
    from _support.probes import saved_tiny_probe

    folder = tmp_path_factory.mktemp("probes") / "tiny"
    return saved_tiny_probe(folder, tiny_model_path, 60)


@pytest.fixture(scope="module")
def ray_data():
    pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    from ray.data._internal.object_extensions.arrow import ArrowPythonObjectType

    return ArrowPythonObjectType


class _Payload:
    """Pickled into a column: unpickling it creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def _pickled(ray_type, marker, n):
    import pyarrow as pa

    blobs = [pickle.dumps(_Payload(marker))] * n
    return pa.ExtensionArray.from_storage(
        ray_type(), pa.array(blobs, type=pa.large_binary())
    )


def synthetic_store(folder, values, layers=(0, 1), columns=None, shard_size=20):
    """A store of ``values`` (n_layers, n, dim) through the store's own writer."""
    from skloes.core._store import new_manifest, shard_table, write_manifest
    from skloes.scale._sink import write_shard

    folder = Path(folder)
    folder.mkdir(parents=True)
    k, n, d = values.shape
    columns = dict(columns or {})
    manifest = new_manifest(
        model={"reference": "synthetic", "fingerprint": "f" * 64, "n_hidden_states": 8},
        extraction={"pooling": "mean"},
        layers=list(layers),
        dim=d,
        dtype="float32",
        columns=list(columns),
        id_column=None,
        shard_size=shard_size,
    )
    manifest["layer_dtypes"] = ["float32"] * k
    shards = []
    for i, start in enumerate(range(0, n, shard_size)):
        stop = min(start + shard_size, n)
        cols = {c: v.slice(start, stop - start) for c, v in columns.items()}
        table = shard_table(
            np.arange(start, stop), values[:, start:stop], layers, ["float32"] * k, cols
        )
        footer = {
            "digest": manifest["digest"],
            "index": i,
            "input": f"in{i}",
            "first_row": start,
        }
        record = write_shard(folder, i, table, footer)
        record.update(input=f"in{i}", first_row=start)
        shards.append(record)
    manifest.update(shards=shards, complete=True, n_rows=n)
    write_manifest(folder, manifest)
    return folder


def _values(n=60, k=2, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(k, n, d)).astype(np.float32)


def _edit_manifest(folder, edit):
    path = Path(folder) / "_manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def _small_probe_at_scale(data, job, model, **params):
    """probe_at_scale on the CPU, quiet, in small shards and calibration."""
    from skloes.scale import probe_at_scale

    return probe_at_scale(
        data,
        job,
        text_column="body",
        model=model,
        calibration_size=20,
        shard_size=SHARD,
        verbose=0,
        device="cpu",
        **params,
    )


def _frame(texts, **extra):
    import pandas as pd

    data = {"body": texts, "doc": [f"d{i:03d}" for i in range(len(texts))]}
    data.update(extra)
    return pd.DataFrame(data)


# ======================================================================
# code: reading never unpickles
# ======================================================================
STORE_READS = [  # (id, pickled column, needle, read of the LayerStore)
    (
        "column",
        "label",
        r"part-00000\.parquet.*'label'|'label'.*part-00000",
        lambda store: store.column("label"),
    ),
    ("verify", "label", r"'label'", lambda store: store.verify()),
    (
        "iter_batches",
        "g",
        r"'g'",
        lambda store: list(store.iter_batches(columns=["g"])),
    ),
]


@pytest.mark.parametrize(
    "column, needle, read",
    [case[1:] for case in STORE_READS],
    ids=[case[0] for case in STORE_READS],
)
def test_code_store_read_of_a_pickled_column(ray_data, tmp_path, column, needle, read):
    marker = tmp_path / "ran"
    store = synthetic_store(
        tmp_path / "s", _values(), columns={column: _pickled(ray_data, marker, 60)}
    )
    from skloes.scale import LayerStore

    check(
        "code",
        err(needle),
        lambda: read(LayerStore(store)),
        after=lambda: not marker.exists(),
    )


def _pickled_input(ray_data, tmp_path, texts, column="doc", nested=False):
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = tmp_path / "ran"
    values = _pickled(ray_data, marker, len(texts))
    if nested:
        values = pa.StructArray.from_arrays([values], names=["inner"])
    table = pa.table({"body": pa.array(texts), column: values})
    pq.write_table(table, tmp_path / "in.parquet")
    return tmp_path / "in.parquet", marker


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_code_input_id_column_of_pickled_objects(
    engine, ray_data, extract, texts, tmp_path
):
    data, marker = _pickled_input(ray_data, tmp_path, texts)
    if engine == "ray":
        pytest.importorskip("ray")
    check(
        "code",
        err(r"in\.parquet.*'doc'|'doc'.*in\.parquet"),
        lambda: extract(
            data, tmp_path / "s", text_column="body", id_column="doc", engine=engine
        ),
        after=lambda: not marker.exists(),
    )


EXTRACT_INPUTS = [  # (id, pickled column, nested in a struct, extract's kw, outcome)
    ("text_column", "text", False, {}, err(r"'text'")),
    (
        "nested_in_a_struct",
        "doc",
        True,
        {"text_column": "body", "columns": ["doc"]},
        err(r"'doc'"),
    ),
    # a pickled column the job never reads is never read
    ("unread", "other", False, {"text_column": "body"}, ok(lambda s: s.n_rows == N)),
]


@pytest.mark.parametrize(
    "column, nested, kw, outcome",
    [case[1:] for case in EXTRACT_INPUTS],
    ids=[case[0] for case in EXTRACT_INPUTS],
)
def test_code_input_of_pickled_objects(
    ray_data, extract, texts, tmp_path, column, nested, kw, outcome
):
    data, marker = _pickled_input(ray_data, tmp_path, texts, column, nested)
    check(
        "code",
        outcome,
        lambda: extract(data, tmp_path / "s", **kw),
        after=lambda: not marker.exists(),
    )


def test_code_probe_at_scale_label_of_pickled_objects(
    ray_data, tiny_model_path, texts, tmp_path
):
    data, marker = _pickled_input(ray_data, tmp_path, texts, column="label")
    from skloes.scale import probe_at_scale

    check(
        "code",
        err(r"'label'"),
        lambda: probe_at_scale(
            data,
            tmp_path / "job",
            text_column="body",
            model=tiny_model_path,
            verbose=0,
            device="cpu",
        ),
        after=lambda: not marker.exists(),
    )


def test_code_predict_input_of_pickled_objects(ray_data, probe_dir, texts, tmp_path):
    data, marker = _pickled_input(ray_data, tmp_path, texts)
    from skloes.scale import predict_to_parquet

    check(
        "code",
        err(r"'doc'"),
        lambda: predict_to_parquet(
            probe_dir,
            data,
            tmp_path / "p.parquet",
            text_column="body",
            id_column="doc",
            verbose=0,
        ),
        after=lambda: not marker.exists(),
    )


# ======================================================================
# files: the job owns only what it wrote
# ======================================================================
@pytest.mark.parametrize(
    "name",
    [
        ".tmp-my-notes.txt",
        ".part-00000.parquet-backup",
        "._manifest.json-old",
        ".part-00003.parquet-mine",
    ],
)
def test_files_hidden_user_file_in_a_new_store_folder(name, extract, texts, tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / name).write_text("my notes")
    before = snapshot(folder)
    check(
        "files",
        err(rf"{name.replace('.', '[.]')}"),
        lambda: extract(texts, folder),
        after=lambda: snapshot(folder) == before,
    )


@pytest.mark.parametrize("name", [".tmp-my-notes.txt", "._manifest.json-old"])
def test_files_hidden_user_file_in_a_store_being_resumed(
    name, extract, texts, tmp_path
):
    folder = tmp_path / "s"
    extract(texts, folder)
    (folder / name).write_text("my notes")
    check(
        "files",
        ok(lambda s: s.n_rows == N),
        lambda: extract(texts, folder),
        after=lambda: (folder / name).read_text() == "my notes",
    )


def test_files_user_work_folder_in_a_ray_store(extract, texts, tmp_path):
    pytest.importorskip("ray")
    folder = tmp_path / "s"
    # a store half written by the job, then the user's own _work folder
    extract(texts, folder)
    (folder / "_work").mkdir()
    (folder / "_work" / "todo.txt").write_text("mine")
    _edit_manifest(folder, lambda m: m.update(shards=m["shards"][:1], complete=False))
    check(
        "files",
        ok(lambda s: s.n_rows == N),
        lambda: _ray(lambda: extract(texts, folder, engine="ray", n_workers=1)),
        after=lambda: (folder / "_work" / "todo.txt").read_text() == "mine",
    )


def _ray(run):
    """``run()`` with the session's Ray cluster up (its jobs ask for one
    actor: each starts a process that imports torch)."""
    shared_ray()
    return run()


def test_files_a_failed_ray_job_leaves_no_copy_of_the_texts(extract, texts, tmp_path):
    pytest.importorskip("ray")
    folder = tmp_path / "s"

    class Stop(Exception):
        pass

    def stop(result):
        raise Stop

    def run():
        with pytest.raises((Stop, RuntimeError)):
            extract(texts, folder, engine="ray", n_workers=1, callback=stop)
        return folder

    check(
        "files",
        ok(),
        lambda: _ray(run),
        after=lambda: not [p for p in folder.rglob("*.arrow")],
    )


def test_files_predictions_onto_their_own_input(probe_dir, texts, tmp_path):
    from skloes.scale import predict_to_parquet

    data = tmp_path / "in.parquet"
    _frame(texts).to_parquet(data)
    before = data.read_bytes()
    check(
        "files",
        err(r"in\.parquet"),
        lambda: predict_to_parquet(
            probe_dir, data, data, text_column="body", overwrite=True, verbose=0
        ),
        after=lambda: data.read_bytes() == before,
    )


def test_files_predictions_inside_the_input_folder(probe_dir, texts, tmp_path):
    from skloes.scale import predict_to_parquet

    folder = tmp_path / "in"
    folder.mkdir()
    _frame(texts).to_parquet(folder / "a.parquet")
    check(
        "files",
        err(r"inside|is the input|input"),
        lambda: predict_to_parquet(
            probe_dir, folder, folder / "p.parquet", text_column="body", verbose=0
        ),
        after=lambda: sorted(p.name for p in folder.iterdir()) == ["a.parquet"],
    )


def test_files_store_is_the_input_folder(extract, texts, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    _frame(texts).to_csv(folder / "a.csv", index=False)
    before = snapshot(folder)
    check(
        "files",
        err(r"a\.csv|input"),
        lambda: extract(folder, folder, text_column="body"),
        after=lambda: snapshot(folder) == before,
    )


def test_files_probe_at_scale_keeps_a_users_predictions(
    tiny_model_path, texts, tmp_path
):
    labels = np.asarray(["a", "b"] * (N // 2), dtype=object)
    labels[-6:] = None
    data = tmp_path / "in.parquet"
    _frame(texts, label=labels).to_parquet(data)
    job = tmp_path / "job"
    job.mkdir()
    (job / "predictions.parquet").write_bytes(b"my own predictions")
    check(
        "files",
        err(r"predictions\.parquet"),
        lambda: _small_probe_at_scale(data, job, tiny_model_path),
        after=lambda: (job / "predictions.parquet").read_bytes()
        == b"my own predictions",
    )


def test_files_a_users_parts_folder_is_left_alone(probe_dir, texts, tmp_path):
    from skloes.scale import predict_to_parquet

    parts = tmp_path / ".p.parquet.parts"
    parts.mkdir()
    (parts / "mine.txt").write_text("mine")
    check(
        "files",
        err(r"mine\.txt|\.parts"),
        lambda: predict_to_parquet(probe_dir, texts, tmp_path / "p.parquet", verbose=0),
        after=lambda: (parts / "mine.txt").read_text() == "mine",
    )


# ======================================================================
# names: one namespace rule for columns
# ======================================================================
def test_names_id_column_named_text_is_not_read_as_the_texts(
    extract, texts, tmp_path, tiny_model_path
):
    from skloes import HiddenStatesTransformer

    frame = _frame(texts)
    frame["text"] = [f"id{i}" for i in range(N)]
    want = HiddenStatesTransformer(tiny_model_path, device="cpu").fit(texts)

    def then(store):
        np.testing.assert_allclose(store.read(), want.transform(texts), atol=1e-5)
        assert store.column("text").tolist() == list(frame["text"])

    check(
        "names",
        ok(then),
        lambda: extract(frame, tmp_path / "s", text_column="body", id_column="text"),
    )


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"id_column": "row_id"}, "'row_id'"),
        ({"columns": ["row_id"]}, "'row_id'"),
        ({"columns": ["layer0"]}, "'layer0'"),
        ({"columns": ["layer99"]}, "'layer99'"),
    ],
)
def test_names_reserved_store_columns(kw, needle, extract, texts, tmp_path):
    frame = _frame(texts)
    frame["row_id"] = np.arange(N)[::-1]
    frame["layer0"] = 1.0
    frame["layer99"] = 2.0
    check(
        "names",
        err(needle + ".*reserved|reserved.*" + needle),
        lambda: extract(frame, tmp_path / "s", text_column="body", **kw),
    )


@pytest.mark.parametrize("id_column", ["prediction", "proba_pos", "row_id"])
def test_names_reserved_prediction_columns(id_column, probe_dir, texts, tmp_path):
    from skloes.scale import predict_to_parquet

    frame = _frame(texts)
    frame[id_column] = [f"k{i}" for i in range(N)]
    check(
        "names",
        err(f"'{id_column}'.*reserved|reserved.*'{id_column}'"),
        lambda: predict_to_parquet(
            probe_dir,
            frame,
            tmp_path / "p.parquet",
            text_column="body",
            id_column=id_column,
            verbose=0,
        ),
    )


def test_names_predictions_with_an_id_column_named_text(probe_dir, texts, tmp_path):
    import pandas as pd

    from skloes.probe import load_probe
    from skloes.scale import predict_to_parquet

    frame = _frame(texts)
    frame["text"] = [f"id{i}" for i in range(N)]
    want = load_probe(probe_dir).predict(texts)

    def then(out):
        got = pd.read_parquet(out)
        assert got["text"].tolist() == frame["text"].tolist()
        assert got["prediction"].tolist() == list(want)

    check(
        "names",
        ok(then),
        lambda: predict_to_parquet(
            probe_dir,
            frame,
            tmp_path / "p.parquet",
            text_column="body",
            id_column="text",
            verbose=0,
        ),
    )


def test_names_duplicate_columns(extract, texts, tmp_path):
    frame = _frame(texts, g=["x"] * N)
    check(
        "names",
        err(r"'g'"),
        lambda: extract(frame, tmp_path / "s", text_column="body", columns=["g", "g"]),
    )


def test_names_id_column_is_the_text_column(extract, texts, tmp_path):
    check(
        "names",
        err(r"'body'"),
        lambda: extract(
            _frame(texts), tmp_path / "s", text_column="body", id_column="body"
        ),
    )


def test_names_probe_at_scale_label_named_row_id(tiny_model_path, texts, tmp_path):
    from skloes.scale import probe_at_scale

    frame = _frame(texts, row_id=["a", "b"] * (N // 2))
    check(
        "names",
        err(r"'row_id'"),
        lambda: probe_at_scale(
            frame,
            tmp_path / "job",
            label_column="row_id",
            text_column="body",
            model=tiny_model_path,
            verbose=0,
            device="cpu",
        ),
    )


def test_names_cli_extract_id_column_named_text(tiny_model_path, texts, tmp_path):
    from skloes import HiddenStatesTransformer
    from skloes.cli import main
    from skloes.scale import LayerStore

    frame = _frame(texts)
    frame["text"] = [f"id{i}" for i in range(N)]
    frame.to_csv(tmp_path / "in.csv", index=False)
    want = HiddenStatesTransformer(tiny_model_path, device="cpu").fit(texts)

    def run():
        status = main(
            [
                "extract",
                "--data",
                str(tmp_path / "in.csv"),
                "--model",
                str(tiny_model_path),
                "--text-column",
                "body",
                "--id-column",
                "text",
                "--store",
                str(tmp_path / "s"),
                "--device",
                "cpu",
            ]
        )
        assert status == 0
        return LayerStore(tmp_path / "s")

    check(
        "names",
        ok(
            lambda s: np.testing.assert_allclose(
                s.read(), want.transform(texts), atol=1e-5
            )
        ),
        run,
    )


# ======================================================================
# lock: one writer per store and per prediction file
# ======================================================================
_HOLDER = """
import sys, time, pathlib
from skloes.scale import extract_to_store
marker = pathlib.Path(sys.argv[3])
def hold(result):
    marker.write_text("holding")
    time.sleep(120)
texts = [f"text number {i} of the first job" for i in range(64)]
extract_to_store(texts, sys.argv[2], model=sys.argv[1], shard_size=16, verbose=0,
                 device="cpu", callback=hold)
"""


def _start_holder(model, tmp_path):
    """(store, marker, process): a second process writing the store, once
    the marker exists paused after its first shard (or exited: wait <= 60 s)."""
    marker = tmp_path / "holding"
    store = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLDER), str(model)]
        + [str(store), str(marker)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        if marker.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    return store, marker, proc


@pytest.fixture
def holder(tiny_model_path, tmp_path):
    """A second process writing a store, paused after its first shard."""
    store, marker, proc = _start_holder(tiny_model_path, tmp_path)
    assert marker.exists(), "the holder did not start"
    yield store, proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("same_input", [False, True])
def test_lock_a_second_writer_of_a_store(same_input, holder, extract):
    store, proc = holder
    which = "first" if same_input else "other"
    texts = [f"text number {i} of the {which} job" for i in range(64)]
    check(
        "lock",
        err(rf"{store.name}.*(locked|held|being written).*{proc.pid}"),
        lambda: extract(texts, store),
    )


def test_lock_a_dead_writer_is_taken_over(tiny_model_path, extract, tmp_path):
    store, _, proc = _start_holder(tiny_model_path, tmp_path)
    proc.kill()
    proc.wait()
    texts = [f"text number {i} of the first job" for i in range(64)]
    check(
        "lock",
        ok(lambda s: s.n_rows == 64 and s.verify()),
        lambda: extract(texts, store),
    )


# ======================================================================
# values: as written
# ======================================================================
STRING_VALUES = [  # (id, file, separator, column, its values, extract option)
    ("csv_ids", "in.csv", ",", "key", [f"{i:05d}" for i in range(N)], "id_column"),
    ("csv_kept_column", "in.csv", ",", "zip", ["02134"] * N, "columns"),
    ("tsv_ids", "in.tsv", "\t", "key", [f"{i:03d}" for i in range(N)], "id_column"),
]


@pytest.mark.parametrize(
    "name, sep, column, values, option",
    cases(STRING_VALUES),
)
def test_values_file_ids_and_kept_columns_stay_strings(
    extract, texts, tmp_path, name, sep, column, values, option
):
    _frame(texts, **{column: values}).to_csv(tmp_path / name, index=False, sep=sep)
    given = {"id_column": column, "columns": [column]}[option]
    check(
        "values",
        ok(lambda s: s.column(column).tolist() == values),
        lambda: extract(
            tmp_path / name, tmp_path / "s", text_column="body", **{option: given}
        ),
    )


def test_values_predictions_keep_csv_ids(probe_dir, texts, tmp_path):
    import pandas as pd

    from skloes.scale import predict_to_parquet

    _frame(texts, key=[f"{i:05d}" for i in range(N)]).to_csv(
        tmp_path / "in.csv", index=False
    )
    check(
        "values",
        ok(
            lambda out: pd.read_parquet(out)["key"].tolist()
            == [f"{i:05d}" for i in range(N)]
        ),
        lambda: predict_to_parquet(
            probe_dir,
            tmp_path / "in.csv",
            tmp_path / "p.parquet",
            text_column="body",
            id_column="key",
            verbose=0,
        ),
    )


def test_values_csv_texts_na_null_none_are_texts(extract, tmp_path):
    words = ["NA", "null", "None", "nan", "N/A", "a real text"] * 4
    import pandas as pd

    pd.DataFrame({"text": words}).to_csv(tmp_path / "in.csv", index=False)
    check(
        "values",
        ok(lambda s: s.n_rows == len(words)),
        lambda: extract(tmp_path / "in.csv", tmp_path / "s"),
    )


def test_values_csv_empty_text_is_missing(extract, tmp_path):
    (tmp_path / "in.csv").write_text('text\nfine\n""\nalso fine\n')
    check(
        "values",
        err(r"row 1 .*no text"),
        lambda: extract(tmp_path / "in.csv", tmp_path / "s"),
    )


@pytest.mark.parametrize(
    "rows, needle",
    [
        ([0, 5, 10_000], r"10000"),
        ([0.5, 1.0], r"`rows`"),
        ([-1], r"`rows`"),
        (np.ones(N + 3, dtype=bool), r"`rows`.*mask|mask.*`rows`|length"),
    ],
)
def test_values_extract_rows(rows, needle, extract, texts, tmp_path):
    check("values", err(needle), lambda: extract(texts, tmp_path / "s", rows=rows))


def test_values_extract_rows_mask_of_the_right_length(extract, texts, tmp_path):
    mask = np.arange(N) % 3 == 0
    check(
        "values",
        ok(lambda s: s.row_ids().tolist() == np.flatnonzero(mask).tolist()),
        lambda: extract(texts, tmp_path / "s", rows=mask),
    )


@pytest.fixture
def small_store(tmp_path):
    from skloes.scale import LayerStore

    values = _values()
    return LayerStore(synthetic_store(tmp_path / "s", values)), values


def test_values_select_boolean_mask_selects(small_store):
    store, values = small_store
    mask = np.arange(60) % 4 == 1
    check(
        "values",
        ok(lambda v: np.array_equal(v.read(), values[:, mask])),
        lambda: store.select(rows=mask),
    )


def test_values_view_select_boolean_mask_selects(small_store):
    store, values = small_store
    view = store.select(rows=np.arange(30))
    mask = np.arange(30) % 2 == 0
    check(
        "values",
        ok(lambda v: np.array_equal(v.read(), values[:, :30][:, mask])),
        lambda: view.select(rows=mask),
    )


@pytest.mark.parametrize(
    "rows, needle",
    [
        (np.ones(7, dtype=bool), r"mask.*60|60.*mask"),
        ([0.5], r"rows"),
        ([1.0, 2.0], r"rows"),
        ([60], r"60"),
        (["1"], r"rows"),
    ],
)
def test_values_select_bad_rows(rows, needle, small_store):
    store, _ = small_store
    check("values", err(needle), lambda: store.select(rows=rows))


def test_values_view_select_rows_past_the_end(small_store):
    store, _ = small_store
    view = store.select(rows=np.arange(10))
    check("values", err(r"10|rows"), lambda: view.select(rows=[0.5, 3]))


@pytest.mark.parametrize("head", ["logistic", "ridge"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_values_non_finite_value_at_a_streaming_head(head, bad, tmp_path):
    from skloes.scale import (
        LayerStore,
        StreamingLogisticRegression,
        StreamingRidgeClassifier,
    )

    values = _values()
    values[1, 37, 2] = bad
    store = LayerStore(synthetic_store(tmp_path / "s", values))
    y = np.arange(60) % 2
    est = (
        StreamingLogisticRegression()
        if head == "logistic"
        else (StreamingRidgeClassifier())
    )
    check("values", err(r"layer 1.*row 37|row 37.*layer 1"), lambda: est.fit(store, y))


def test_values_non_finite_value_at_predict(tmp_path):
    from skloes.scale import LayerStore, StreamingRidgeClassifier

    values = _values()
    store = LayerStore(synthetic_store(tmp_path / "s", values))
    head = StreamingRidgeClassifier().fit(store, np.arange(60) % 2)
    values[0, 12, 0] = np.nan
    other = LayerStore(synthetic_store(tmp_path / "t", values))
    check(
        "values", err(r"layer 0.*row 12|row 12.*layer 0"), lambda: head.predict(other)
    )


@pytest.mark.parametrize("head", ["logistic", "ridge"])
def test_values_head_predicts_only_from_its_layers(head, tmp_path):
    from skloes.scale import (
        LayerStore,
        StreamingLogisticRegression,
        StreamingRidgeClassifier,
    )

    a = LayerStore(synthetic_store(tmp_path / "a", _values(k=3), layers=(2, 4, 6)))
    b = LayerStore(synthetic_store(tmp_path / "b", _values(k=3), layers=(1, 3, 5)))
    est = (
        StreamingLogisticRegression()
        if head == "logistic"
        else (StreamingRidgeClassifier())
    )
    est.fit(a, np.arange(60) % 2)
    check(
        "values",
        err(r"\[2, 4, 6\].*\[1, 3, 5\]|\[1, 3, 5\].*\[2, 4, 6\]"),
        lambda: est.predict(b),
    )


def test_values_head_fitted_on_a_store_predicts_on_the_same_layers(tmp_path):
    from skloes.scale import LayerStore, StreamingRidgeClassifier

    a = LayerStore(synthetic_store(tmp_path / "a", _values(k=3), layers=(2, 4, 6)))
    head = StreamingRidgeClassifier().fit(a, np.arange(60) % 2)
    check(
        "values",
        ok(lambda p: len(p) == 60),
        lambda: head.predict(a.select(rows=np.arange(60))),
    )


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_values_empty_label_is_missing(fmt, tiny_model_path, texts, tmp_path):
    labels = np.asarray(["a", "b"] * (N // 2), dtype=object)
    labels[-5:] = ""
    frame = _frame(texts, label=labels)
    data = tmp_path / f"in.{fmt}"
    frame.to_parquet(data) if fmt == "parquet" else frame.to_csv(data, index=False)

    def then(result):
        assert result.n_labelled == N - 5 and result.n_predicted == 5
        assert "" not in set(result.head.classes_.tolist())

    check(
        "values",
        ok(then),
        lambda: _small_probe_at_scale(data, tmp_path / "job", tiny_model_path),
    )


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_values_probe_at_scale_reads_csv_and_jsonl(
    fmt, tiny_model_path, texts, tmp_path
):
    labels = np.asarray(["a", "b"] * (N // 2), dtype=object)
    labels[-4:] = None
    frame = _frame(texts, label=labels)
    data = tmp_path / f"in.{fmt}"
    if fmt == "csv":
        frame.to_csv(data, index=False)
    else:
        frame.to_json(data, orient="records", lines=True)
    check(
        "values",
        ok(lambda r: r.n_labelled == N - 4 and r.n_predicted == 4),
        lambda: _small_probe_at_scale(
            data, tmp_path / "job", tiny_model_path, id_column="doc"
        ),
    )


# ======================================================================
# manifest: checked against the shards
# ======================================================================
def _open_and_read(folder):
    from skloes.scale import LayerStore

    store = LayerStore(folder)
    store.read()
    return store


def _verify(folder):
    from skloes.scale import LayerStore

    return LayerStore(folder).verify()


@pytest.mark.parametrize("how", [_open_and_read, _verify])
def test_manifest_duplicate_entry(how, tmp_path):
    folder = synthetic_store(tmp_path / "s", _values())
    _edit_manifest(folder, lambda m: m["shards"].append(dict(m["shards"][1])))
    check(
        "manifest",
        err(r"part-00001\.parquet.*(twice|more than once|duplicate)"),
        lambda: how(folder),
    )


@pytest.mark.parametrize("how", [_open_and_read, _verify])
def test_manifest_entry_listed_under_two_indices(how, tmp_path):
    folder = synthetic_store(tmp_path / "s", _values())

    def edit(m):
        extra = dict(m["shards"][1], index=3)
        m["shards"].append(extra)

    _edit_manifest(folder, edit)
    check("manifest", err(r"part-00001\.parquet"), lambda: how(folder))


@pytest.mark.parametrize("how", [_open_and_read, _verify])
def test_manifest_shard_from_another_store(how, tmp_path):
    values = _values()
    folder = synthetic_store(tmp_path / "s", values)
    other = values.copy()
    other[:, 20:40] += 1
    foreign = synthetic_store(tmp_path / "t", other)
    # the same settings, another input: its footer names that input
    import pyarrow.parquet as pq

    table = pq.read_table(foreign / "part-00001.parquet")
    meta = json.loads(table.schema.metadata[b"skloes"])
    meta["input"] = "another-input"
    from skloes.scale._sink import write_shard

    write_shard(foreign, 1, table.replace_schema_metadata(None), meta)
    data = (foreign / "part-00001.parquet").read_bytes()
    (folder / "part-00001.parquet").write_bytes(data)

    def edit(m):  # the size matches: the copy was of the same shape
        m["shards"][1]["bytes"] = len(data)

    _edit_manifest(folder, edit)
    check("manifest", err(r"part-00001\.parquet"), lambda: how(folder))


@pytest.mark.parametrize("how", [_open_and_read, _verify])
def test_manifest_layer_dtypes_edited(how, tmp_path):
    folder = synthetic_store(tmp_path / "s", _values())
    _edit_manifest(folder, lambda m: m.update(layer_dtypes=["float16", "float16"]))
    check("manifest", err(r"float16|float32"), lambda: how(folder))


@pytest.mark.parametrize("how", [_open_and_read, _verify])
def test_manifest_dim_edited(how, tmp_path):
    folder = synthetic_store(tmp_path / "s", _values())
    _edit_manifest(folder, lambda m: m.update(dim=8))
    check("manifest", err(r"dim|width|8"), lambda: how(folder))


def test_manifest_n_rows_edited(tmp_path):
    folder = synthetic_store(tmp_path / "s", _values())
    _edit_manifest(folder, lambda m: m.update(n_rows=999))
    check("manifest", err(r"999"), lambda: _verify(folder))


def test_manifest_rows_edited_is_caught_at_read(tmp_path):
    folder = synthetic_store(tmp_path / "s", _values())

    def edit(m):
        m["shards"][0]["rows"] = 10
        m["n_rows"] -= 10

    _edit_manifest(folder, edit)
    check("manifest", err(r"part-00000\.parquet"), lambda: _open_and_read(folder))


# ======================================================================
# raw: one line naming the input, row or column
# ======================================================================
def test_raw_surrogate_in_a_text(extract, tmp_path):
    texts = ["fine", "bad \udcff text", "fine too"]
    check("raw", err(r"item 1|row 1"), lambda: extract(texts, tmp_path / "s"))


def test_raw_surrogate_in_a_frame(extract, tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"text": ["fine", "bad \ud800 text"]}, dtype=object)
    check("raw", err(r"row 1"), lambda: extract(frame, tmp_path / "s"))


BROKEN_FILES = [  # (id, file, its bytes, needle)
    (
        "non_utf8_csv",
        "in.csv",
        b"text\ncaf\xe9 au lait\nfine\n",
        r"in\.csv.*UTF-8|UTF-8.*in\.csv",
    ),
    ("broken_jsonl", "in.jsonl", b'{"text": "a"}\n{"text": "b"\n', r"in\.jsonl"),
    ("broken_parquet", "in.parquet", b"not parquet at all", r"in\.parquet"),
]


@pytest.mark.parametrize("name, data, needle", cases(BROKEN_FILES))
def test_raw_broken_file(extract, tmp_path, name, data, needle):
    (tmp_path / name).write_bytes(data)
    check("raw", err(needle), lambda: extract(tmp_path / name, tmp_path / "s"))


def test_raw_mixed_type_kept_column(extract, texts, tmp_path):
    frame = _frame(texts, g=[1, "two"] * (N // 2))
    check(
        "raw",
        err(r"'g'"),
        lambda: extract(frame, tmp_path / "s", text_column="body", columns=["g"]),
    )


def test_raw_ragged_csv(extract, tmp_path):
    (tmp_path / "in.csv").write_text("text,g\na,1\nb,2,3,4\n")
    check(
        "raw",
        err(r"in\.csv"),
        lambda: extract(tmp_path / "in.csv", tmp_path / "s", columns=["g"]),
    )


def test_raw_non_string_texts_in_parquet(extract, tmp_path):
    import pandas as pd

    pd.DataFrame({"text": [1, 2, 3]}).to_parquet(tmp_path / "in.parquet")
    check(
        "raw",
        err(r"'text'.*not text|not text"),
        lambda: extract(tmp_path / "in.parquet", tmp_path / "s"),
    )


def test_raw_csv_numeric_texts_are_texts(extract, tmp_path):
    (tmp_path / "in.csv").write_text("text\n1\n2\n3.5\n")
    check(
        "raw",
        ok(lambda s: s.n_rows == 3),
        lambda: extract(tmp_path / "in.csv", tmp_path / "s"),
    )


# ======================================================================
# the saved probe folder
# ======================================================================
def test_probe_folder_data_name_not_a_string(probe_dir, tmp_path):
    from skloes.probe import load_probe, save_probe

    probe = load_probe(probe_dir)
    check(
        "probe_folder",
        ok(lambda p: "123" in (p / "README.md").read_text()),
        lambda: save_probe(probe, tmp_path / "p", data_name=123),
    )


def test_probe_folder_card_of_a_folder_without_hashes(probe_dir, tmp_path):
    import shutil

    from skloes.probe import load_probe, save_probe

    folder = tmp_path / "p"
    shutil.copytree(probe_dir, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.pop("sha256")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "README.md").write_text("# my own card\n")
    probe = load_probe(probe_dir)
    check(
        "files",
        err(r"README\.md.*(edits|earlier)"),
        lambda: save_probe(probe, folder, overwrite=True),
        after=lambda: (folder / "README.md").read_text() == "# my own card\n",
    )


# ======================================================================
# New in issue 55: the store, the prediction parts and their writer note
# write only regular files of their own; a folder that cannot be written
# is one line naming it.
# ======================================================================
def _foreign_note(folder, kind, outside):
    folder.mkdir(parents=True, exist_ok=True)
    note = folder / ".skloes-writer"
    if kind == "link":
        note.symlink_to(outside)
    elif kind == "dangling":
        note.symlink_to(folder.parent / "nowhere")
    else:
        os.mkfifo(note)
    return note


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_files_writer_note_of_a_store_is_never_followed(kind, extract, texts, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    store = tmp_path / "store"
    _foreign_note(store, kind, outside)
    check(
        "files",
        err(r"store.*holds '\.skloes-writer', which is a .*never through a link"),
        lambda: extract(texts, store),
        after=lambda: outside.read_text() == "outside"
        and not (tmp_path / "nowhere").exists()
        and [p.name for p in store.iterdir()] == [".skloes-writer"],
    )


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_files_writer_note_of_the_prediction_parts_is_never_followed(
    kind, probe_dir, texts, tmp_path
):
    from skloes.scale import predict_to_parquet
    from skloes.scale._sink import PartsSink

    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    out = tmp_path / "preds.parquet"
    _foreign_note(PartsSink.parts_folder(out), kind, outside)
    check(
        "files",
        err(r"holds '\.skloes-writer', which is a"),
        lambda: predict_to_parquet(probe_dir, texts, out, verbose=0),
        after=lambda: outside.read_text() == "outside" and not out.exists(),
    )


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_files_predictions_out_is_never_written_through(
    kind, probe_dir, texts, tmp_path
):
    from skloes.scale import predict_to_parquet

    outside = tmp_path / "outside.parquet"
    outside.write_text("outside")
    out = tmp_path / "preds.parquet"
    if kind == "link":
        out.symlink_to(outside)
    elif kind == "dangling":
        out.symlink_to(tmp_path / "nowhere.parquet")
    else:
        os.mkfifo(out)
    check(
        "files",
        err(r"`out` .*preds\.parquet' is a .*regular files"),
        lambda: predict_to_parquet(probe_dir, texts, out, overwrite=True, verbose=0),
        after=lambda: outside.read_text() == "outside"
        and not (tmp_path / "nowhere.parquet").exists(),
    )


def test_raw_a_store_folder_that_cannot_be_written(
    extract, texts, tmp_path, monkeypatch
):
    """A read-only folder (simulated: the tests may run as root, who writes
    anywhere): one line naming the store and the system's reason."""
    import types

    from skloes.core import _atomic

    def refuse(*args, dir=None, **kwargs):
        raise PermissionError(13, "Permission denied", str(dir))

    monkeypatch.setattr(
        _atomic, "tempfile", types.SimpleNamespace(mkstemp=refuse, mkdtemp=refuse)
    )
    check(
        "raw",
        err(r"store.* cannot be written \(Permission denied on .*store"),
        lambda: extract(texts, tmp_path / "store"),
    )


def test_raw_a_folder_whose_files_disagree_on_a_column_type(extract, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.csv").write_text("id,text\n1,good film\n2,dull plot\n")
    rows = [{"id": 3, "text": "fun story"}, {"id": 4, "text": "awful actor"}]
    (folder / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check(
        "raw",
        err(
            r"column 'id' holds \w*string values in '.*a\.csv' and int64 values in "
            r"'.*b\.jsonl'"
        ),
        lambda: extract(str(folder), tmp_path / "store", id_column="id"),
    )


def test_values_text_of_either_arrow_width_in_a_folder_is_one_type(extract, tmp_path):
    """A CSV (large strings) and a JSONL (strings) of text ids: one store."""
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.csv").write_text("id,text\nx1,good film\nx2,dull plot\n")
    rows = [{"id": "x3", "text": "fun story"}]
    (folder / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check(
        "values",
        ok(lambda s: sorted(s.column("id").tolist()) == ["x1", "x2", "x3"]),
        lambda: extract(str(folder), tmp_path / "store", id_column="id"),
    )


@pytest.mark.parametrize("index_type", ["int8", "int32"])
def test_values_a_dictionary_encoded_text_column_is_its_texts(
    extract, texts, tmp_path, index_type
):
    """A pandas categorical written to Parquet: its texts, embedded as plain."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.array(texts[:8]).dictionary_encode()
    column = column.cast(pa.dictionary(getattr(pa, index_type)(), pa.string()))
    pq.write_table(pa.table({"text": column}), tmp_path / "cat.parquet")
    plain = extract(texts[:8], tmp_path / "plain")
    check(
        "values",
        ok(lambda s: np.array_equal(s.read(), plain.read())),
        lambda: extract(str(tmp_path / "cat.parquet"), tmp_path / "store"),
    )


def test_raw_a_store_path_that_is_a_file_or_not_a_path(extract, texts, tmp_path):
    from skloes.scale import LayerStore

    file = tmp_path / "store"
    file.write_text("mine")
    check("raw", err(r"store': is a file; give a folder"), lambda: extract(texts, file))
    assert file.read_text() == "mine"
    check("raw", err(r"`path` must be a store folder .*got int"), lambda: LayerStore(3))


# New in issue 55: where the files of a folder disagree on a kept column's
# type, the error names the column, both types and both files, whatever the
# formats, whichever comes first, and wherever the chunks are cut (a chunk
# that ended with the first file compared nothing).
def _write_part(path, fmt, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        sep = "\t" if fmt == "tsv" else ","
        lines = [sep.join(rows[0])] + [
            sep.join(str(v) for v in r.values()) for r in rows
        ]
        path.write_text("\n".join(lines) + "\n")


ID_CLASHES = [  # (first file, its ids, second file, its ids, the two types)
    ("csv", ["a1", "a2"], "jsonl", [3, 4], ("string", "int64")),
    ("jsonl", [1, 2], "tsv", ["b3", "b4"], ("int64", "string")),
    ("parquet", [1.5, 2.5], "parquet", [3, 4], ("double", "int64")),
    ("jsonl", [True, False], "parquet", ["x", "y"], ("bool", "string")),
    ("parquet", [1, 2], "csv", ["c3", "c4"], ("int64", "string")),
]


@pytest.mark.parametrize("first, ids1, second, ids2, types", ID_CLASHES)
@pytest.mark.parametrize("shard_size", [2, SHARD])  # 2: a chunk is the first file
def test_raw_files_of_a_folder_disagreeing_on_the_id_type_name_both(
    extract, tmp_path, first, ids1, second, ids2, types, shard_size
):
    folder = tmp_path / "parts"
    folder.mkdir()
    texts = iter(["good film", "dull plot", "fun story", "awful actor"])
    for name, fmt, ids in [("a", first, ids1), ("b", second, ids2)]:
        rows = [{"id": i, "text": next(texts)} for i in ids]
        _write_part(folder / f"{name}.{fmt}", fmt, rows)
    one, two = types
    check(
        "raw",
        err(
            rf"column 'id' holds \w*{one} values in '.*a\.{first}' and "
            rf"\w*{two} values in '.*b\.{second}' \(the files of a folder must agree"
        ),
        lambda: extract(
            str(folder), tmp_path / "store", id_column="id", shard_size=shard_size
        ),
    )


# New in issue 55: a `store` that is no folder path is one line naming it
# (pathlib's and os's own words before: "embedded null byte", "expected str,
# bytes or os.PathLike object"), and an empty one is not the working folder.
@pytest.mark.parametrize(
    "store, needle",
    [
        ("a\x00b", r"`store` holds a NUL character"),
        ("", r"`store` is an empty path"),
        (3, r"`store` must be a folder \(a str or os.PathLike\); got 3"),
        (None, r"`store` must be a folder .*got None"),
        (b"store", r"`store` must be a folder .*got b'store'"),
    ],
)
def test_raw_a_store_that_is_no_folder_path(extract, texts, store, needle):
    check("raw", err(rf"extract_to_store: {needle}"), lambda: extract(texts, store))


def test_raw_a_cache_folder_with_a_nul_character(tiny_model_path, texts):
    from skloes import HiddenStatesTransformer

    hst = HiddenStatesTransformer(
        tiny_model_path, device="cpu", cache="cache\x00folder"
    )
    err(r"`cache` holds a NUL character").check(lambda: hst.fit(texts[:2]))
