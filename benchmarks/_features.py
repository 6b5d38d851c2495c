"""Layer stacks of the offline models on the offline data sets, cached on disk.

One home for the features the benchmarks score: raw texts from
:func:`skloes.datasets.load_dataset` (a stratified subsample, seed 0) run
through :class:`skloes.HiddenStatesTransformer` with its content-addressed
cache under ``benchmarks/.cache/hidden_states`` (``$SKLOES_BENCH_CACHE``
overrides the folder), so each text goes through a model once across all
benchmarks and reruns. The extraction settings are the library's defaults
(mean pooling; a decoder's first token left out, ``exclude_tokens="auto"``)
except the text length of each model.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("SKLOES_BENCH_CACHE", HERE / ".cache"))
# The model id and the tokens kept per text of the headline runs.
MODELS = {
    "smollm2": ("HuggingFaceTB/SmolLM2-135M-Instruct", 64),
    "gemma3": ("google/gemma-3-270m", 64),
    "qwen2": ("Qwen/Qwen2.5-Coder-0.5B-Instruct", 64),
    "minilm": ("sentence-transformers/all-MiniLM-L6-v2", 128),
    "mpnet": ("sentence-transformers/all-mpnet-base-v2", 128),
}
HEADLINE_SETS = ("rotten_tomatoes", "bbc_news", "chatterbot_langid")


def load_texts(dataset, n_texts, random_state=0):
    """Texts (a list) and labels of a stratified subsample of ``dataset``."""
    from skloes.datasets import load_dataset

    full = load_dataset(dataset)
    n = None if n_texts >= len(full.data) else n_texts
    texts, y = load_dataset(
        dataset, n_samples=n, random_state=random_state, return_X_y=True
    )
    return [str(t) for t in texts], np.asarray(y)


def extractor(model, max_length=None, **params):
    """A :class:`~skloes.HiddenStatesTransformer` of ``model`` ("smollm2",
    "minilm" or any id or path) writing to the benchmark cache."""
    from skloes import HiddenStatesTransformer

    name, length = MODELS.get(model, (model, 128))
    params.setdefault("cache", str(CACHE / "hidden_states"))
    return HiddenStatesTransformer(
        name, max_length=max_length or length, device="cpu", **params
    )


def layer_stack(model, dataset, n_texts, max_length=None, **params):
    """``(stack, y, meta)``: every layer of ``model`` on ``n_texts`` texts.

    ``stack`` has shape ``(n_layers, n_texts, dim)``; ``meta`` records the
    settings and the seconds of the call (a full extraction the first time,
    a cache read afterwards: ``meta["extract_seconds"]`` keeps the first).
    """
    import transformers

    transformers.logging.set_verbosity_error()
    texts, y = load_texts(dataset, n_texts)
    hst = extractor(model, max_length, **params)
    start = time.perf_counter()
    stack = np.asarray(hst.fit_transform(texts), dtype=np.float32)
    seconds = time.perf_counter() - start
    meta = {
        "model": model,
        "dataset": dataset,
        "n": len(texts),
        "max_length": hst.max_length_,
        "pooling": hst.pooling,
        "exclude_tokens": hst.exclude_tokens_,
        "shape": list(stack.shape),
        "seconds": seconds,
    }
    meta["extract_seconds"] = _first_seconds(meta)
    return stack, y, meta


def probe(model, *, max_length=None, **params):
    """A :class:`~skloes.probe.LayerProbeClassifier` of ``model`` reading the
    benchmark cache: the library's defaults but ``params``."""
    from skloes.probe import LayerProbeClassifier

    name, length = MODELS.get(model, (model, 128))
    params.setdefault("cache", str(CACHE / "hidden_states"))
    params.setdefault("random_state", 0)
    return LayerProbeClassifier(
        name, max_length=max_length or length, device="cpu", **params
    )


def cross_validate_probe(estimator, texts, y, n_folds=5):
    """Outer CV of a probe on raw texts, selection inside each fold.

    scikit-learn's ``cross_validate`` over ``StratifiedKFold(n_folds,
    shuffle=True, random_state=0)``. Returns per fold the accuracy, the
    layers used (in pick order where the selector records one; a ScalarMix
    head's rounded layer weights instead) and the seconds of ``fit``, and
    the first fold's fitted head (``repr``).
    """
    import warnings

    from sklearn.model_selection import StratifiedKFold, cross_validate

    folds = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = cross_validate(
            estimator, texts, y, cv=folds, return_estimator=True, error_score="raise"
        )
    return {
        "accuracy": out["test_score"].tolist(),
        "picks": [_picks(fitted) for fitted in out["estimator"]],
        "fusions": [getattr(fitted, "fusion_", None) for fitted in out["estimator"]],
        "fit_s": out["fit_time"].tolist(),
        "head": repr(out["estimator"][0].estimator_),
    }


def head_of(rows):
    """The head the probes of ``rows`` (name -> row) used, for the reports."""
    heads = {r["head"] for r in rows.values() if "ScalarMix" not in r["head"]}
    return " / ".join(sorted(heads)) or "?"


def _picks(fitted):
    weights = getattr(fitted.estimator_, "layer_weights_", None)
    if weights is not None:
        return np.round(weights, 2).tolist()
    order = getattr(fitted.selector_, "selection_order_", None)
    layers = fitted.selected_layers_ if order is None else order
    return [int(v) for v in layers]


def _first_seconds(meta):
    """The seconds of the first (uncached) extraction of these settings."""
    keys = ("model", "dataset", "n", "max_length", "pooling", "exclude_tokens")
    name = "_".join(str(meta[k]) for k in keys).replace("/", "-") + ".json"
    path = CACHE / "extraction_seconds" / name
    if path.exists():
        return json.loads(path.read_text())["seconds"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta))
    return meta["seconds"]


def main(argv=None):
    """``python benchmarks/_features.py MODEL N [SETS...]``: warm the cache."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model")
    parser.add_argument("n_texts", type=int)
    parser.add_argument("datasets", nargs="*", default=list(HEADLINE_SETS))
    parser.add_argument("--exclude-tokens", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    exclude = None if args.exclude_tokens == "none" else args.exclude_tokens
    for dataset in args.datasets:
        stack, _, meta = layer_stack(
            args.model, dataset, args.n_texts, exclude_tokens=exclude
        )
        print(json.dumps(meta), flush=True)


if __name__ == "__main__":
    main()
