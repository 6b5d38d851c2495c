"""Choose on a sample, then run big: probe_at_scale on MiniLM and real text.

The calibration sample is stratified over the labelled rows and holds every
layer; the big store holds only the chosen layers; the head is the streaming
fit of every labelled row; the predictions are those of the unlabelled rows,
with their ids; and the same call run again rewrites nothing.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.integration
def test_probe_at_scale_chooses_on_a_sample_then_runs_big(
    minilm_path, rotten_tomatoes_small, tmp_path
):
    import pandas as pd

    from skloes.scale import StreamingRidgeClassifier, probe_at_scale

    texts, y = rotten_tomatoes_small
    unlabelled = np.arange(240, 300)
    labels = np.asarray(y, dtype=object).copy()
    labels[unlabelled] = None
    frame = pd.DataFrame(
        {
            "review": [str(t) for t in texts],
            "y": labels,
            "key": [f"r{i}" for i in range(300)],
        }
    )
    data = tmp_path / "reviews.parquet"
    frame.to_parquet(data)
    kw = dict(
        label_column="y",
        text_column="review",
        id_column="key",
        model=minilm_path,
        calibration_size=120,
        max_length=48,
        shard_size=64,
        verbose=0,
        device="cpu",
    )
    result = probe_at_scale(data, tmp_path / "job", **kw)

    cal = result.calibration_store
    assert cal.layers.tolist() == list(range(7)) and cal.n_rows == 120
    ids = cal.row_ids()
    assert not set(ids) & set(unlabelled)  # sampled from the labelled rows only
    share = np.mean(np.asarray(y)[ids] == np.asarray(y)[0])
    assert abs(share - np.mean(np.asarray(y)[:240] == np.asarray(y)[0])) < 0.02
    chosen = cal.layers[result.selector.selected_layers_].tolist()
    assert result.layers == chosen and result.store.layers.tolist() == chosen
    assert result.store.n_rows == 300 and result.n_labelled == 240

    labelled = np.arange(240)
    reference = StreamingRidgeClassifier(alphas=np.logspace(-2, 5, 15)).fit(
        result.store.read()[:, labelled], np.asarray(y)[labelled]
    )
    np.testing.assert_allclose(
        result.head.coef_, reference.coef_, rtol=1e-8, atol=1e-10
    )

    predictions = pd.read_parquet(result.predictions)
    assert result.n_predicted == 60
    assert predictions.row_id.tolist() == unlabelled.tolist()
    assert predictions.key.tolist() == [f"r{i}" for i in unlabelled]
    expected = reference.predict(result.store.read()[:, unlabelled])
    assert predictions.prediction.tolist() == expected.tolist()
    accuracy = np.mean(predictions.prediction.to_numpy() == np.asarray(y)[unlabelled])
    assert accuracy > 0.6  # sentiment from MiniLM's chosen layers beats chance

    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "job").rglob("part-*")}
    again = probe_at_scale(data, tmp_path / "job", **kw)
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "job").rglob("part-*")}
    assert after == before and again.layers == result.layers  # nothing rewritten
