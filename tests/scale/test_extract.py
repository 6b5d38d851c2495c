"""extract_to_store on the local process: inputs, layers, resuming, a real model.

The inputs a job reads (a list, pandas and polars frames, CSV/JSONL/Parquet
files and folders) give the same store; layers come from a list, a fitted
selector or a probe, and the forward pass stops at the deepest; a re-run
skips the shards the store holds whole, adopts those a killed driver wrote
but did not record, and rewrites a damaged one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _support.rounding import assert_same_states, forward_terms

from skloes.scale import LayerStore, StoreError


def _frame(texts):
    import pandas as pd

    return pd.DataFrame(
        {
            "id": [f"doc-{i}" for i in range(len(texts))],
            "text": texts,
            "label": [["neg", "pos"][i % 2] for i in range(len(texts))],
        }
    )


def test_every_input_form_gives_the_same_store(
    extract, texts, reference, tmp_path, monkeypatch
):
    from skloes.scale import _input

    monkeypatch.setattr(_input, "READ_BATCH", 50)  # chunks cut across reads
    frame = _frame(texts)
    folder = tmp_path / "in"
    folder.mkdir()
    frame[:100].to_parquet(folder / "a.parquet")
    frame[100:150].to_csv(folder / "b.csv", index=False)
    frame[150:].to_json(folder / "c.jsonl", orient="records", lines=True)
    (folder / "_ignored.csv").write_text("not,data\n")
    pl = pytest.importorskip("polars")
    inputs = {
        "list": (texts, {}),
        "pandas": (frame, {"id_column": "id", "columns": ["label"]}),
        "polars": (pl.from_pandas(frame), {"id_column": "id", "columns": ["label"]}),
        "folder": (folder, {"id_column": "id", "columns": ["label"]}),
    }
    for name, (data, kw) in inputs.items():
        store = extract(data, tmp_path / name, **kw)
        np.testing.assert_array_equal(store.read(), reference, err_msg=name)
        np.testing.assert_array_equal(store.row_ids(), np.arange(230))
        if kw:
            assert list(store.column("id")) == list(frame.id)
            assert list(store.column("label")) == list(frame.label)


def test_rows_extracts_a_subset_keeping_input_positions(extract, texts, tmp_path):
    from skloes import HiddenStatesTransformer

    rows = np.array([200, 3, 17, 150, 4])
    store = extract(texts, tmp_path / "s", rows=rows, shard_size=2)
    np.testing.assert_array_equal(store.row_ids(), np.sort(rows))
    hst = HiddenStatesTransformer(store.model["reference"], device="cpu")
    chunks = [[3, 4], [17, 150], [200]]  # the shards, in input order
    expected = np.concatenate(
        [hst.fit([texts[0]]).transform([texts[i] for i in c]) for c in chunks], axis=1
    )
    np.testing.assert_array_equal(store.read(), expected)


@pytest.mark.cpu_sensitive
def test_layers_of_a_selector_or_a_probe_are_extracted(
    extract, texts, tmp_path, deep_tiny
):
    from skloes import HiddenStatesTransformer, LayerProbeClassifier, LOESSelector
    from skloes.scale import extract_to_store

    y = np.arange(230) % 2
    stack = HiddenStatesTransformer(deep_tiny, device="cpu").fit_transform(texts)
    selector = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    chosen = [int(l) for l in selector.selected_layers_]
    kw = {"model": deep_tiny, "verbose": 0, "shard_size": 64, "device": "cpu"}
    store = extract_to_store(texts, tmp_path / "sel", layers=selector, **kw)
    assert store.layers.tolist() == chosen
    # shards of 64 against one transform's batches; 6 blocks of width 16
    assert_same_states(store.read(), stack[chosen], terms=forward_terms(16, 7))
    probe = LayerProbeClassifier(model=deep_tiny, device="cpu", selector=selector)
    probe.fit(texts[:60], y[:60])
    store = extract_to_store(texts[:60], tmp_path / "probe", layers=probe, **kw)
    assert store.layers.tolist() == probe.selected_layers_.tolist()
    # A selector over other layers than the model's is refused.
    other = LOESSelector(n_layers_to_select=1).fit(stack[:3], y)
    with pytest.raises(ValueError, match="fitted on 3 layers, but the model has 7"):
        extract_to_store(texts, tmp_path / "bad", layers=other, **kw)


def test_the_forward_pass_stops_at_the_deepest_layer(deep_tiny, texts, tmp_path):
    from skloes.core._torch import torch
    from skloes.scale import extract_to_store

    entered = {"n": 0}

    def count(module, inputs):
        if type(module).__name__ == "BertLayer":
            entered["n"] += 1

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    runs = {}
    try:
        for layers in ([2], "all"):
            entered["n"] = 0
            extract_to_store(
                texts[:40],
                tmp_path / str(layers),
                model=deep_tiny,
                layers=layers,
                verbose=0,
                device="cpu",
            )
            runs[str(layers)] = entered["n"]
    finally:
        handle.remove()
    assert runs["all"] == 3 * runs["[2]"] > 0  # blocks 1-2 of 6, per batch


def test_a_rerun_skips_verified_shards_and_rewrites_a_damaged_one(
    extract, texts, reference, tmp_path
):
    path = tmp_path / "s"
    done = []
    extract(texts, path, callback=done.append)
    assert sorted(r["record"]["index"] for r in done) == [0, 1, 2, 3]
    done.clear()
    extract(texts, path, callback=done.append)
    assert done == []  # every shard verified, none computed
    shard = path / "part-00002.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    store = extract(texts, path, callback=done.append)
    assert [r["record"]["index"] for r in done] == [2]
    np.testing.assert_array_equal(store.verify().read(), reference)


def test_a_rerun_adopts_shards_a_killed_driver_wrote_but_did_not_record(
    extract, texts, reference, tmp_path
):
    path = tmp_path / "s"
    extract(texts, path)
    manifest = json.loads((path / "_manifest.json").read_text())
    manifest["shards"] = manifest["shards"][:1]  # as if killed after shard 0
    manifest["complete"], manifest["n_rows"] = False, None
    (path / "_manifest.json").write_text(json.dumps(manifest))
    (path / "part-00003.parquet").unlink()  # and before shard 3 was written
    done = []
    store = extract(texts, path, callback=done.append)
    assert [r["record"]["index"] for r in done] == [3]
    assert store.complete and store.n_shards == 4
    np.testing.assert_array_equal(store.verify().read(), reference)


def test_bad_inputs_are_one_line_errors(extract, texts, tmp_path):
    frame = _frame(texts)
    frame.loc[5, "text"] = None
    with pytest.raises(ValueError, match="row 5 of the DataFrame has no text"):
        extract(frame, tmp_path / "a")
    with pytest.raises(ValueError, match="`id_column` 'doc' is not a column"):
        extract(_frame(texts), tmp_path / "b", id_column="doc")
    with pytest.raises(ValueError, match="a list of texts has no columns"):
        extract(texts, tmp_path / "c", columns=["label"])
    with pytest.raises(ValueError, match="does not exist"):
        extract(tmp_path / "nothing.csv", tmp_path / "d")
    with pytest.raises(ValueError, match="`engine` must be one of"):
        extract(texts, tmp_path / "e", engine="spark")
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "mine.txt").write_text("keep me")
    with pytest.raises(StoreError, match="holds 'mine.txt' but no manifest"):
        extract(texts, tmp_path / "f")
    assert (tmp_path / "f" / "mine.txt").read_text() == "keep me"


@pytest.mark.integration
def test_minilm_store_of_real_text_equals_the_extractor(
    minilm_path, rotten_tomatoes_small, tmp_path
):
    from skloes import HiddenStatesTransformer
    from skloes.scale import extract_to_store

    texts = [str(t) for t in rotten_tomatoes_small[0][:120]]
    store = extract_to_store(
        texts,
        tmp_path / "s",
        model=minilm_path,
        layers=[2, 4],
        max_length=64,
        shard_size=40,
        verbose=0,
        device="cpu",
    )
    hst = HiddenStatesTransformer(minilm_path, layers=[2, 4], max_length=64).fit(texts)
    expected = np.concatenate(
        [hst.transform(texts[i : i + 40]) for i in range(0, 120, 40)], axis=1
    )
    np.testing.assert_array_equal(store.read(), expected)
    np.testing.assert_allclose(store.read(), hst.transform(texts), atol=1e-5)
    assert store.manifest["extraction"]["max_length"] == 64
    assert store.verify() is not None and LayerStore(store.path).n_rows == 120
