"""What every torch-trained head shares, without importing torch at import time.

:class:`GeoRegClassifier`, :class:`GeoRegFineTuner` and the ScalarMix baselines
train a :mod:`torch` module (``module_``) and answer through it. This module
holds the parts they share, so each exists once:

- :func:`validation_split` is the (stratified) early-stopping split;
- :class:`TorchHeadMixin` pickles ``module_`` through CPU state dicts and
  reloads it on ``device_`` (or on the CPU when that device is gone);
- :class:`TorchClassifierMixin` turns logits into ``decision_function``,
  ``predict_proba`` and ``predict``.

An estimator using them implements ``_outputs(X) -> (outputs, z)`` (float64
numpy arrays: the logits or regression outputs, and the fused embedding).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin
from sklearn.model_selection import train_test_split

from skloes.core._torch import torch
from skloes.utils._docstrings import fill_doc, fill_x_doc

__all__ = [
    "EmbeddingFeatureNamesMixin",
    "TorchClassifierMixin",
    "TorchHeadMixin",
    "head_outputs",
    "layer_blocks",
    "validation_split",
]


def validation_split(n, fraction, rng, *, codes=None, classes=None, owner="skloes"):
    """Train and validation indices (sorted CPU LongTensors).

    Parameters
    ----------
    n : int
        Number of samples.
    fraction : float
        Validation share; 0 gives an empty validation set.
    rng : numpy.random.RandomState
        Seeds the split (one draw).
    codes : ndarray of int or None, default=None
        Class codes: the split is then stratified with at least one validation
        sample per class and every class kept in training; None (regression)
        gives a plain random split (none at all for a single sample).
    classes : ndarray or None, default=None
        Class labels, to name the smallest class in the error.
    owner : str, default="skloes"
        Estimator name for the error.

    Returns
    -------
    train_idx, val_idx : torch.Tensor of int64

    Raises
    ------
    ValueError
        When a stratified split cannot keep every class on both sides.
    """
    all_idx = torch.arange(n)
    if fraction == 0:
        return all_idx, all_idx[:0]
    n_val = int(np.ceil(fraction * n))
    stratify = None
    if codes is not None:
        counts = np.bincount(codes)
        n_val = max(n_val, len(counts))
        if counts.min() < 2 or n - n_val < len(counts):
            smallest = int(counts.argmin())
            label = classes[smallest].tolist() if classes is not None else smallest
            raise ValueError(
                f"{owner}: `validation_fraction`={fraction} is too large for the "
                f"smallest class ({label!r} has {counts.min()} samples; {n} samples "
                f"in {len(counts)} classes): the stratified split needs every class "
                "on both sides. Lower it, or set validation_fraction=0 to train "
                "without early stopping."
            )
        stratify = codes
    elif n - n_val < 1:  # one sample: nothing to hold out
        return all_idx, all_idx[:0]
    train, val = train_test_split(
        np.arange(n),
        test_size=n_val,
        stratify=stratify,
        random_state=int(rng.randint(0, 2**31 - 1)),
    )
    return torch.from_numpy(np.sort(train)), torch.from_numpy(np.sort(val))


def layer_blocks(stack, layers):
    """Float32 CPU tensor (n_samples, K, dim) of the ``layers`` of a stack."""
    blocks = np.stack([stack[l] for l in layers], axis=1)
    return torch.from_numpy(np.ascontiguousarray(blocks, dtype=np.float32))


def head_outputs(module, feats, batch_size):
    """``(outputs, z)`` of a feature head on a (n, K, d) tensor, float64 numpy.

    Inference runs a float64 CPU copy of ``module`` (the fitted module is left
    as it is): in float32, a one-row and a batched forward pass go through
    different BLAS kernels and differ by an ulp (about 2e-7), so a prediction
    would depend on the batch it came in; in float64 they agree to about
    1e-15, whatever the training device.
    """
    import copy

    from skloes.heads._training import predict_outputs

    module64 = copy.deepcopy(module).to(device="cpu", dtype=torch.float64)
    feats = feats.to(device="cpu", dtype=torch.float64)

    def forward(idx, train):
        return module64(feats[idx])

    out, z = predict_outputs(module64, forward, torch.arange(len(feats)), batch_size)
    return out.numpy(), z.numpy()


class EmbeddingFeatureNamesMixin(ClassNamePrefixFeaturesOutMixin):
    """Names of the fused embedding that a head's ``transform`` returns.

    ``get_feature_names_out`` gives ``{class name}{i}`` (lowercase, as
    scikit-learn's PCA does), so a head also takes ``set_output`` and a
    ``Pipeline`` ending with it can be set to return frames. Goes left of
    ``TransformerMixin``.
    """

    @property
    def _n_features_out(self):
        module = self.module_
        return int(getattr(module, "head", module).embed_dim)


class TorchHeadMixin:
    """Pickling of ``module_`` (any device) through CPU state dicts.

    The state holds :func:`skloes.heads._modules.pack_module`'s CPU description of
    ``module_``; unpickling rebuilds it on ``device_`` when that device exists,
    otherwise on the CPU (and ``device_`` then says so). A backbone whose
    weights did not train (``backbone_tuned_`` False) is stored as its model
    folder and reloaded from it.
    """

    def __getstate__(self):
        state = dict(super().__getstate__())  # object's is the live __dict__
        module = state.pop("module_", None)
        if module is not None:
            from skloes.heads._modules import pack_module

            state["_module_pickle"] = pack_module(
                module,
                path=getattr(self, "model_path_", None),
                tuned=getattr(self, "backbone_tuned_", True),
            )
        return state

    def __setstate__(self, state):
        packed = state.pop("_module_pickle", None)
        super().__setstate__(state)
        if packed is not None:
            from skloes.heads._modules import unpack_module

            device = self.device_
            if device.type == "cuda" and not torch.cuda.is_available():
                self.device_ = device = torch.device("cpu")
            self.module_ = unpack_module(packed).to(device)


_x_as_in_fit = fill_x_doc("array-like", "As in ``fit``.")

#: Fills a classifier's ``fit`` docstring line ``{FIT_LABELS}``: ``y`` and Returns.
fit_labels_doc = fill_doc(
    FIT_LABELS="""
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted classifier."""
)


class TorchClassifierMixin(TorchHeadMixin):
    """``decision_function``, ``predict_proba`` and ``predict`` from logits."""

    @_x_as_in_fit
    def decision_function(self, X):
        """Return the logits (two classes: class 1's logit minus class 0's).

        {X}

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Unnormalised class scores.
        """
        logits = self._outputs(X)[0]
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits

    @_x_as_in_fit
    def predict_proba(self, X):
        """Class probabilities (softmax of the logits).

        {X}

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities in the order of ``classes_``.
        """
        logits = self._outputs(X)[0]
        proba = np.exp(logits - logits.max(axis=1, keepdims=True))
        return proba / proba.sum(axis=1, keepdims=True)

    @_x_as_in_fit
    def predict(self, X):
        """Predicted class labels.

        {X}

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        logits = self._outputs(X)[0]  # checks that the estimator is fitted
        return self.classes_[logits.argmax(axis=1)]
