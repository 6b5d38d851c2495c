"""Deterministic text augmentation for the view-based metrics (numpy only)."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import string
from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state

from skloes.utils._validation import check_count

__all__ = ["augment_text", "augmented_views"]

_KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_ALPHABETS = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def _keyboard_neighbours():
    pos = {(r, c): key for r, row in enumerate(_KEY_ROWS) for c, key in enumerate(row)}
    steps = ((0, -1), (0, 1), (-1, 0), (-1, 1), (1, -1), (1, 0))
    return {
        key: "".join(pos[r + dr, c + dc] for dr, dc in steps if (r + dr, c + dc) in pos)
        for (r, c), key in pos.items()
    }


QWERTY_NEIGHBOURS = _keyboard_neighbours()


def _split_words(words, rng, p_split):
    out = []
    for word in words:
        if len(word) >= 4 and rng.random() < p_split:
            cut = int(rng.integers(1, len(word)))
            out += [word[:cut], word[cut:]]
        else:
            out.append(word)
    return out


def _substitute(ch, rng):
    for alphabet in _ALPHABETS:
        if ch in alphabet:
            others = alphabet.replace(ch, "")
            return others[int(rng.integers(len(others)))]
    return ch


def _typo(ch, rng):
    keys = QWERTY_NEIGHBOURS.get(ch.lower())
    if keys is None:
        return ch
    new = keys[int(rng.integers(len(keys)))]
    return new.upper() if ch.isupper() else new


def _edit_words(words, rng, p_word, p_char, edit, eligible):
    out = []
    for word in words:
        if len(word) >= 3 and rng.random() < p_word:
            chars = []
            for ch in word:
                if eligible(ch) and rng.random() < p_char:
                    ch = edit(ch, rng)
                chars.append(ch)
            word = "".join(chars)
        out.append(word)
    return out


def _is_alnum_ascii(ch):
    return any(ch in alphabet for alphabet in _ALPHABETS)


def augment_text(text, rng, *, p_split=0.1, p_word=0.3, p_char=0.3, p_typo=0.3):
    """The built-in augmenter: word splits, character substitutions, typos.

    The text is split on whitespace and re-joined with single spaces. Then, in
    order: (1) each word of length >= 4 is split with probability ``p_split``
    at a cut uniform in ``1..len-1``; (2) each word of length >= 3 is chosen
    with probability ``p_word``, and in it each ASCII letter or digit becomes,
    with probability ``p_char``, a different character of the same kind; (3)
    words are chosen the same way and each letter becomes, with probability
    ``p_typo``, a QWERTY neighbour of the same case. Draws are made word by
    word, then character by character, so the output is a pure function of
    ``text`` and the state of ``rng``. The word count never decreases.

    Parameters
    ----------
    text : str
        Input text.
    rng : numpy.random.Generator
        Source of every draw.
    p_split, p_word, p_char, p_typo : float
        Probabilities of the operations above.

    Returns
    -------
    augmented : str
        The augmented text, words joined by single spaces.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import augment_text
    >>> a = augment_text("a rather good film", np.random.default_rng(0))
    >>> a == augment_text("a rather good film", np.random.default_rng(0))
    True
    >>> len(a.split()) >= 4
    True
    """
    words = _split_words(str(text).split(), rng, p_split)
    words = _edit_words(words, rng, p_word, p_char, _substitute, _is_alnum_ascii)
    words = _edit_words(
        words, rng, p_word, p_typo, _typo, lambda ch: ch.lower() in QWERTY_NEIGHBOURS
    )
    return " ".join(words)


def _base_seed(random_state):
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(2**31 - 1))


def augmented_views(texts, *, n_views=2, augment="default", random_state=None):
    """Augmented views of every text, seeded per (text, view).

    View ``j`` of text ``i`` is ``augment(texts[i], rng)`` with
    ``rng = numpy.random.default_rng(SeedSequence([base, i, j]))``, where
    ``base`` is the int ``random_state`` (or one ``randint(2**31 - 1)`` draw
    from it otherwise). The output is thus a pure function of the text,
    ``random_state``, ``i`` and ``j``. The original text is not a view.

    Parameters
    ----------
    texts : sequence of str
        The prompts.
    n_views : int, default=2
        Views per text (InfoNCE and DiME use 2, LiDAR 16).
    augment : "default" or callable, default="default"
        ``"default"`` is :func:`augment_text`; a callable is called as
        ``augment(text, rng)`` with a :class:`numpy.random.Generator` and must
        return a str.
    random_state : int, RandomState instance or None, default=None
        Base seed.

    Returns
    -------
    views : list of list of str
        ``views[j][i]`` is view ``j`` of text ``i``.

    Examples
    --------
    >>> from skloes.metrics import augmented_views
    >>> v = augmented_views(["good movie", "bad plot twist"], random_state=0)
    >>> len(v), len(v[0])
    (2, 2)
    >>> v == augmented_views(["good movie", "bad plot twist"], random_state=0)
    True
    """
    owner = "augmented_views"
    n_views = check_count(n_views, owner, "n_views")
    if isinstance(augment, str):
        if augment != "default":
            raise ValueError(
                f"{owner}: `augment` must be 'default' or a callable "
                f"(text, rng) -> str; got {augment!r}."
            )
        augment = augment_text
    elif not callable(augment):
        raise TypeError(
            f"{owner}: `augment` must be 'default' or a callable (text, rng) -> str; "
            f"got {type(augment).__name__}."
        )
    if isinstance(texts, str) or not hasattr(texts, "__len__"):
        raise TypeError(f"{owner}: `texts` must be a sequence of str; got {texts!r}.")
    base = _base_seed(random_state)
    views = []
    for j in range(n_views):
        view = []
        for i, text in enumerate(texts):
            rng = np.random.default_rng(np.random.SeedSequence([base, i, j]))
            out = augment(text, rng)
            if not isinstance(out, str):
                raise TypeError(
                    f"{owner}: `augment` must return a str; got "
                    f"{type(out).__name__} for text {i}."
                )
            view.append(out)
        views.append(view)
    return views
