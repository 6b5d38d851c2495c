"""One runner for every sharded job: a failure at any step leaves the folder
free and clean, and the same call then succeeds in the same process.

Extraction, batch prediction and probe_at_scale's predictions are made to
fail while reading their input, starting their sink, writing a block and
completing; each time the writer lock is released (a new writer takes it),
no temporary file is left, and the same call run again gives what a clean
run gives.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

SHARD = 16
N = 40
STEPS = ["input", "start", "block", "complete"]


class Injected(RuntimeError):
    """The failure a test makes happen."""


def fail_once(monkeypatch, owner, name, at=1):
    """``owner.name`` raises :class:`Injected` on its ``at``-th call, then
    works again (the rerun finds the code as it was)."""
    original = getattr(owner, name)
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            raise Injected(f"{name} failed")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)
    return calls


def fail_midway(monkeypatch, owner, name):
    """The generator ``owner.name`` raises :class:`Injected` after its first
    item, once."""
    original = getattr(owner, name)
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        items = original(*args, **kwargs)
        if len(calls) > 1:
            yield from items
            return
        yield next(items)
        raise Injected(f"{name} failed")

    monkeypatch.setattr(owner, name, failing)


def assert_free_and_clean(folder):
    """No writer holds ``folder``, and no temporary of a job is left in it."""
    from skloes.core._atomic import WRITER_NOTE, FolderLock

    if not folder.exists():
        return
    names = sorted(p.name for p in folder.iterdir())
    assert WRITER_NOTE not in names, names
    assert not [n for n in names if n.startswith(".skloes-")], names
    FolderLock(folder, note=True).release()  # taken at once: nobody holds it


@pytest.fixture(scope="module")
def texts():
    from _support.texts import make_texts

    return make_texts(N, seed=11)


def _csv_folder(path, texts, damaged=False):
    """Two CSV files of the texts; the second damaged (not UTF-8) on demand."""
    import pandas as pd

    path.mkdir(exist_ok=True)
    frame = pd.DataFrame({"text": texts, "doc": [f"d{i}" for i in range(len(texts))]})
    frame[: N // 2].to_csv(path / "a.csv", index=False)
    if damaged:
        (path / "b.csv").write_bytes(b"text,doc\n\xff\xfe broken,d99\n")
    else:
        frame[N // 2 :].to_csv(path / "b.csv", index=False)
    return path


# ------------------------------------------------------------- extraction
def _extract(data, store, model, **kw):
    """extract_to_store of the CSV folder with the tiny model, quiet."""
    from skloes.scale import extract_to_store

    kw.update(model=model, id_column="doc", shard_size=SHARD, verbose=0)
    return extract_to_store(data, store, device="cpu", **kw)


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory, texts, tiny_model_path):
    folder = tmp_path_factory.mktemp("clean")
    data = _csv_folder(folder / "in", texts)
    return _extract(data, folder / "store", tiny_model_path)


def _break(step, monkeypatch, sink_class):
    """Make ``step`` of the next job fail (``input`` is the data's)."""
    from skloes.scale._sink import ShardSink

    if step == "start":
        fail_once(monkeypatch, ShardSink, "_remove_temporaries")
    elif step == "block":
        fail_once(monkeypatch, sink_class, "block", at=2)
    elif step == "complete":
        fail_once(monkeypatch, ShardSink, "complete")


@pytest.mark.parametrize("step", STEPS)
def test_extraction_fails_at_each_step_then_runs_again(
    step, monkeypatch, texts, tiny_model_path, clean_store, tmp_path
):
    from skloes.scale._sink import StoreSink

    data = _csv_folder(tmp_path / "in", texts, damaged=step == "input")
    store = tmp_path / "store"

    def run():
        return _extract(data, store, tiny_model_path)

    _break(step, monkeypatch, StoreSink)
    with pytest.raises(ValueError if step == "input" else Injected):
        run()
    assert_free_and_clean(store)
    if step == "input":
        _csv_folder(data, texts)  # the user mends the file
    again = run()
    assert again.verify() and again.n_rows == N
    np.testing.assert_array_equal(again.read(), clean_store.read())
    assert again.column("doc").tolist() == clean_store.column("doc").tolist()
    assert_free_and_clean(store)


def test_a_ray_job_stopped_on_the_driver_runs_again(
    ray_cluster, texts, tiny_model_path, clean_store, tmp_path
):
    """On Ray too: the staged copies of the texts go, the lock is released,
    and the same call resumes on the same cluster."""
    data = _csv_folder(tmp_path / "in", texts)
    store = tmp_path / "store"
    seen = []

    def stop_once(result):
        seen.append(result)
        if len(seen) == 1:
            raise Injected("stopped on the driver")

    def run():
        return _extract(
            data,
            store,
            tiny_model_path,
            engine="ray",
            n_workers=1,
            threads_per_worker=1,
            callback=stop_once,
        )

    with pytest.raises((Injected, RuntimeError)):
        run()
    assert_free_and_clean(store)
    again = run()
    assert again.verify() and again.n_rows == N
    np.testing.assert_allclose(again.read(), clean_store.read(), rtol=1e-4, atol=1e-5)
    assert_free_and_clean(store)


# ------------------------------------------------------------- prediction
@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory, tiny_model_path):
    from _support.texts import make_texts

    from skloes.probe import LayerProbeClassifier, save_probe

    train = make_texts(40, seed=3)
    y = np.asarray(["neg", "pos"])[np.arange(40) % 2]
    probe = LayerProbeClassifier(tiny_model_path, device="cpu").fit(train, y)
    return save_probe(probe, tmp_path_factory.mktemp("probes") / "tiny")


@pytest.fixture(scope="module")
def clean_predictions(tmp_path_factory, probe_dir, texts):
    import pandas as pd

    from skloes.scale import predict_to_parquet

    folder = tmp_path_factory.mktemp("clean_predictions")
    data = _csv_folder(folder / "in", texts)
    out = predict_to_parquet(
        probe_dir,
        data,
        folder / "p.parquet",
        id_column="doc",
        shard_size=SHARD,
        verbose=0,
    )
    return pd.read_parquet(out)


@pytest.mark.parametrize("step", STEPS + ["join"])
def test_prediction_fails_at_each_step_then_runs_again(
    step, monkeypatch, probe_dir, texts, clean_predictions, tmp_path
):
    import pandas as pd

    from skloes.scale import predict_to_parquet
    from skloes.scale._sink import PartsSink

    data = _csv_folder(tmp_path / "in", texts)
    if step == "input":  # a damaged Parquet file: its footer does not read
        data = tmp_path / "in.parquet"
        data.write_bytes(b"PAR1 this is not a parquet file PAR1")
    out = tmp_path / "p.parquet"

    def run(data):
        return predict_to_parquet(
            probe_dir, data, out, id_column="doc", shard_size=SHARD, verbose=0
        )

    if step == "join":
        fail_once(monkeypatch, PartsSink, "_join")
    else:
        _break(step, monkeypatch, PartsSink)
    with pytest.raises(ValueError if step == "input" else Injected):
        run(data)
    assert not out.exists()
    assert_free_and_clean(PartsSink.parts_folder(out))
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".skloes-")]
    if step == "input":  # the same call, with a good input
        data = _csv_folder(tmp_path / "in", texts)
    pd.testing.assert_frame_equal(pd.read_parquet(run(data)), clean_predictions)
    assert not PartsSink.parts_folder(out).exists()


# ------------------------------------------------------- probe_at_scale
def _labelled_frame(texts):
    import pandas as pd

    labels = np.asarray(["a", "b"] * (N // 2), dtype=object)
    labels[-6:] = None
    return pd.DataFrame(
        {"body": texts, "label": labels, "doc": [f"d{i:03d}" for i in range(N)]}
    )


def _probe_at_scale(data, job, model):
    from skloes.scale import probe_at_scale

    return probe_at_scale(
        data,
        job,
        text_column="body",
        id_column="doc",
        model=model,
        calibration_size=20,
        shard_size=SHARD,
        verbose=0,
        device="cpu",
    )


@pytest.fixture(scope="module")
def clean_job(tmp_path_factory, texts, tiny_model_path):
    import pandas as pd

    folder = tmp_path_factory.mktemp("clean_job")
    data = folder / "in.parquet"
    _labelled_frame(texts).to_parquet(data)
    result = _probe_at_scale(data, folder / "job", tiny_model_path)
    return pd.read_parquet(result.predictions)


@pytest.mark.parametrize("step", STEPS + ["join"])
def test_probe_at_scale_predictions_fail_at_each_step_then_run_again(
    step, monkeypatch, texts, tiny_model_path, clean_job, tmp_path
):
    """The predictions go through the parts sink like predict_to_parquet's;
    the extractions before them are the tests above."""
    import pandas as pd
    import pyarrow.parquet as pq

    from skloes.core._store import FOOTER_KEY
    from skloes.scale import _workflow
    from skloes.scale._sink import PartsSink, ShardSink

    data = tmp_path / "in.parquet"
    _labelled_frame(texts).to_parquet(data)
    job = tmp_path / "job"
    out = job / "predictions.parquet"
    if step == "input":  # the store's rows to predict fail to read
        fail_midway(monkeypatch, _workflow, "_prediction_tasks")
    elif step == "join":
        fail_once(monkeypatch, PartsSink, "_join")
    else:
        # the extractions' sinks start and complete first: the predictions'
        # are the third job of the workflow
        at = 3 if step in ("start", "complete") else 1
        name = {"start": "_remove_temporaries", "complete": "complete"}.get(step)
        if name is None:
            fail_once(monkeypatch, PartsSink, "block")
        else:
            fail_once(monkeypatch, ShardSink, name, at=at)
    with pytest.raises(Injected):
        _probe_at_scale(data, job, tiny_model_path)
    assert not out.exists()
    assert PartsSink.parts_folder(out).is_dir()  # it failed in the third job
    for folder in (job / "calibration", job / "store", PartsSink.parts_folder(out)):
        assert_free_and_clean(folder)
    again = _probe_at_scale(data, job, tiny_model_path)
    assert again.predictions == out and again.n_predicted == 6
    pd.testing.assert_frame_equal(pd.read_parquet(out), clean_job)
    assert not PartsSink.parts_folder(out).exists()
    # the footer that lets the next run replace the file
    mark = pq.read_metadata(out).metadata[FOOTER_KEY]
    assert mark == _workflow.PREDICTIONS_MARK
