"""Batch prediction at scale: a saved probe over a folder of files, resumable.

predict_to_parquet writes what the probe predicts, row for row with the
user's ids; an interrupted job resumes from its parts; an exported probe
runs on Ray actors and Dask workers without importing torch.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _support.clusters import local_dask_cluster, shared_ray

from skloes.scale import predict_to_parquet

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory, tiny_model_path):
    from _support.probes import saved_tiny_probe

    folder = tmp_path_factory.mktemp("probes") / "tiny"
    return saved_tiny_probe(folder, tiny_model_path, 80)


def _folder(texts, path):
    import pandas as pd

    path.mkdir()
    frame = pd.DataFrame({"text": texts, "doc": [f"d{i}" for i in range(len(texts))]})
    frame[:100].to_csv(path / "a.csv", index=False)
    frame[100:].to_parquet(path / "b.parquet")
    return path


def test_predictions_keep_the_ids_and_equal_the_probe(probe_dir, texts, tmp_path):
    import pandas as pd

    from skloes.probe import load_probe

    data = _folder(texts, tmp_path / "in")
    out = predict_to_parquet(
        probe_dir,
        data,
        tmp_path / "preds.parquet",
        id_column="doc",
        shard_size=50,
        verbose=0,
    )
    frame = pd.read_parquet(out)
    assert frame.columns.tolist() == [
        "row_id",
        "doc",
        "prediction",
        "proba_neg",
        "proba_pos",
    ]
    assert frame.row_id.tolist() == list(range(230))
    assert frame.doc.tolist() == [f"d{i}" for i in range(230)]
    probe = load_probe(probe_dir)
    expected = np.concatenate(
        [probe.predict(texts[i : i + 50]) for i in range(0, 230, 50)]
    )
    assert frame.prediction.tolist() == expected.tolist()
    np.testing.assert_allclose(
        frame[["proba_neg", "proba_pos"]].to_numpy(),
        probe.predict_proba(texts),
        atol=1e-5,
    )
    assert not any(p.name.startswith(".preds") for p in tmp_path.iterdir())


def test_an_interrupted_prediction_resumes_from_its_parts(probe_dir, texts, tmp_path):
    import pandas as pd

    class Stop(Exception):
        pass

    done = []

    def stop_after_two(result):
        done.append(result["record"]["index"])
        if len(done) == 2:
            raise Stop

    out = tmp_path / "p.parquet"
    kw = {"shard_size": 40, "verbose": 0}
    with pytest.raises(Stop):
        predict_to_parquet(probe_dir, texts, out, callback=stop_after_two, **kw)
    assert not out.exists()  # only a complete file is ever written
    done.clear()
    predict_to_parquet(probe_dir, texts, out, callback=done.append, **kw)
    assert sorted(r["record"]["index"] for r in done) == [2, 3, 4, 5]  # 0, 1 kept
    whole = predict_to_parquet(probe_dir, texts, tmp_path / "w.parquet", **kw)
    # exact: the kept parts and the rerun's are the same shards' batches
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(whole))
    with pytest.raises(ValueError, match="exists; pass overwrite=True"):
        predict_to_parquet(probe_dir, texts, out, **kw)
    with pytest.raises(ValueError, match="must be a .parquet file"):
        predict_to_parquet(probe_dir, texts, tmp_path / "p.csv", **kw)


def test_a_bad_probe_folder_fails_before_any_work(tmp_path, texts):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a saved probe|no readable"):
        predict_to_parquet(tmp_path / "empty", texts, tmp_path / "p.parquet", verbose=0)
    assert not (tmp_path / ".p.parquet.parts").exists()


@pytest.fixture(scope="module")
def exported(tmp_path_factory, minilm_path, rotten_tomatoes_small):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from skloes.probe import LayerProbeClassifier, save_probe

    texts, y = rotten_tomatoes_small
    texts = [str(t) for t in texts[:120]]
    # the default probe, whatever fusion it chooses: its head is plain arrays
    # (head.npz), so a worker imports neither torch nor scikit-learn
    probe = LayerProbeClassifier(minilm_path, max_length=48, random_state=0).fit(
        texts, y[:120]
    )
    folder = tmp_path_factory.mktemp("exported") / "rt"
    return save_probe(probe, folder, export="onnx", check_texts=texts[:16])


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["dask", "ray"])
def test_an_exported_probe_predicts_on_workers_without_torch(
    engine, exported, rotten_tomatoes_small, tmp_path
):
    import pandas as pd

    texts = [str(t) for t in rotten_tomatoes_small[0][120:200]]
    data = tmp_path / "new.parquet"
    pd.DataFrame({"text": texts, "key": np.arange(80) * 10}).to_parquet(data)
    local = predict_to_parquet(
        exported,
        data,
        tmp_path / "local.parquet",
        id_column="key",
        shard_size=20,
        verbose=0,
    )
    results = []

    def predict_there():
        return predict_to_parquet(
            exported,
            data,
            tmp_path / "there.parquet",
            id_column="key",
            shard_size=20,
            engine=engine,
            verbose=0,
            callback=results.append,
        )

    if engine == "dask":
        distributed = pytest.importorskip("distributed")
        with (
            local_dask_cluster() as cluster,
            distributed.Client(cluster, timeout="60s"),
        ):
            there = predict_there()
    else:
        shared_ray()
        there = predict_there()
    a, b = pd.read_parquet(local), pd.read_parquet(there)
    assert b.key.tolist() == list(np.arange(80) * 10)
    assert (a.prediction == b.prediction).all()
    np.testing.assert_allclose(
        a.filter(like="proba").to_numpy(), b.filter(like="proba").to_numpy(), atol=1e-5
    )
    assert len(results) == 4
    assert not any(r["torch_imported"] for r in results)  # ONNX Runtime only
    assert all(r["worker"].split(":")[1] != str(os.getpid()) for r in results)


def test_one_writer_per_prediction_output(probe_dir, texts, tmp_path):
    """A second job on the same output meets the first's lock on its parts
    folder at once, naming the holder (issue 42); once released, it runs."""
    from skloes.core._atomic import FolderLock
    from skloes.scale import StoreError

    parts = tmp_path / ".p.parquet.parts"
    parts.mkdir()
    lock = FolderLock(parts, note=True)  # the first job, mid-run
    try:
        with pytest.raises(
            StoreError, match=r"\.p\.parquet\.parts.*being written by another job \(pid"
        ):
            predict_to_parquet(probe_dir, texts, tmp_path / "p.parquet", verbose=0)
    finally:
        lock.release()
    out = predict_to_parquet(probe_dir, texts, tmp_path / "p.parquet", verbose=0)
    assert out.exists() and not parts.exists()  # the parts folder is gone
