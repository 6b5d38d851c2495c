"""GeoRegFineTuner: a backbone and a GeoReg head, fine-tuned end to end on texts.

Never imports torch or transformers at import time; ``fit`` does.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import check_is_fitted, column_or_1d

from skloes.core._pooling import POOLINGS
from skloes.core._torch import torch
from skloes.heads._georeg import _BaseGeoReg
from skloes.heads._mixins import fit_labels_doc
from skloes.heads._options import GEO_WEIGHT_FINETUNE
from skloes.utils._param_validation import Interval, StrOptions, fit_context


class GeoRegFineTuner(_BaseGeoReg):
    """A backbone and a GeoReg head, fine-tuned end to end on raw texts.

    The model's blocks up to the deepest used layer train (with the embedding
    module) at ``lr_backbone``; the blocks above it stay frozen and are never
    run. The head is :class:`GeoRegClassifier`'s (one adapter ``LayerNorm(d) →
    Linear(d, proj_dim) → GELU`` per layer, a fusion into ``Z``, a probe
    ``LayerNorm → Dropout(0.2) → Linear``) on the pooled hidden states; the loss
    is cross-entropy plus :class:`GeoRegLoss` on ``Z``. Layers are chosen once,
    on the pretrained model's frozen features, and stay fixed. This is where
    fine-tuning can collapse a representation and where GeoReg is meant to act
    (the user guide, :ref:`georeg`, reports what it does and does not do).

    Parameters
    ----------
    model : str, os.PathLike or None, default=None
        A local folder or hub id; None is the embedded default model (as in
        :class:`HiddenStatesTransformer`).
    layers : "all", int, list of int or selector, default="all"
        Hidden-state indices (0 is the embedding output). A selector (e.g.
        :class:`LOESSelector`) is cloned and fitted on the frozen model's
        features of the training texts, unless ``prefit=True``.
    prefit : bool, default=False
        Whether the selector in ``layers`` is already fitted (on this model's
        hidden states): it is then copied and used as is.
    fusion : {"concat", "mean", "sum", "scalar_mix"}, default="concat"
        How the adapter outputs are combined.
    geo_weight : float, default=0.1
        GeoReg weight ``w``; 0 is the plain cross-entropy baseline. The
        paper's weight; :class:`GeoRegClassifier`, which trains a head on
        frozen features, defaults to 0.01 (why: :ref:`georeg_head_weight`).
    geo_variant : {"robust", "reference"}, default="robust"
        See :class:`GeoRegLoss`.
    proj_dim : int, default=256
        Adapter width.
    max_epochs : int, default=3
        Maximum number of epochs.
    batch_size : int, default=32
        Mini-batch size (the last partial batch is kept).
    lr : float, default=1e-3
        Learning rate of the adapters and probe.
    lr_backbone : float, default=2e-5
        Learning rate of the backbone blocks; 0 keeps the backbone frozen
        (then it is not pickled: it is reloaded from ``model``).
    weight_decay : float, default=0.01
        AdamW weight decay on all trainable parameters.
    warmup : float, default=0.1
        Fraction of the steps with a linear warmup from 0.
    validation_fraction : float, default=0.1
        Stratified validation share for early stopping; 0 keeps the final
        weights.
    n_iter_no_change : int, default=2
        Patience in epochs.
    pooling : {"mean", "first", "cls", "last", "max"}, default="mean"
        Token pooling.
    exclude_tokens : {"auto", "special", "first"} or None, default="auto"
        Tokens left out of ``"mean"`` and ``"max"`` pooling, in training and
        prediction as in the frozen features the layers are chosen on (the
        same parameter as :class:`HiddenStatesTransformer`'s): ``"auto"`` is
        ``"first"`` (the attention sink) for decoder-only language models and
        None for other models; see :ref:`pooling-special-tokens`. Text models
        only.
    max_length : int, default=256
        Token truncation, capped at the model's limit; one that leaves no
        token of the text after the tokenizer's special tokens is an error
        (see :class:`~skloes.extraction.HiddenStatesTransformer`).
    device : str or torch.device, default="auto"
        Torch device; "auto" picks CUDA, then MPS, then CPU.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, shuffles, dropout (head and backbone), triplets
        and the split.
    verbose : int, default=0
        A progress bar over epochs when > 0.
    warm_start : bool, default=False
        Continue from the fitted weights instead of re-initialising.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    layers_ : ndarray of int
        The hidden-state indices the head uses, ascending.
    selector_ : estimator or None
        The fitted selector when ``layers`` is one.
    module_ : torch.nn.Module
        The backbone and the head (:class:`skloes.heads._modules.BackboneHead`).
    history_ : list of dict
        Per epoch: ``loss``, ``task_loss``, ``geo_loss``, ``geo_spectral``,
        ``geo_triangle``, ``val_score``, ``val_loss``, ``lr``.
    best_epoch_ : int
        The epoch whose weights were kept (1-based).
    n_iter_ : int
        Epochs run.
    device_ : torch.device
        Where the module lives.
    model_path_, modality_ : str
        The resolved model folder and its input modality.
    n_model_layers_ : int
        Number of hidden states of the model (blocks + 1).
    exclude_tokens_ : {"special", "first"} or None
        Resolved ``exclude_tokens`` (kept from the first fit under
        ``warm_start``, like the layers).
    backbone_tuned_ : bool
        Whether the backbone weights were trained (then they are pickled with
        the estimator).

    See Also
    --------
    GeoRegClassifier : The head alone, on precomputed layer features.
    GeoRegLoss : The regulariser.

    Notes
    -----
    Same ``random_state`` on the same CPU gives identical weights and
    predictions; the backbone's own dropout runs in a forked, seeded RNG state. Requires
    ``pip install skloes[torch]``.

    Examples
    --------
    >>> from skloes import GeoRegFineTuner
    >>> clf = GeoRegFineTuner(layers=[2, 4], max_epochs=1,
    ...                       random_state=0)  # doctest: +SKIP
    >>> clf.fit(texts, labels).predict(["a new text"])  # doctest: +SKIP
    """

    _parameter_constraints = {
        **_BaseGeoReg._parameter_constraints,
        "model": [None, str, os.PathLike],
        "lr_backbone": [Interval(Real, 0, None, closed="left")],
        "pooling": [StrOptions(set(POOLINGS))],
        "exclude_tokens": [StrOptions({"auto", "special", "first"}), None],
        "max_length": [Interval(Integral, 1, None, closed="left")],
    }
    _val_metric = "score"

    def __init__(
        self,
        model=None,
        *,
        layers="all",
        prefit=False,
        fusion="concat",
        geo_weight=GEO_WEIGHT_FINETUNE,
        geo_variant="robust",
        proj_dim=256,
        max_epochs=3,
        batch_size=32,
        lr=1e-3,
        lr_backbone=2e-5,
        weight_decay=0.01,
        warmup=0.1,
        validation_fraction=0.1,
        n_iter_no_change=2,
        pooling="mean",
        exclude_tokens="auto",
        max_length=256,
        device="auto",
        random_state=None,
        verbose=0,
        warm_start=False,
    ):
        self.model = model
        self.layers = layers
        self.prefit = prefit
        self.fusion = fusion
        self.geo_weight = geo_weight
        self.geo_variant = geo_variant
        self.proj_dim = proj_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_backbone = lr_backbone
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.pooling = pooling
        self.exclude_tokens = exclude_tokens
        self.max_length = max_length
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    @fit_context(prefer_skip_nested_validation=False)  # a selector may be nested
    @fit_labels_doc
    def fit(self, X, y):
        """Fine-tune the backbone blocks and train the head.

        Parameters
        ----------
        X : list of str or array-like of shape (n_samples,)
            Raw texts (or the model's other raw inputs).
        {FIT_LABELS}
        """
        from skloes.extraction._hidden_states import HiddenStatesTransformer
        from skloes.models._inputs import check_inputs
        from skloes.models._loading import RemoteCodeError

        name = type(self).__name__
        warm = self._fit_start(y)
        hst = None
        if not warm:
            hst = HiddenStatesTransformer(
                self.model,
                pooling=self.pooling,
                exclude_tokens=self.exclude_tokens,
                max_length=self.max_length,
                batch_size=self.batch_size,
                device=self.device,
                verbose=self.verbose,
            )
            try:
                hst.fit(_check_raw(X, name))
            except RemoteCodeError as exc:  # no trust_remote_code option here
                raise ValueError(
                    exc.message(
                        name,
                        f"{name} does not run a model's own code: fine-tune a "
                        "model that transformers supports natively",
                    )
                ) from None
            self.model_path_, self.modality_ = hst.model_path_, hst.modality_
            self.n_model_layers_ = hst.n_model_layers_
            self.exclude_tokens_ = hst.exclude_tokens_
        items = check_inputs(X, self.modality_, owner=name, audio=self._audio())
        y = column_or_1d(y, warn=True)
        if len(y) != len(items):
            raise ValueError(
                f"{name}: `y` must have one label per input of `X`; got {len(y)} "
                f"labels for {len(items)} inputs."
            )
        codes, rng, generator = self._codes_and_draws(y, warm)
        if not warm:
            self._build(hst, items, y, generator)
        self._train_backbone(items, codes, rng, generator, torch)
        return self

    def _train_backbone(self, items, codes, rng, generator, torch):
        module = self.module_
        backbone_params = module.freeze_above_depth()
        groups = module.head.param_groups(self.lr)
        if self.lr_backbone > 0:
            groups.append({"params": backbone_params, "lr": self.lr_backbone})
        else:
            for p in backbone_params:
                p.requires_grad_(False)
        train_idx, val_idx = self._split(codes, rng)
        targets = torch.as_tensor(codes, device=self.device_)
        forward = self._forward(items, generator)
        # the backbone's dropout draws from torch's global RNG: fork it, seeded
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        cuda = self.device_.type == "cuda"
        devices = [self.device_.index or torch.cuda.current_device()] if cuda else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            self._train(module, groups, forward, targets, train_idx, val_idx, generator)
        self.backbone_tuned_ = self.lr_backbone > 0 or getattr(
            self, "backbone_tuned_", False
        )

    def _build(self, hst, items, y, generator):
        """Choose the layers on frozen features and build backbone + head."""
        from skloes.heads._modules import BackboneHead, LayerFusionHead

        self.device_ = torch.device(hst.device_)
        self.layers_, self.selector_ = self._resolve_layers(
            self.n_model_layers_, lambda sel: sel.fit(hst.transform(items), y)
        )
        # hst is local to fit: the backbone it loaded becomes ours to tune
        backbone, processor = hst.model_, hst.processor_
        head = LayerFusionHead(
            len(self.layers_),
            int(backbone.config.hidden_size),
            len(self.classes_),
            proj_dim=self.proj_dim,
            fusion=self.fusion,
            generator=generator,
        )
        self.module_ = BackboneHead(
            backbone, head, self.layers_, self.pooling, processor=processor
        ).to(self.device_)
        self.backbone_tuned_ = False

    def _forward(self, items, generator=None):
        """``forward(idx, train) -> (outputs, z)`` over ``items``."""
        module = self.module_
        frozen = self.lr_backbone == 0
        batch = self._batches(items)

        def forward(idx, train):
            inputs, exclude = batch(idx)
            if train and frozen:  # a frozen backbone runs without dropout
                module.backbone.eval()
            return module(inputs, generator if train else None, exclude)

        return forward

    def _batches(self, items):
        """``batch(idx) -> (inputs, exclude)``; texts are tokenized once."""
        from skloes.models._families import model_family
        from skloes.models._inputs import encode_batch, text_batch, tokenize_texts

        module = self.module_
        config = module.backbone.config
        if self.modality_ != "text":

            def batch(idx):
                return encode_batch(
                    module.processor,
                    self.modality_,
                    [items[i] for i in idx.tolist()],
                    max_length=self.max_length,
                    device=self.device_,
                    config=config,
                ), None

            return batch
        encoded = tokenize_texts(
            module.processor,
            items,
            self.max_length,
            config=config,
            owner=type(self).__name__,
        )
        # positions count real tokens under left padding (decoders)
        decoder = model_family(config, warn=False).positions == "count_real"

        def batch(idx):
            inputs, _, exclude = text_batch(
                module.processor,
                encoded,
                idx.tolist(),
                exclude_tokens=self.exclude_tokens_,
                decoder=decoder,
                device=self.device_,
            )
            return inputs, exclude

        return batch

    def _pooled_layers(self, X):
        """The backbone's pooled ``layers_`` on ``X``: (n_layers, n, d) float64.

        Exactly what the head receives (same tokens excluded), in eval mode.
        """
        check_is_fitted(self)
        name = type(self).__name__
        items = check_inputs_raw(X, self.modality_, name, self._audio())
        batch, module = self._batches(items), self.module_.eval()
        parts = []
        with torch.no_grad():
            for start in range(0, len(items), self.batch_size):
                idx = torch.arange(start, min(start + self.batch_size, len(items)))
                parts.append(module.pool(*batch(idx)).double().cpu().numpy())
        return np.concatenate(parts, axis=1)

    def _outputs(self, X):
        """(logits, z) as float64 numpy arrays."""
        from skloes.heads._training import predict_outputs

        check_is_fitted(self)
        items = check_inputs_raw(X, self.modality_, type(self).__name__, self._audio())
        out, z = predict_outputs(
            self.module_,
            self._forward(items),
            torch.arange(len(items)),
            self.batch_size,
        )
        return out.double().cpu().numpy(), z.double().cpu().numpy()

    def _audio(self):
        """How an audio model's clips are read: at its rate (files and
        dicts at theirs resampled to it), cropped to its window."""
        if self.modality_ != "audio":
            return None
        from skloes.models._audio import model_audio

        rate, window = model_audio(self.model_path_)
        return {"model_rate": rate, "window": window}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.non_deterministic = False
        return tags


def check_inputs_raw(X, modality, owner, audio=None):
    """Raw inputs of ``modality`` as a list (numeric feature tables rejected;
    ``audio``: how clips are read, see :func:`~skloes.models._inputs.check_inputs`)."""
    from skloes.models._inputs import check_inputs

    return check_inputs(_check_raw(X, owner), modality, owner=owner, audio=audio)


def _check_raw(X, owner):
    """Reject numeric feature tables (texts expected)."""
    dtype = getattr(X, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", "") in "biuf" and np.ndim(X) >= 2:
        raise TypeError(
            f"{owner}: `X` must hold raw inputs (texts, images or waveforms); got "
            f"a numeric array of shape {np.shape(X)}. Use GeoRegClassifier to "
            "train on precomputed layer features."
        )
    return X
