"""Short texts of the tiny test model's words, for the scale tests."""

from __future__ import annotations

import numpy as np

WORDS = "good bad film plot dull warm funny slow actor story".split()


def make_texts(n, seed=0):
    """``n`` short texts of varied lengths (a digit makes most distinct)."""
    rng = np.random.RandomState(seed)
    return [
        " ".join(rng.choice(WORDS, size=rng.randint(1, 12))) + f" {i % 7}"
        for i in range(n)
    ]
