"""The streaming heads: the in-memory fit's answer from bounded batches.

StreamingRidgeClassifier equals StandardScaler + RidgeClassifier and
StreamingLogisticRegression equals StandardScaler + LogisticRegression (the
same objective, converged), on a stack, a flat table and a layer store view,
while never holding more than ``batch_size`` rows of features.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, RidgeClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skloes.scale import StreamingLogisticRegression, StreamingRidgeClassifier


def _data(n_classes, n=600, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n, 24, n_informative=8, n_classes=n_classes, random_state=seed
    )
    X = 20 * X + 100  # far from standardized: the shift and scale matter
    return X, X.reshape(n, 3, 8).transpose(1, 0, 2), np.asarray(["a", "b", "c"])[y]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_streaming_ridge_equals_the_in_memory_pipeline(n_classes):
    X, H, y = _data(n_classes)
    memory = make_pipeline(StandardScaler(), RidgeClassifier(alpha=5.0)).fit(X, y)
    head = StreamingRidgeClassifier(alpha=5.0, batch_size=64).fit(H, y)
    np.testing.assert_allclose(
        head.decision_function(H), memory.decision_function(X), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_array_equal(head.predict(H), memory.predict(X))
    assert head.n_passes_ == 1
    flat = StreamingRidgeClassifier(alpha=5.0, batch_size=64).fit(X, y)
    np.testing.assert_allclose(flat.coef_, head.coef_, rtol=1e-9, atol=1e-12)


def test_streaming_ridge_chooses_the_penalty_of_least_gcv_error():
    X, H, y = _data(3, n=300)
    alphas = np.logspace(-2, 4, 7)
    head = StreamingRidgeClassifier(alphas=alphas, batch_size=50).fit(H, y)
    # Brute force in memory: each penalty's fit, residuals and trace.
    Z = StandardScaler().fit_transform(X)
    Y = np.where(y[:, None] == np.unique(y)[None, :], 1.0, -1.0)
    U, sv, _ = np.linalg.svd(Z - Z.mean(axis=0), full_matrices=False)
    expected = []
    for a in alphas:
        fit = RidgeClassifier(alpha=a).fit(Z, y).decision_function(Z)
        df = 1 + np.sum(sv**2 / (sv**2 + a))
        expected.append(300 * np.sum((Y - fit) ** 2) / (300 - df) ** 2)
    np.testing.assert_allclose(head.gcv_, expected, rtol=1e-7)
    assert head.alpha_ == alphas[int(np.argmin(expected))] and head.n_passes_ == 1
    chosen = make_pipeline(StandardScaler(), RidgeClassifier(alpha=head.alpha_))
    np.testing.assert_allclose(
        head.decision_function(H), chosen.fit(X, y).decision_function(X), atol=1e-8
    )


@pytest.mark.parametrize("n_classes", [2, 3])
def test_streaming_logistic_converges_to_the_in_memory_solution(n_classes):
    X, H, y = _data(n_classes)
    memory = make_pipeline(StandardScaler(), LogisticRegression(C=0.05, tol=1e-8))
    memory.fit(X, y)
    head = StreamingLogisticRegression(C=0.05, tol=1e-8, batch_size=64).fit(H, y)
    np.testing.assert_allclose(
        head.predict_proba(H), memory.predict_proba(X), atol=1e-6
    )
    np.testing.assert_array_equal(head.predict(H), memory.predict(X))
    assert head.n_passes_ >= head.n_iter_ + 1  # one pass per evaluation, + moments


def test_heads_stream_a_store_in_bounded_batches(extract, texts, tmp_path, monkeypatch):
    from skloes.core import _store

    store = extract(texts, tmp_path / "s")
    y = np.where(store.read()[2][:, 0] > np.median(store.read()[2][:, 0]), "hi", "lo")
    view = store.select(layers=[1, 2], rows=np.arange(200))
    in_memory = view.read()
    sizes = []
    real = _store.StoreBatch.__init__

    def count(self, positions, row_ids, stack, columns):
        sizes.append(stack.shape[1])
        real(self, positions, row_ids, stack, columns)

    monkeypatch.setattr(_store.StoreBatch, "__init__", count)
    for make in (
        lambda: StreamingRidgeClassifier(batch_size=32),
        lambda: StreamingLogisticRegression(batch_size=32),
    ):
        sizes.clear()
        on_disk = make().fit(view, y[:200])
        assert max(sizes) <= 32 and sum(sizes) == 200 * on_disk.n_passes_
        here = make().fit(in_memory, y[:200])
        np.testing.assert_allclose(on_disk.coef_, here.coef_, rtol=1e-7, atol=1e-9)
        np.testing.assert_array_equal(
            on_disk.predict(store.select(layers=[1, 2])), here.predict(store.read()[1:])
        )


def test_heads_refuse_what_they_cannot_fit():
    X, H, y = _data(2)
    with pytest.raises(ValueError, match="requires y to be passed"):
        StreamingRidgeClassifier().fit(H, None)
    with pytest.raises(ValueError, match="at least two classes"):
        StreamingLogisticRegression().fit(H, np.zeros(600))
    head = StreamingRidgeClassifier().fit(H, y)
    with pytest.raises(ValueError, match="fitted on 3 layers of width 8"):
        head.predict(H[:2])
