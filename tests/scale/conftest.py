"""Fixtures of the scale tests: small texts, a tiny model's stores."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

WORDS = "good bad film plot dull warm funny slow actor story".split()


def make_texts(n, seed=0):
    """``n`` short texts of the tiny model's words, of varied lengths."""
    import numpy as np

    rng = np.random.RandomState(seed)
    return [
        " ".join(rng.choice(WORDS, size=rng.randint(1, 12))) + f" {i % 7}"
        for i in range(n)
    ]


@pytest.fixture(scope="session")
def texts():
    return make_texts(230)


SHARD = 64


@pytest.fixture(scope="session")
def reference(tiny_model_path, texts):
    """Every layer of the tiny model on ``texts``, one process, in memory, in
    the stores' shards of 64 texts (a shard's batches are those of one
    transform of its texts, so the store holds these bits exactly)."""
    import numpy as np

    from skloes import HiddenStatesTransformer

    hst = HiddenStatesTransformer(tiny_model_path, device="cpu").fit(texts)
    parts = [hst.transform(texts[i : i + SHARD]) for i in range(0, len(texts), SHARD)]
    whole = hst.transform(texts)
    stack = np.concatenate(parts, axis=1)
    np.testing.assert_allclose(stack, whole, rtol=1e-5, atol=1e-6)  # batch rounding
    return stack


@pytest.fixture
def extract(tiny_model_path):
    """``extract_to_store`` with the tiny model and quiet defaults."""
    from skloes.scale import extract_to_store

    def run(data, store, **kw):
        kw.setdefault("shard_size", SHARD)
        kw.setdefault("verbose", 0)
        kw.setdefault("device", "cpu")
        return extract_to_store(data, store, model=tiny_model_path, **kw)

    return run
