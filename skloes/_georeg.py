"""GeoReg: a geometry-preserving regulariser and the classifier that trains with it."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
from numbers import Integral, Real

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d
from torch import nn

from skloes._geometry import (
    class_centroids_torch,
    sample_distinct_triplets,
    spectral_imbalance_torch,
    triangle_areas_torch,
)
from skloes._heads import (
    FUSIONS,
    BackboneHead,
    LayerFusionHead,
    make_generator,
    pack_module,
    predict_outputs,
    resolve_device,
    train_loop,
    unpack_module,
    warn_not_converged,
)
from skloes.utils._param_validation import Interval, StrOptions, _fit_context
from skloes.utils._validation import (
    check_label_vector,
    resolve_layer_indices,
    validate_layers,
)

_VARIANTS = ("robust", "reference")


def _check_batch(z, y):
    """One clear error naming ``z`` or ``y`` before the loss's linear algebra."""
    if z.ndim != 2 or z.shape[0] == 0:
        raise ValueError(
            "GeoRegLoss: `z` must be a non-empty (batch_size, dim) tensor; got "
            f"shape {tuple(z.shape)}."
        )
    if y is not None and tuple(y.shape) != (z.shape[0],):
        raise ValueError(
            f"GeoRegLoss: `y` must hold one label per row of `z` ({z.shape[0]}); "
            f"got shape {tuple(y.shape)}."
        )
    if not bool(torch.isfinite(z).all()):
        raise ValueError(
            "GeoRegLoss: `z` has NaN or inf values (a diverged or unscaled "
            "embedding); the spectral term needs finite inputs."
        )


def _check_finite_loss(loss, z):
    if not bool(torch.isfinite(loss)):
        raise ValueError(
            f"GeoRegLoss: the loss overflows {z.dtype} for this `z` (largest "
            f"|z| = {float(z.abs().max()):.3g}); rescale the embedding."
        )


def _numpy_rng(generator):
    """A numpy Generator seeded by one draw from a torch generator."""
    seed = torch.randint(0, 2**62, (1,), generator=generator).item()
    return np.random.default_rng(seed)


class GeoRegLoss(nn.Module):
    """Geometry-preserving regulariser of a fused mini-batch embedding.

    ``L_geo = weight · (spectral + triangle)``. The spectral term penalises an
    unbalanced covariance spectrum of the batch embedding ``z`` (dimensional
    collapse); the triangle term rewards a large area of the triangles spanned
    by the class centroids of the batch (class collapse). Both terms are
    computed by :mod:`skloes._geometry`; this module only combines them.

    Parameters
    ----------
    weight : float, default=0.1
        Multiplier ``w`` of the regulariser; 0 disables it.
    variant : {"robust", "reference"}, default="robust"
        ``"reference"`` is the authors' form: the variance of the ``D'``
        covariance eigenvalues (plus ``1e-4`` jitter) minus the log area of
        one random centroid triangle of the raw embedding. ``"robust"`` is
        scale-invariant and variance-reduced: the normalised spectral
        imbalance ``V̂`` of the top ``min(B-1, D')`` eigenvalues plus the mean
        of ``-log(area + eps)`` over up to ``n_triplets`` centroid triangles of
        the L2-normalised rows.
    n_triplets : int, default=32
        Robust variant: every triplet of present classes is used when there
        are at most this many, otherwise this many distinct ones are drawn
        afresh at each call. The reference variant always uses one.
    eps : float, default=1e-6
        Added to the triangle areas inside the logarithm.

    See Also
    --------
    GeoRegFineTuner : Classifier head trained with cross-entropy + GeoReg.

    Notes
    -----
    With class labels, the loss is exactly 0 when the batch holds fewer than 3
    samples or fewer than 3 distinct classes. With ``y=None`` (regression) only
    the spectral term is used. Gradients never flow through eigenvectors, so
    repeated eigenvalues, duplicated rows and rank-deficient batches are safe.
    Requires ``pip install skloes[torch]``.

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> from skloes import GeoRegLoss  # doctest: +SKIP
    >>> z = torch.randn(16, 8, requires_grad=True)  # doctest: +SKIP
    >>> y = torch.arange(16) % 4  # doctest: +SKIP
    >>> GeoRegLoss(weight=0.1)(z, y).backward()  # doctest: +SKIP
    """

    def __init__(self, weight=0.1, variant="robust", n_triplets=32, eps=1e-6):
        super().__init__()
        if variant not in _VARIANTS:
            raise ValueError(
                f"GeoRegLoss: `variant` must be one of {_VARIANTS}; got {variant!r}."
            )
        if not weight >= 0:
            raise ValueError(f"GeoRegLoss: `weight` must be >= 0; got {weight!r}.")
        if int(n_triplets) != n_triplets or n_triplets < 1:
            raise ValueError(
                f"GeoRegLoss: `n_triplets` must be a positive int; got {n_triplets!r}."
            )
        if not eps > 0:
            raise ValueError(f"GeoRegLoss: `eps` must be > 0; got {eps!r}.")
        self.weight = float(weight)
        self.variant = variant
        self.n_triplets = int(n_triplets)
        self.eps = float(eps)

    def extra_repr(self):
        return (
            f"weight={self.weight}, variant={self.variant!r}, "
            f"n_triplets={self.n_triplets}, eps={self.eps}"
        )

    def spectral_term(self, z):
        """Unweighted spectral term of ``z`` (B, D'); 0 when B < 3.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding.

        Returns
        -------
        term : torch.Tensor
            Scalar.
        """
        if z.shape[0] < 3:
            return z.new_zeros(())
        return spectral_imbalance_torch(z, variant=self.variant)

    def triangle_term(self, z, y, generator=None):
        """Unweighted triangle term; 0 when fewer than 3 classes or rows.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding.
        y : torch.Tensor of shape (batch_size,)
            Class labels (any integer coding).
        generator : torch.Generator or None, default=None
            Source of the random triplets (the global generator when None).

        Returns
        -------
        term : torch.Tensor
            Scalar.
        """
        classes, codes = torch.unique(y, return_inverse=True)
        n_classes = classes.numel()
        if z.shape[0] < 3 or n_classes < 3:
            return z.new_zeros(())
        robust = self.variant == "robust"
        n_draw = self.n_triplets if robust else 1
        triplets = sample_distinct_triplets(n_classes, n_draw, _numpy_rng(generator))
        triplets = torch.as_tensor(triplets, device=z.device)
        points = F.normalize(z, dim=1, eps=1e-12) if robust else z
        centroids = class_centroids_torch(points, codes.to(z.device), n_classes)
        areas = triangle_areas_torch(centroids, triplets, floor=1e-12 if robust else 1e-6)
        return -torch.log(areas + self.eps).mean()

    def terms(self, z, y=None, generator=None):
        """The two unweighted terms ``(spectral, triangle)``.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding.
        y : torch.Tensor of shape (batch_size,) or None, default=None
            Class labels; None (regression) gives a zero triangle term.
        generator : torch.Generator or None, default=None
            Source of the random triplets.

        Returns
        -------
        spectral, triangle : torch.Tensor
            Scalars; both 0 when there are labels and fewer than 3 classes.
        """
        if y is None:
            return self.spectral_term(z), z.new_zeros(())
        n_classes = torch.unique(y).numel()
        if z.shape[0] < 3 or n_classes < 3:
            zero = z.new_zeros(())
            return zero, zero
        return self.spectral_term(z), self.triangle_term(z, y, generator)

    def forward(self, z, y=None, generator=None):
        """Weighted GeoReg loss ``weight · (spectral + triangle)``.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding (before any LayerNorm of the probe).
        y : torch.Tensor of shape (batch_size,) or None, default=None
            Class labels; None uses the spectral term only (regression).
        generator : torch.Generator or None, default=None
            Source of the random triplets.

        Returns
        -------
        loss : torch.Tensor
            Scalar.
        """
        _check_batch(z, y)
        spectral, triangle = self.terms(z, y, generator)
        loss = self.weight * (spectral + triangle)
        _check_finite_loss(loss, z)
        return loss


# --------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------
class GeoRegFineTuner(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Classifier head over selected layers, trained with cross-entropy + GeoReg.

    Each selected layer block goes through an adapter ``LayerNorm(d) →
    Linear(d, proj_dim) → GELU``; the adapter outputs are fused (concatenated by
    default) into ``Z`` and a probe ``LayerNorm → Dropout(0.2) → Linear`` gives
    the logits. The loss is mean cross-entropy plus :class:`GeoRegLoss` on
    ``Z``. Training uses AdamW, linear warmup then cosine decay per step,
    gradient clipping at 1.0, and early stopping on a stratified validation
    split with the best epoch's weights restored.

    ``mode="head"`` (default) trains on precomputed features: a layer stack
    ``(n_layers, n_samples, dim)``, a flat table ``(n_samples, n_layers *
    layer_dim)`` (for instance ``HiddenStatesTransformer`` flat output, or the
    fused embedding of a selector). ``mode="finetune"`` takes raw inputs and
    also fine-tunes the backbone up to the deepest selected block.

    Parameters
    ----------
    mode : {"head", "finetune"}, default="head"
        Train the head on features, or fine-tune the backbone end to end.
    model : str, os.PathLike or None, default=None
        ``mode="finetune"`` only: a local folder or hub id; None is the
        embedded default model (as in ``HiddenStatesTransformer``).
    layers : None, int, list of int or LOESSelector, default=None
        Layer blocks to use, as Hugging Face ``hidden_states`` indices (0 is
        the embedding output; for a flat table, the block index). None uses
        every block. A selector is fitted on the training data (head mode) or
        on the frozen model's features (finetune mode) unless it is already
        fitted, and contributes its ``selected_layers_``. ``clone``, hence a
        grid search, unfits a selector: it is then refitted on each training
        fold.
    layer_dim : int or None, default=None
        Block width of a flat table. None reads the width the table declares
        (the output of ``HiddenStatesTransformer``), and a plain table as one
        block; see :ref:`data_contract`.
    fusion : {"concat", "mean", "sum", "scalar_mix"}, default="concat"
        How the adapter outputs are combined.
    geo_weight : float, default=0.1
        GeoReg weight ``w``; 0 is the plain cross-entropy baseline.
    geo_variant : {"robust", "reference"}, default="robust"
        See :class:`GeoRegLoss`.
    proj_dim : int, default=256
        Adapter width.
    max_epochs : int, default=15
        Maximum number of epochs.
    batch_size : int, default=128
        Mini-batch size (the last partial batch is kept).
    lr : float, default=1e-4
        Learning rate of the adapters and probe.
    lr_backbone : float, default=2e-5
        Learning rate of the backbone (``mode="finetune"``).
    weight_decay : float, default=0.01
        AdamW weight decay on all trainable parameters.
    warmup : float, default=0.1
        Fraction of the steps with a linear warmup from 0.
    validation_fraction : float, default=0.1
        Stratified validation share for early stopping; 0 keeps the final
        weights and stops when the training loss stalls.
    n_iter_no_change : int, default=3
        Patience in epochs.
    pooling : {"mean", "first", "cls", "last", "max"}, default="mean"
        Token pooling in ``mode="finetune"``.
    max_length : int, default=256
        Token truncation in ``mode="finetune"``.
    device : str, default="auto"
        Torch device; "auto" picks CUDA, then MPS, then CPU.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, shuffles, dropout, triplets and the split.
    verbose : int, default=0
        A progress bar over epochs when > 0.
    warm_start : bool, default=False
        Continue from the fitted weights instead of re-initialising.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    layers_ : ndarray of int
        The hidden-state (or block) indices the head uses, ascending.
    selector_ : estimator or None
        The fitted selector when ``layers`` is one.
    module_ : torch.nn.Module
        The trained head (and backbone, in finetune mode).
    history_ : list of dict
        Per epoch: ``loss``, ``task_loss``, ``geo_loss``, ``geo_spectral``,
        ``geo_triangle``, ``val_score``, ``lr``.
    best_epoch_ : int
        The epoch whose weights were kept (1-based).
    n_iter_ : int
        Epochs run.
    device_ : torch.device
        Where the module lives.
    n_layers_in_, dim_in_ : int
        Layout of the head-mode input (``n_features_in_`` for flat input).
    model_path_, modality_ : str
        Finetune mode: the resolved model folder and its input modality.
    n_model_layers_ : int
        Finetune mode: number of hidden states of the model (blocks + 1).
    backbone_tuned_ : bool
        Finetune mode: whether the backbone weights were trained (then they
        are pickled with the estimator).

    See Also
    --------
    GeoRegLoss : The regulariser.
    LOESSelector : Chooses the layers.

    Notes
    -----
    Same ``random_state`` on CPU gives identical weights and predictions;
    randomness comes from a seeded ``torch.Generator``, never the global one
    (the backbone's own dropout in finetune mode runs in a forked, seeded RNG
    state). Requires ``pip install skloes[torch]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes import GeoRegFineTuner  # doctest: +SKIP
    >>> rng = np.random.RandomState(0)
    >>> H = rng.normal(size=(3, 60, 8))
    >>> y = np.repeat([0, 1, 2], 20)
    >>> H[2] += np.eye(8)[y] * 3
    >>> clf = GeoRegFineTuner(layers=[1, 2], proj_dim=16, lr=1e-2,
    ...                       random_state=0).fit(H, y)  # doctest: +SKIP
    >>> clf.predict(H).shape  # doctest: +SKIP
    (60,)
    """

    _parameter_constraints = {
        "mode": [StrOptions({"head", "finetune"})],
        "model": [None, str, os.PathLike],
        "layers": [None, Integral, "array-like", BaseEstimator],
        "layer_dim": [None, Interval(Integral, 1, None, closed="left")],
        "fusion": [StrOptions(set(FUSIONS))],
        "geo_weight": [Interval(Real, 0, None, closed="left")],
        "geo_variant": [StrOptions(set(_VARIANTS))],
        "proj_dim": [Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "lr_backbone": [Interval(Real, 0, None, closed="left")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "warmup": [Interval(Real, 0, 1, closed="both")],
        "validation_fraction": [Interval(Real, 0, 1, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "pooling": [StrOptions({"mean", "first", "cls", "last", "max"})],
        "max_length": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    def __init__(self, *, mode="head", model=None, layers=None, layer_dim=None,
                 fusion="concat", geo_weight=0.1, geo_variant="robust",
                 proj_dim=256, max_epochs=15, batch_size=128, lr=1e-4,
                 lr_backbone=2e-5, weight_decay=0.01, warmup=0.1,
                 validation_fraction=0.1, n_iter_no_change=3, pooling="mean",
                 max_length=256, device="auto", random_state=None, verbose=0,
                 warm_start=False):
        self.mode = mode
        self.model = model
        self.layers = layers
        self.layer_dim = layer_dim
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
        self.max_length = max_length
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=False)  # a selector may be nested
    def fit(self, X, y):
        """Train the head (and, in finetune mode, the backbone).

        Parameters
        ----------
        X : array-like
            Head mode: a stack (n_layers, n_samples, dim) or a flat table
            (n_samples, n_features). Finetune mode: raw inputs (texts).
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        if self.mode == "finetune":
            return self._fit_finetune(X, y)
        return self._fit_head(X, y)

    def _warm(self):
        return self.warm_start and hasattr(self, "module_")

    def _fit_head(self, X, y):
        warm = self._warm()
        stack, y = self._validate_features(X, y, reset=not warm)
        codes = self._encode_targets(y, warm)
        rng = check_random_state(self.random_state)
        generator = make_generator(rng)
        if not warm:
            self.layers_, self.selector_ = self._resolve_layers(stack, y)
            self.device_ = resolve_device(self.device)
        feats = self._layer_blocks(stack)
        train_idx, val_idx = self._split(codes, rng)
        if not warm:
            self.module_ = LayerFusionHead(
                len(self.layers_), feats.shape[2], len(self.classes_),
                proj_dim=self.proj_dim, fusion=self.fusion, generator=generator,
            ).to(self.device_)
        head = self.module_
        targets = torch.as_tensor(codes, device=self.device_)

        def forward(idx, train):
            return head(feats[idx].to(self.device_), generator if train else None)

        self._train(head, head.param_groups(self.lr), forward, targets,
                    train_idx, val_idx, generator)
        return self

    def _train(self, module, groups, forward, targets, train_idx, val_idx, generator):
        geo = GeoRegLoss(weight=self.geo_weight, variant=self.geo_variant)
        result = train_loop(
            module, groups, forward, targets, train_idx, val_idx, geo_loss=geo,
            generator=generator, max_epochs=self.max_epochs,
            batch_size=self.batch_size, weight_decay=self.weight_decay,
            warmup=self.warmup, n_iter_no_change=self.n_iter_no_change,
            verbose=self.verbose, desc=type(self).__name__,
        )
        self.history_ = result.history
        self.best_epoch_ = result.best_epoch
        self.n_iter_ = result.n_iter
        warn_not_converged(self, result, self.max_epochs)

    # ----------------------------------------------------------- validation
    def _validate_features(self, X, y="no_validation", *, reset):
        name = type(self).__name__
        if _is_text(X):
            raise TypeError(
                f"{name}: `X` holds strings, but mode='head' takes numeric layer "
                "features (a layer stack or a flat table); pass mode='finetune' to "
                "train on raw texts."
            )
        if not hasattr(X, "ndim"):  # lists and other array-likes
            X = np.asarray(X)
        if X.ndim not in (2, 3):
            raise ValueError(
                f"{name}: `X` must be a layer stack (n_layers, n_samples, dim) or a "
                f"flat table (n_samples, n_features); got {X.ndim} dimension(s). "
                "Reshape your data either using X.reshape(-1, 1) if your data has a "
                "single feature or X.reshape(1, -1) if it contains a single sample."
            )
        return validate_layers(
            self, X, y, layer_dim=self.layer_dim, reset=reset,
            dtype=(np.float32, np.float64), plain="one_layer",
        )

    def _encode_targets(self, y, warm):
        name = type(self).__name__
        y = check_label_vector(y, name)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if warm:
            if not np.array_equal(classes, self.classes_):
                raise ValueError(
                    f"{name}: with `warm_start`=True, `y` must hold the classes of "
                    f"the previous fit {self.classes_.tolist()!r}; got "
                    f"{classes.tolist()!r}."
                )
        elif len(classes) < 2:
            raise ValueError(
                f"{name}: `y` must hold at least 2 classes; got one class "
                f"({classes[0].tolist()!r})."
            )
        self.classes_ = classes
        return codes

    def _resolve_layers(self, stack, y):
        """``(layers_, selector_)`` from the ``layers`` parameter."""
        n_layers = stack.shape[0]
        if isinstance(self.layers, BaseEstimator):
            selector = self.layers
            if not _is_fitted(selector):
                selector = clone(selector).fit(stack, y)
            layers = np.asarray(selector.selected_layers_, dtype=int)
            n_in = getattr(selector, "n_layers_in_", n_layers)
            if n_in != n_layers or layers.max() >= n_layers:
                raise ValueError(
                    f"{type(self).__name__}: the fitted selector in `layers` was "
                    f"fitted on {n_in} layers, but `X` has {n_layers}."
                )
            return layers, selector
        if self.layers is None:
            return np.arange(n_layers), None
        return resolve_layer_indices(
            self.layers, n_layers, owner=type(self).__name__
        ), None

    def _layer_blocks(self, stack):
        """Float32 CPU tensor (n_samples, K, dim) of the selected layers."""
        blocks = np.stack([stack[l] for l in self.layers_], axis=1)
        return torch.from_numpy(np.ascontiguousarray(blocks, dtype=np.float32))

    def _split(self, codes, rng):
        """Stratified train/validation indices (CPU LongTensors)."""
        n = len(codes)
        all_idx = torch.arange(n)
        fraction = self.validation_fraction
        if fraction == 0:
            return all_idx, all_idx[:0]
        counts = np.bincount(codes)
        # at least one validation sample per class; every class keeps training rows
        n_val = max(int(np.ceil(fraction * n)), len(counts))
        smallest = int(counts.argmin())
        if counts.min() < 2 or counts.min() * (1 - fraction) < 1 or n - n_val < len(
            counts
        ):
            raise ValueError(
                f"{type(self).__name__}: `validation_fraction`={fraction} is too "
                "large for the smallest class "
                f"({self.classes_[smallest].tolist()!r} has "
                f"{counts.min()} samples; {n} samples in {len(counts)} classes): "
                "the stratified split needs every class on both sides. Lower it, "
                "or set validation_fraction=0 to train without early stopping."
            )
        train, val = train_test_split(
            np.arange(n), test_size=n_val, stratify=codes,
            random_state=rng.randint(0, 2**31 - 1),
        )
        return torch.from_numpy(np.sort(train)), torch.from_numpy(np.sort(val))

    # ------------------------------------------------------- end-to-end mode
    def _fit_finetune(self, X, y):
        from skloes._hidden_states import HiddenStatesTransformer
        from skloes._models import check_inputs

        name = type(self).__name__
        warm = self._warm()
        if not warm:
            hst = HiddenStatesTransformer(
                self.model, pooling=self.pooling, max_length=self.max_length,
                batch_size=self.batch_size, device=self.device,
                verbose=self.verbose,
            ).fit(_check_raw(X, name))
            self.model_path_, self.modality_ = hst.model_path_, hst.modality_
            self.n_model_layers_ = hst.n_model_layers_
        items = check_inputs(X, self.modality_, owner=name)
        y = column_or_1d(y, warn=True)
        if len(y) != len(items):
            raise ValueError(
                f"{name}: `y` must have one label per input of `X`; got {len(y)} "
                f"labels for {len(items)} inputs."
            )
        codes = self._encode_targets(y, warm)
        rng = check_random_state(self.random_state)
        generator = make_generator(rng)
        if not warm:
            self._init_finetune(hst, items, y, generator)
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
        forward = self._raw_forward(items, generator)
        # the backbone's dropout draws from torch's global RNG: fork it, seeded
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        cuda = self.device_.type == "cuda"
        devices = [self.device_.index or torch.cuda.current_device()] if cuda else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            self._train(module, groups, forward, targets, train_idx, val_idx,
                        generator)
        self.backbone_tuned_ = self.lr_backbone > 0 or getattr(
            self, "backbone_tuned_", False
        )
        return self

    def _init_finetune(self, hst, items, y, generator):
        """Choose the layers on frozen features and build backbone + head."""
        name = type(self).__name__
        self.device_ = torch.device(hst.device_)
        if isinstance(self.layers, BaseEstimator) and not _is_fitted(self.layers):
            stack = hst.transform(items)  # frozen features of every layer
            self.layers_, self.selector_ = self._resolve_layers(stack, y)
        elif isinstance(self.layers, BaseEstimator):
            dummy = np.empty((self.n_model_layers_, 0, 0))
            self.layers_, self.selector_ = self._resolve_layers(dummy, y)
        elif self.layers is None:
            self.layers_, self.selector_ = np.arange(self.n_model_layers_), None
        else:
            self.layers_ = resolve_layer_indices(
                self.layers, self.n_model_layers_, owner=name
            )
            self.selector_ = None
        # hst is local to fit: the backbone it loaded becomes ours to tune
        backbone, processor = hst.model_, hst.processor_
        head = LayerFusionHead(
            len(self.layers_), int(backbone.config.hidden_size), len(self.classes_),
            proj_dim=self.proj_dim, fusion=self.fusion, generator=generator,
        )
        self.module_ = BackboneHead(backbone, head, self.layers_, self.pooling,
                                    processor=processor).to(self.device_)
        self.backbone_tuned_ = False

    def _raw_forward(self, items, generator=None):
        from skloes._models import encode_batch

        module = self.module_

        frozen = self.lr_backbone == 0

        def forward(idx, train):
            inputs = encode_batch(
                module.processor, self.modality_, [items[i] for i in idx.tolist()],
                max_length=self.max_length, device=self.device_,
                config=module.backbone.config,
            )
            if train and frozen:  # a frozen backbone runs without dropout
                module.backbone.eval()
            return module(inputs, generator if train else None)

        return forward

    def _finetune_outputs(self, X):
        from skloes._models import check_inputs

        name = type(self).__name__
        items = check_inputs(_check_raw(X, name), self.modality_, owner=name)
        forward = self._raw_forward(items)
        return predict_outputs(self.module_, forward, torch.arange(len(items)),
                               self.batch_size)

    # ------------------------------------------------------------- predict
    def _outputs(self, X):
        """(logits, z) as float64 numpy arrays."""
        check_is_fitted(self)
        if self.mode == "finetune":
            out, z = self._finetune_outputs(X)
        else:
            stack = self._validate_features(X, reset=False)
            feats = self._layer_blocks(stack)
            head = self.module_

            def forward(idx, train):
                return head(feats[idx].to(self.device_))

            out, z = predict_outputs(head, forward, torch.arange(len(feats)),
                                     max(self.batch_size, 1024))
        return out.double().cpu().numpy(), z.double().cpu().numpy()

    def decision_function(self, X):
        """Return the logits (binary: class 1's logit minus class 0's).

        Parameters
        ----------
        X : array-like
            As in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Unnormalised class scores.
        """
        logits, _ = self._outputs(X)
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits

    def predict_proba(self, X):
        """Class probabilities (softmax of the logits).

        Parameters
        ----------
        X : array-like
            As in :meth:`fit`.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities in the order of ``classes_``.
        """
        logits, _ = self._outputs(X)
        logits -= logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like
            As in :meth:`fit`.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        logits, _ = self._outputs(X)
        return self.classes_[logits.argmax(axis=1)]

    def transform(self, X):
        """The fused embedding ``Z`` (the input of the probe's LayerNorm).

        Parameters
        ----------
        X : array-like
            As in :meth:`fit`.

        Returns
        -------
        Z : ndarray of shape (n_samples, embed_dim)
            Float64; ``embed_dim = len(layers_) * proj_dim`` for concat fusion.
        """
        _, z = self._outputs(X)
        return z

    # ------------------------------------------------------------- pickling
    def __getstate__(self):
        state = dict(super().__getstate__())  # object's is the live __dict__
        module = state.pop("module_", None)
        if module is not None:
            tuned = getattr(self, "backbone_tuned_", True)
            state["_module_pickle"] = pack_module(
                module, path=getattr(self, "model_path_", None), tuned=tuned
            )
        return state

    def __setstate__(self, state):
        packed = state.pop("_module_pickle", None)
        super().__setstate__(state)
        if packed is not None:
            device = self.device_
            if device.type == "cuda" and not torch.cuda.is_available():
                self.device_ = device = torch.device("cpu")
            self.module_ = unpack_module(packed).to(device)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.mode == "finetune":
            tags.input_tags.two_d_array = False
            tags.input_tags.string = True
        else:
            tags.input_tags.three_d_array = True
        return tags


def _is_text(X):
    """Whether ``X`` looks like raw strings rather than numeric features."""
    if isinstance(X, str):
        return True
    if isinstance(X, (list, tuple)):
        return len(X) > 0 and isinstance(X[0], str)
    dtype = getattr(X, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", "") in "OUS":
        flat = np.asarray(X).ravel()
        return flat.size > 0 and isinstance(flat[0], str)
    return False


def _check_raw(X, name):
    """Reject numeric feature tables in finetune mode (texts expected)."""
    dtype = getattr(X, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", "") in "biuf" and np.ndim(X) == 2:
        raise TypeError(
            f"{name}: mode='finetune' takes raw inputs (texts, images or "
            f"waveforms); got a numeric array of shape {np.shape(X)}. Pass "
            "mode='head' to train on precomputed layer features."
        )
    return X


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True
