"""Short texts the tests fit and predict on.

``REVIEWS`` (with ``SENTIMENT``, their labels) and ``NEW`` are real short
reviews for the probe tests; ``PROBE_TEXTS``, ``PROBE_Y``, ``PROBE_NEW`` and
``LABELLED_TEXTS`` the few texts of the bad-input cases, :func:`random_reviews`
more of them; :func:`make_texts` any number of texts of the tiny test model's
words, for the scale tests.
"""

from __future__ import annotations

import numpy as np

# Twelve short reviews, alternately positive (1) and negative (0).
REVIEWS = [
    "a good movie",
    "the plot was dull and boring",
    "fun and warm",
    "i really did not like it",
    "great acting",
    "bad",
    "a warm good film",
    "boring boring dull",
    "what a fun ride",
    "not good at all",
    "lovely and warm",
    "dull plot bad acting",
]
SENTIMENT = [1, 0] * 6
TEXTS = REVIEWS * 3
Y = np.array(SENTIMENT * 3)
# Texts to predict, unseen in fit.
NEW = ["a good fun film", "dull and bad", "the plot", "warm"]

# The bad-input cases' probes: the fewest texts that fit a two-class probe.
PROBE_TEXTS = ["a good movie", "a dull plot", "fun", "the story was great"] * 3
PROBE_Y = [1, 0, 1, 0] * 3
PROBE_NEW = ["a fun film", "the plot was dull"]
# Six texts the bad-input cases fit an extractor or a pipeline on.
LABELLED_TEXTS = [
    "a good movie",
    "a dull plot",
    "fun",
    "the story was great",
    "not fun",
    "an awful film",
]


def random_reviews(n, seed=0):
    """``n`` texts of 3 to 7 review words, drawn with ``seed``."""
    rng = np.random.RandomState(seed)
    words = "the a good bad great awful movie film plot actor story fun dull".split()
    return [" ".join(rng.choice(words, size=rng.randint(3, 8))) for _ in range(n)]


WORDS = "good bad film plot dull warm funny slow actor story".split()


def make_texts(n, seed=0):
    """``n`` short texts of varied lengths (a digit makes most distinct)."""
    rng = np.random.RandomState(seed)
    return [
        " ".join(rng.choice(WORDS, size=rng.randint(1, 12))) + f" {i % 7}"
        for i in range(n)
    ]
