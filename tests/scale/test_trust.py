"""The rules a job at scale keeps (issue 42; see the scaling guide's
"The rules a job keeps"): reading runs no code, a job deletes only what it
wrote, reserved column names, one writer per folder, values as written, the
manifest checked against the shards. Unit tests of each rule's one home,
then a real MiniLM store of real text on the local and Ray engines.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _support.clusters import ROOT
from _support.rounding import assert_same_states, forward_terms

from skloes.core._atomic import WRITER_NOTE, FolderBusy, FolderLock
from skloes.core._store import (
    check_positions,
    check_schema,
    reserved_column,
    temporary_prefix,
)
from skloes.scale._sink import is_temporary

pa = pytest.importorskip("pyarrow")


# ------------------------------------------------------------------ units
def test_positions_take_integers_and_masks_of_the_right_length():
    np.testing.assert_array_equal(check_positions([3, 0], 5, "x"), [3, 0])
    mask = np.array([True, False, True, False, False])
    np.testing.assert_array_equal(check_positions(mask, 5, "x"), [0, 2])
    for bad, needle in [
        (mask[:3], "one value per row \\(5\\); got 3"),
        ([0.5], "integer row positions"),
        ([1.0], "integer row positions"),
        ([5], "row position 5 in `rows` is out of range; there are 5 rows"),
        ([-1], "negative"),
        ([[0, 1]], "1-D"),
        (["1"], "integer"),
    ]:
        with pytest.raises(ValueError, match=needle):
            check_positions(bad, 5, "x")


def test_reserved_names():
    for name in ("row_id", "layer0", "layer12"):
        assert reserved_column(name)
    for name in ("text", "Layer0", "layer", "layer_a", "label", "proba"):
        assert not reserved_column(name)
    extra = ("prediction", "proba_")
    assert reserved_column("prediction", extra) and reserved_column("proba_x", extra)
    assert not reserved_column("predictions", extra)


def test_temporary_names_are_the_jobs_own():
    digest = "0123456789abcdef" * 2
    prefix = temporary_prefix(digest, "part-00001.parquet")
    assert prefix == ".skloes-0123456789ab-part-00001.parquet-"
    assert is_temporary(prefix + "k3j_x9", digest)
    assert is_temporary(".skloes-0123456789ab-work", digest)
    for name in (
        prefix + "k3j_x9",  # another job's token below
        ".tmp-my-notes.txt",
        ".part-00000.parquet-backup",
        "._manifest.json-old",
        ".skloes-0123456789ab-notes.txt",
    ):
        assert not is_temporary(name, "f" * 32)
    assert not is_temporary(".skloes-0123456789ab-notes.txt", digest)


def test_schema_check_names_file_and_column_of_any_extension_type():
    class Tagged(pa.ExtensionType):
        def __init__(self):
            super().__init__(pa.int64(), "my.tagged")

        def __arrow_ext_serialize__(self):
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage, serialized):
            return cls()

    tagged = pa.ExtensionArray.from_storage(Tagged(), pa.array([1, 2]))
    nested = pa.StructArray.from_arrays([tagged], names=["inner"])
    listed = pa.ListArray.from_arrays(pa.array([0, 1, 2]), tagged)
    table = pa.table(
        {"ok": pa.array([1, 2]), "a": tagged, "b": nested, "c": listed[:2]}
    )
    check_schema(table.schema, "f.parquet", ["ok"])  # the plain column passes
    for column in ("a", "b", "c"):
        with pytest.raises(ValueError, match=rf"column '{column}' of 'f.parquet'"):
            check_schema(table.schema, "f.parquet", [column])
    # an unregistered extension: its name is in the field's metadata
    field = pa.field("d", pa.binary(), metadata={b"ARROW:extension:name": b"x.y"})
    with pytest.raises(ValueError, match="'d'.*'x.y'"):
        check_schema(pa.schema([field]), "f.parquet")


_HOLD = """
import sys, time
from skloes.core._atomic import FolderLock
lock = FolderLock(sys.argv[1], note=True)
print("held", flush=True)
time.sleep(60)
"""


def test_writer_lock_one_holder_named_then_taken_over_when_it_dies(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLD), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy, match=rf"pid {proc.pid} on host"):
            FolderLock(tmp_path, note=True)
    finally:
        proc.kill()
        proc.wait()
    lock = FolderLock(tmp_path, note=True)  # the dead holder's lock is taken over
    assert f"pid {os.getpid()}" in (tmp_path / WRITER_NOTE).read_text()
    lock.release()
    assert not (tmp_path / WRITER_NOTE).exists()
    FolderLock(tmp_path, note=True).release()  # and free again


# ------------------------------------------------------ MiniLM, real text
# MiniLM's feed-forward width, through the embeddings and blocks 1 to 4
MINILM_TERMS = forward_terms(1536, 5)


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_minilm_store_keeps_the_rules(
    engine, request, minilm_path, rotten_tomatoes_small, tmp_path
):
    """A CSV whose id column is named ``text`` and holds zero-padded ids: the
    store embeds the review texts, keeps the ids as strings, leaves no copy
    of the texts and no temporary file, refuses a second writer and a shard
    of another store, and reads no pickled column (Ray imported)."""
    import pandas as pd

    from skloes import HiddenStatesTransformer
    from skloes.scale import LayerStore, StoreError, extract_to_store

    if engine == "ray":
        request.getfixturevalue("ray_cluster")
    texts = [str(t) for t in rotten_tomatoes_small[0][:48]]
    ids = [f"{i:05d}" for i in range(48)]
    frame = pd.DataFrame({"review": texts, "text": ids, "y": ["NA", ""] * 24})
    frame.to_csv(tmp_path / "in.csv", index=False)
    kw = dict(
        model=minilm_path,
        layers=[2, 4],
        max_length=48,
        shard_size=16,
        text_column="review",
        id_column="text",
        columns=["y"],
        verbose=0,
        device="cpu",
        engine=engine,
        # one Ray actor: a pool of two (and its hidden files) is
        # test_engines.py's; each actor of a job starts a process that
        # imports torch and loads MiniLM, the bulk of this test's time
        n_workers=1,
    )
    store = extract_to_store(tmp_path / "in.csv", tmp_path / "s", **kw)
    hst = HiddenStatesTransformer(minilm_path, layers=[2, 4], max_length=48)
    hst.fit(texts)
    expected = np.concatenate(
        [hst.transform(texts[i : i + 16]) for i in range(0, 48, 16)], axis=1
    )
    first = store.read()
    if engine == "local":  # the same shards through the same kernels
        np.testing.assert_array_equal(first, expected)
    else:  # a Ray worker's thread count splits the sums another way
        assert_same_states(first, expected, terms=MINILM_TERMS)
    assert store.column("text").tolist() == ids  # strings, as written
    assert store.column("y").tolist() == ["NA", None] * 24  # "" is missing
    assert store.verify() is store
    names = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert names == ["_manifest.json"] + [f"part-0000{i}.parquet" for i in range(3)]

    # one writer: a second job meets the first's lock, naming it
    lock = FolderLock(tmp_path / "s", note=True)
    try:
        with pytest.raises(StoreError, match=r"'.*s': is being written by .*pid"):
            extract_to_store(tmp_path / "in.csv", tmp_path / "s", **kw)
    finally:
        lock.release()

    # a shard of another store with the same settings is refused at read
    # (the other store written here: the check at read is the same whichever
    # engine wrote the shard; the store it is planted in is the engine's)
    other = extract_to_store(
        [t.upper() for t in texts],
        tmp_path / "t",
        **{**kw, "id_column": None, "columns": None, "text_column": "text"}
        | {"engine": "local"},
    )
    assert other.n_rows == 48
    twin = extract_to_store(
        tmp_path / "in.csv",
        tmp_path / "u",
        **{**kw, "id_column": None, "columns": None},
    )
    data = (tmp_path / "s" / "part-00001.parquet").read_bytes()
    (tmp_path / "u" / "part-00001.parquet").write_bytes(
        (tmp_path / "t" / "part-00001.parquet").read_bytes()
    )
    with pytest.raises(StoreError, match="part-00001.parquet"):
        LayerStore(twin.path).read()
    assert data  # the first store is untouched: the same bytes read back
    np.testing.assert_array_equal(LayerStore(store.path).read(), first)

    # reading runs no code: a pickled column planted with Ray imported
    pytest.importorskip("ray.data")
    import pickle

    import pyarrow.parquet as pq
    from ray.data._internal.object_extensions.arrow import ArrowPythonObjectType

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    blobs = pa.array([pickle.dumps(Payload())] * 48, type=pa.large_binary())
    table = pa.table(
        {
            "review": pa.array(texts),
            "key": pa.ExtensionArray.from_storage(ArrowPythonObjectType(), blobs),
        }
    )
    pq.write_table(table, tmp_path / "planted.parquet")
    with pytest.raises(ValueError, match=r"column 'key' of '.*planted.parquet'"):
        extract_to_store(
            tmp_path / "planted.parquet",
            tmp_path / "p",
            **{**kw, "id_column": "key", "columns": None},
        )
    assert not marker.exists()
