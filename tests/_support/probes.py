"""Extractors, probes and selectors the tests build, a count of the blocks a
pass runs (to assert what pruning skips) and a check that a save holds no
weights."""

from __future__ import annotations

import io
import os
import shutil
import zipfile

import numpy as np
import pytest

from skloes import HiddenStatesTransformer
from skloes.probe import LayerProbeClassifier
from skloes.selection import LastKSelector, MetricTopKSelector


def torch_or_skip():
    """Skip the calling test module unless torch, skops and transformers all
    import (extracting, saving and loading a probe needs the three); return
    torch."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("skops")
    pytest.importorskip("transformers")
    return torch


def quiet_hst(path, **params):
    """A HiddenStatesTransformer on the CPU that shows no progress."""
    params.setdefault("device", "cpu")
    params.setdefault("verbose", False)
    return HiddenStatesTransformer(path, **params)


def first_layer():
    """A selector of the model's last layer alone (the fastest probe)."""
    return LastKSelector(n_layers_to_select=1)


def tiny_probe(model, **params):
    """A LayerProbeClassifier on the CPU of :func:`first_layer` (or ``params``)."""
    params.setdefault("device", "cpu")
    params.setdefault("selector", first_layer())
    return LayerProbeClassifier(model, **params)


def first_layers(n, n_layers=7):
    """A selector that keeps layers 1..n (the pruned pass stops after block n)."""
    return MetricTopKSelector(
        metric="layer_scores",
        n_layers_to_select=n,
        layer_scores=-np.arange(n_layers),
        include_embedding=False,
    )


def blocks_run(fn):
    """How many transformer blocks (BERT, Llama or Whisper's encoder) ran
    while ``fn()`` ran."""
    import torch

    calls = [0]

    def hook(module, inputs, output):
        names = ("BertLayer", "LlamaDecoderLayer", "WhisperEncoderLayer")
        if type(module).__name__ in names:
            calls[0] += 1

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        fn()
    finally:
        handle.remove()
    return calls[0]


def copy_model(src, dst):
    """A copy of the model folder ``src`` at ``dst`` (for a test to change)."""
    shutil.copytree(src, dst)
    return str(dst)


def assert_no_weights(archive, model):
    """The skops archive (a zip of .npy and JSON, not a pickle) holds no
    tensor of the model's weights."""
    from safetensors.numpy import load_file

    weights = load_file(os.path.join(model, "model.safetensors"))
    with zipfile.ZipFile(archive) as zf:
        arrays = [
            np.load(io.BytesIO(zf.read(n)), allow_pickle=False)
            for n in zf.namelist()
            if n.endswith(".npy")
        ]
    assert arrays  # the fitted state is there
    for w in weights.values():
        assert not any(a.shape == w.shape and np.array_equal(a, w) for a in arrays)


def saved_tiny_probe(folder, model_path, n_texts):
    """A ``LayerProbeClassifier`` of ``model_path`` fitted on ``n_texts``
    texts of two alternating classes, saved in ``folder``; its path."""
    from _support.texts import make_texts
    from skloes.probe import save_probe

    texts = make_texts(n_texts, seed=3)
    y = np.asarray(["neg", "pos"])[np.arange(n_texts) % 2]
    probe = LayerProbeClassifier(model_path, device="cpu").fit(texts, y)
    return save_probe(probe, folder)


def quiet_extract(model_path, shard_size):
    """``extract_to_store`` with ``model_path``, shards of ``shard_size``
    rows, on the CPU and quiet, unless told otherwise."""
    from skloes.scale import extract_to_store

    def run(data, store, **kw):
        kw.setdefault("shard_size", shard_size)
        kw.setdefault("verbose", 0)
        kw.setdefault("device", "cpu")
        return extract_to_store(data, store, model=model_path, **kw)

    return run
