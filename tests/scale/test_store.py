"""The layer store: its format, its readers, its checks, and lazy reading.

A store written by ``extract_to_store`` reads back bitwise what one
``HiddenStatesTransformer`` returns, by layers and rows in bounded batches;
pyarrow, pandas, polars and Dask read its folder directly; a damaged or
mismatched store is a one-line error naming it; a hidden half-written file is
never read; and estimators given a store read only what they need.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from skloes.scale import LayerStore, StoreError, StoreView


def test_store_reads_back_the_extractor_output_by_layers_and_rows(
    extract, texts, reference, tmp_path
):
    store = extract(texts, tmp_path / "s")
    assert isinstance(store, LayerStore) and store.complete
    assert store.shape == reference.shape == (3, 230, 8)
    assert store.n_shards == 4  # 64, 64, 64, 38 rows
    np.testing.assert_array_equal(store.read(), reference)
    np.testing.assert_array_equal(np.asarray(store), reference)
    np.testing.assert_array_equal(store.row_ids(), np.arange(230))
    rows = np.array([229, 3, 64, 63, 3])  # any order, repeats, across shards
    view = store.select(layers=[2, 0], rows=rows)
    assert isinstance(view, StoreView) and view.shape == (2, 5, 8)
    np.testing.assert_array_equal(view.read(), reference[[2, 0]][:, rows])
    np.testing.assert_array_equal(store[1][rows], reference[1][rows])
    np.testing.assert_array_equal(store[:, rows], reference[:, rows])
    np.testing.assert_array_equal(store[2, 7], reference[2, 7])
    np.testing.assert_array_equal(view.select(rows=[1, 2]).read(), view.read()[:, 1:3])
    sizes = [len(b.positions) for b in store.iter_batches(batch_size=20)]
    assert max(sizes) <= 20 and sum(sizes) == 230


def test_store_folder_is_read_directly_by_parquet_readers(extract, texts, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds

    store = extract(
        _frame(texts), tmp_path / "s", columns=["label"], id_column="doc", layers=[1, 2]
    )
    # A half-written shard is a hidden temporary file: readers skip it.
    (tmp_path / "s" / ".tmp-part-00009.parquet-x").write_bytes(b"PAR1 half")
    schema = ds.dataset(tmp_path / "s", format="parquet").schema
    assert schema.field("row_id").type == pa.int64()
    assert schema.field("layer1").type == pa.list_(pa.float32(), 8)
    assert schema.names[:3] == ["row_id", "doc", "label"]
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "s")
    assert list(frame.row_id) == list(range(230))
    np.testing.assert_array_equal(np.stack(frame.layer2.to_numpy()), store.read()[1])
    pl = pytest.importorskip("polars")
    assert pl.read_parquet(tmp_path / "s" / "*.parquet").height == 230
    dd = pytest.importorskip("dask.dataframe")
    assert len(dd.read_parquet(str(tmp_path / "s"))) == 230
    np.testing.assert_array_equal(store.column("doc"), [f"d{i}" for i in range(230)])


def _frame(texts):
    import pandas as pd

    return pd.DataFrame(
        {
            "text": texts,
            "label": [["a", "b"][i % 2] for i in range(len(texts))],
            "doc": [f"d{i}" for i in range(len(texts))],
        }
    )


def _one_line(exc, path):
    message = str(exc.value)
    assert "\n" not in message and str(path) in message
    return message


def test_damaged_or_mismatched_store_is_a_one_line_error(
    extract, texts, tmp_path, tiny_model_path
):
    path = tmp_path / "s"
    extract(texts, path)
    store = LayerStore(path)
    with pytest.raises(StoreError, match=r"holds layers \[0, 1, 2\], not layer 5") as e:
        store.select(layers=[5])
    _one_line(e, path)
    # A changed byte keeps the size: verify finds it by its checksum.
    shard = path / "part-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="part-00001.parquet does not hash") as e:
        LayerStore(path).verify()
    _one_line(e, path)
    # Another job's manifest over these shards: their footers say so.
    other = tmp_path / "other"
    extract(texts, other, layers=[0, 1, 2], pooling="max")
    (path / "_manifest.json").write_text((other / "_manifest.json").read_text())
    with pytest.raises(StoreError, match="written for other settings") as e:
        LayerStore(path).read()
    _one_line(e, path)
    # A missing shard is named when the store is opened.
    (other / "part-00002.parquet").unlink()
    with pytest.raises(StoreError, match="part-00002.parquet, listed in its") as e:
        LayerStore(other)
    _one_line(e, other)
    with pytest.raises(StoreError, match="not a layer store"):
        LayerStore(tmp_path)


def test_a_store_resumed_with_another_model_or_layers_is_refused(
    extract, texts, tmp_path, deep_tiny
):
    path = tmp_path / "s"
    extract(texts[:100], path)
    from skloes.scale import extract_to_store

    with pytest.raises(StoreError, match="holds states of model") as e:
        extract_to_store(texts[:100], path, model=deep_tiny, verbose=0, shard_size=64)
    _one_line(e, path)
    with pytest.raises(StoreError, match="layers=\\[0, 1, 2\\]; this job asks"):
        extract(texts[:100], path, layers=[1])
    with pytest.raises(StoreError, match="holds other texts"):
        extract(texts[1:101], path)


def test_a_store_whose_manifest_an_older_skloes_wrote_reads_and_resumes(
    extract, texts, reference, tmp_path
):
    path = tmp_path / "s"
    extract(texts, path)
    manifest = json.loads((path / "_manifest.json").read_text())
    # Its former style, on disk in older stores: indented by one, keys sorted.
    (path / "_manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    store = LayerStore(path).verify()
    assert store.complete and store.n_shards == 4
    np.testing.assert_array_equal(store.read(), reference)
    # A job of the same settings takes the folder as its own, and writes the
    # manifest in the one style of a sealed folder.
    from skloes.core._sealed import manifest_text

    np.testing.assert_array_equal(extract(texts, path).read(), reference)
    text = (path / "_manifest.json").read_text()
    assert json.loads(text) == manifest and text == manifest_text(json.loads(text))


def test_an_incomplete_store_is_refused_by_estimators(extract, texts, tmp_path):
    from skloes import LOESSelector

    path = tmp_path / "s"
    extract(texts, path)
    manifest = json.loads((path / "_manifest.json").read_text())
    manifest["complete"] = False
    (path / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="is incomplete .* LOESSelector needs"):
        LOESSelector().fit(LayerStore(path), np.arange(230) % 2)


def test_float16_store_is_within_rounding_and_overflow_is_checked(
    extract, texts, reference, tmp_path, monkeypatch
):
    store = extract(texts, tmp_path / "f16", dtype="float16")
    assert (
        store.dtype == np.float16 and store.manifest["layer_dtypes"] == ["float16"] * 3
    )
    np.testing.assert_allclose(store.read(), reference, rtol=1e-3, atol=1e-3)
    assert (
        store.nbytes()
        < 0.75 * LayerStore(extract(texts, tmp_path / "f32").path).nbytes()
    )
    # A layer too large for float16 in the first shard: refused, or float32.
    from skloes.scale import _extract

    peaks = np.abs(reference).max(axis=(1, 2))
    monkeypatch.setattr(_extract, "FLOAT16_SAFE", float(np.sort(peaks)[1]))
    big = int(np.argmax(peaks))
    with pytest.raises(StoreError, match=f"layers \\[{big}\\] reach"):
        extract(texts, tmp_path / "refused", dtype="float16")
    with pytest.warns(UserWarning, match=f"layers \\[{big}\\] reach .* float32"):
        kept = extract(
            texts, tmp_path / "kept", dtype="float16", float16_overflow="float32"
        )
    assert kept.layer_dtype(big) == "float32"
    assert sum(kept.layer_dtype(l) == "float16" for l in kept.layers) == 2
    np.testing.assert_array_equal(kept.read()[big], reference[big])
    # A later shard beyond float16's range is an error naming layer and shard:
    # the texts with the smallest values first, a limit between the shards.
    order = np.argsort(np.abs(reference).max(axis=(0, 2)), kind="stable")
    ordered = reference[:, order]
    first = np.abs(ordered[:, :64]).max()
    later = np.abs(ordered[:, 64:]).max(axis=(1, 2))
    limit = (first + later.max()) / 2
    monkeypatch.setattr(_extract, "FLOAT16_MAX", limit)
    monkeypatch.setattr(_extract, "FLOAT16_SAFE", limit)
    with pytest.raises(StoreError, match="layer [0-2] reaches .* in shard [1-3],"):
        extract([texts[i] for i in order], tmp_path / "later", dtype="float16")


def test_temporaries_are_never_read_and_a_rerun_removes_them(extract, texts, tmp_path):
    from skloes.core._store import temporary_prefix

    path = tmp_path / "s"
    store = extract(texts, path)
    # what a killed writer of this job leaves: its name carries the job's token
    junk = path / (
        temporary_prefix(store.manifest["digest"], "part-00003.parquet") + "abc"
    )
    junk.write_bytes(b"PAR1")
    mine = path / ".tmp-part-00003.parquet-abc"  # a user's file of a like name
    mine.write_bytes(b"notes")
    store = LayerStore(path)
    assert store.n_rows == 230 and store.verify() is store
    extract(texts, path)
    assert not junk.exists()
    assert mine.read_bytes() == b"notes"  # a job deletes only what it wrote


def test_loes_reads_only_the_calibration_rows_of_a_store(
    extract, texts, reference, tmp_path, monkeypatch
):
    from skloes import LOESSelector
    from skloes.core import _store

    store = extract(texts, tmp_path / "s")
    y = np.arange(230) % 3
    read = []
    real = _store.StoreBatch.__init__

    def count(self, positions, row_ids, stack, columns):
        read.append(stack.shape[0] * stack.shape[1])
        real(self, positions, row_ids, stack, columns)

    monkeypatch.setattr(_store.StoreBatch, "__init__", count)
    kw = {"n_layers_to_select": 2, "max_samples": 60, "random_state": 0}
    on_disk = LOESSelector(**kw).fit(store, y)
    assert sum(read) == 3 * 60  # each layer's calibration rows, once
    in_memory = LOESSelector(**kw).fit(reference, y)
    np.testing.assert_array_equal(on_disk.selection_order_, in_memory.selection_order_)
    np.testing.assert_array_equal(
        on_disk.calibration_indices_, in_memory.calibration_indices_
    )
    read.clear()
    fused = on_disk.transform(store)  # only the selected layers are read
    assert sum(read) == 2 * 230
    # exact: the store holds the reference's bytes; fusing is elementwise
    np.testing.assert_array_equal(fused, in_memory.transform(reference))


def test_every_stack_consumer_takes_a_store_view(extract, texts, tmp_path):
    from skloes.report import LayerReport
    from skloes.selection import BestSingleLayerSelector, LOESSelectorCV

    store = extract(texts, tmp_path / "s")
    y = np.arange(230) % 2
    stack = store.read()
    report = LayerReport(cv=3, metrics=("isotropy",), random_state=0)
    np.testing.assert_allclose(
        report.fit(store, y).to_frame().to_numpy(dtype=float),
        LayerReport(cv=3, metrics=("isotropy",), random_state=0)
        .fit(stack, y)
        .to_frame()
        .to_numpy(dtype=float),
        equal_nan=True,
    )
    for selector in (BestSingleLayerSelector(cv=3), LOESSelectorCV(cv=3)):
        a = selector.fit(store.select(rows=np.arange(200)), y[:200])
        assert a.n_layers_in_ == 3 and a.n_selected_ >= 1
    from skloes import LOESSelector

    with pytest.raises(ValueError, match="has 230 rows, but `y` has 229"):
        LOESSelector().fit(store, y[:-1])  # lazy: the store's own check
    with pytest.raises(ValueError, match="has 230 samples, but `y` has 229"):
        BestSingleLayerSelector().fit(store, y[:-1])  # read: the stack's check


def test_store_manifest_records_what_the_user_guide_says(extract, texts, tmp_path):
    store = extract(_frame(texts), tmp_path / "s", columns=["label"], id_column="doc")
    manifest = store.manifest
    for key in ("model", "extraction", "layers", "dim", "dtype", "layer_dtypes"):
        assert key in manifest
    assert set(manifest["model"]) == {"reference", "fingerprint", "n_hidden_states"}
    assert set(manifest["extraction"]) == {
        "pooling",
        "exclude_tokens",
        "max_length",
        "precision",
    }
    entry = manifest["shards"][0]
    assert {"file", "rows", "sha256", "bytes"} <= set(entry)
    assert manifest["columns"] == ["doc", "label"] and manifest["id_column"] == "doc"
    names = os.listdir(store.path)
    assert not any(name.endswith((".pkl", ".pickle", ".npy")) for name in names)
