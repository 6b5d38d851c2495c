"""The data set loaders: sample counts, thresholds, counts per language, flags
and unknown names.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok  # noqa: E402

from skloes import datasets  # noqa: E402

# --------------------------------------------------------------------------
# Data set loaders
# --------------------------------------------------------------------------
LOADERS = {
    "rotten_tomatoes": datasets.load_rotten_tomatoes,
    "bbc_news": datasets.load_bbc_news,
    "chatterbot_langid": datasets.load_chatterbot_langid,
}
LOADER_CASES = [
    ("n_samples_0", {"n_samples": 0}, err("n_samples")),
    ("n_samples_neg", {"n_samples": -5}, err("n_samples")),
    ("n_samples_float", {"n_samples": 2.5}, err("n_samples")),
    ("n_samples_huge", {"n_samples": 10**9}, err("n_samples")),
    ("random_state", {"n_samples": 20, "random_state": "x"}, err("random_state")),
    (
        "tiny",
        {"n_samples": 20, "return_X_y": True},
        ok(lambda r: len(r[0]) == len(r[1]) == 20),
    ),
]


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize(
    "kwargs, outcome", [pytest.param(k, o, id=i) for i, k, o in LOADER_CASES]
)
def test_loaders(loader, kwargs, outcome):
    try:
        outcome.check(lambda: LOADERS[loader](**kwargs))
    except ImportError as exc:  # the data wheel is not installed here
        pytest.skip(str(exc))


def test_load_dataset_unknown_name():
    err(r"unknown data set 'imdb'").check(lambda: datasets.load_dataset("imdb"))


# --------------------------------------------------------------------------
# Sample counts, thresholds and counts of the data set loaders
# --------------------------------------------------------------------------
def n_texts(n):
    def check(result):
        texts = result.data if hasattr(result, "data") else result[0]
        assert len(texts) == n, len(texts)

    return check


def every_class(result):
    assert len(np.unique(result.target)) == len(result.target_names)


COUNT_CASES = [
    ("one", 1, err(r"`n_samples`=1 cannot be drawn stratified")),
    ("true", True, err(r"`n_samples` must be a positive int")),
    ("false", False, err(r"`n_samples` must be a positive int")),
    ("zero", 0, err(r"`n_samples` must be a positive int")),
    ("negative", -5, err(r"`n_samples` must be a positive int")),
    ("float_above_one", 2.5, err(r"`n_samples` must be a positive int")),
    ("nan", float("nan"), err(r"`n_samples`")),
    ("inf", float("inf"), err(r"`n_samples`")),
    ("string", "20", err(r"`n_samples`")),
    ("too_many", 10**9, err(r"`n_samples`=.* exceeds")),
    ("fraction_too_small", 1e-6, err(r"`n_samples`=1e-06 cannot be drawn")),
    ("numpy_int", np.int64(30), ok(n_texts(30))),
    ("numpy_float", np.float64(0.01), ok(every_class)),
    ("fraction_one", 1.0, ok(every_class)),
    ("count_two_per_class", 40, ok(every_class)),
]
COUNT_LOADERS = {
    "sms_spam": datasets.load_sms_spam,
    "trec6": datasets.load_trec6,
    "vader_nyt3": datasets.load_vader_nyt3,
}


def _loader_or_skip(run):
    try:
        return run()
    except ImportError as exc:  # the data wheel is not installed here
        pytest.skip(str(exc))


def _loader_cases(loaders, cases):
    """Every case against every loader, with ids "case-loader"."""
    return [
        pytest.param(load, v, o, id=f"{i}-{name}")
        for name, load in loaders.items()
        for i, v, o in cases
    ]


@pytest.mark.parametrize(
    "load, value, outcome", _loader_cases(COUNT_LOADERS, COUNT_CASES)
)
def test_loader_sample_counts(load, value, outcome):
    _loader_or_skip(lambda: outcome.check(functools.partial(load, n_samples=value)))


def three_classes(result):
    assert list(result.target_names) == ["negative", "neutral", "positive"]


THRESHOLD_CASES = [
    ("negative", -0.5, err(r"`threshold` must be a finite number in \[0.0, 4.0\)")),
    ("nan", float("nan"), err(r"`threshold` must be a finite number")),
    ("inf", float("inf"), err(r"`threshold`")),
    ("minus_inf", -float("inf"), err(r"`threshold`")),
    ("max_rating", 4.0, err(r"`threshold`")),
    ("above_ratings", 10, err(r"`threshold`")),
    ("bool", True, err(r"`threshold`")),
    ("string", "0.5", err(r"`threshold`")),
    ("none", None, err(r"`threshold`")),
    ("zero", 0, ok(three_classes)),
    ("numpy_float", np.float32(0.5), ok(three_classes)),
    ("wide", 2.0, ok(three_classes)),
    (
        "wider_than_every_rating",
        3.8,
        err(r"`threshold`=3.8 leaves every text in one class"),
    ),
]
THRESHOLD_LOADERS = {
    "vader_tweets3": datasets.load_vader_tweets3,
    "vader_nyt3": datasets.load_vader_nyt3,
}


@pytest.mark.parametrize(
    "load, value, outcome", _loader_cases(THRESHOLD_LOADERS, THRESHOLD_CASES)
)
def test_loader_thresholds(load, value, outcome):
    _loader_or_skip(lambda: outcome.check(functools.partial(load, threshold=value)))


def test_a_threshold_changes_the_classes_as_documented():
    rating = _loader_or_skip(lambda: datasets.load_vader_tweets3(threshold=0))
    wide = datasets.load_vader_tweets3(threshold=2.0)
    counts = [np.bincount(d.target, minlength=3)[1] for d in (rating, wide)]
    assert counts[0] < counts[1]  # a wider band holds more neutral texts


LANGUAGE_CASES = [
    ("zero", 0, err(r"`min_per_language` must be a positive int")),
    ("negative", -1, err(r"`min_per_language`")),
    ("bool", True, err(r"`min_per_language`")),
    ("float", 150.0, err(r"`min_per_language`")),
    ("leaves_one", 10**6, err(r"`min_per_language`=1000000 leaves 0 language")),
    ("default", 150, ok(every_class)),
]


@pytest.mark.parametrize(
    "value, outcome", [pytest.param(v, o, id=i) for i, v, o in LANGUAGE_CASES]
)
def test_chatterbot_min_per_language(value, outcome):
    run = functools.partial(datasets.load_chatterbot_langid, min_per_language=value)
    _loader_or_skip(lambda: outcome.check(run))


FLAG_CASES = [
    ("return_X_y_string", {"return_X_y": "yes"}, err(r"`return_X_y` must be True")),
    ("return_X_y_int", {"return_X_y": 1}, err(r"`return_X_y`")),
    ("return_X_y_none", {"return_X_y": None}, err(r"`return_X_y`")),
    (
        "random_state_string",
        {"n_samples": 20, "random_state": "x"},
        err(r"`random_state`"),
    ),
    (
        "random_state_float",
        {"n_samples": 20, "random_state": 0.5},
        err(r"`random_state`"),
    ),
    ("return_X_y_numpy_bool", {"return_X_y": np.True_}, ok(lambda r: len(r) == 2)),
]


@pytest.mark.parametrize(
    "kwargs, outcome", [pytest.param(k, o, id=i) for i, k, o in FLAG_CASES]
)
def test_loader_flags(kwargs, outcome):
    _loader_or_skip(lambda: outcome.check(lambda: datasets.load_sms_spam(**kwargs)))
