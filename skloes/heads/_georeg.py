"""GeoRegClassifier: a classifier head on layer features, trained with GeoReg.

This module never imports torch at import time; ``fit`` does (with the
``pip install skloes[torch]`` hint when it is missing). The regulariser itself
is :class:`skloes.heads._georeg_loss.GeoRegLoss`; the end-to-end estimator on texts is
:class:`skloes.heads._georeg_finetune.GeoRegFineTuner`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import resolve_layer_indices, validate_layers
from skloes.core._targets import check_class_targets, check_classes, check_label_vector
from skloes.core._torch import DEVICE_CONSTRAINT, torch
from skloes.heads._mixins import (
    EmbeddingFeatureNamesMixin,
    TorchClassifierMixin,
    fit_labels_doc,
    head_outputs,
    layer_blocks,
    validation_split,
)
from skloes.heads._options import FUSIONS, GEO_VARIANTS, GEO_WEIGHT_FEATURES
from skloes.utils._param_validation import Interval, StrOptions, fit_context

_LINEAR_CS = np.logspace(-4, 2, 7)


class _BaseGeoReg(
    TorchClassifierMixin,
    ClassifierMixin,
    EmbeddingFeatureNamesMixin,
    TransformerMixin,
    BaseEstimator,
):
    """What the feature head and the fine-tuner share: training and layers."""

    _parameter_constraints = {
        "layers": [StrOptions({"all"}), Integral, "array-like", BaseEstimator],
        "prefit": ["boolean"],
        "fusion": [StrOptions(set(FUSIONS))],
        "geo_weight": [Interval(Real, 0, None, closed="left")],
        "geo_variant": [StrOptions(set(GEO_VARIANTS))],
        "proj_dim": [Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "warmup": [Interval(Real, 0, 1, closed="both")],
        "validation_fraction": [Interval(Real, 0, 1, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }
    _val_metric = "loss"

    def _warm(self):
        return self.warm_start and hasattr(self, "module_")

    def _fit_start(self, y):
        """Refuse ``y=None``; whether this fit continues the last one."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        return self._warm()

    def _codes_and_draws(self, y, warm):
        """The class codes of ``y``, and the fit's RandomState and torch
        generator (drawn from it)."""
        from skloes.heads._modules import make_generator

        codes = self._encode_targets(y, warm)
        rng = check_random_state(self.random_state)
        return codes, rng, make_generator(rng)

    def _encode_targets(self, y, warm):
        name = type(self).__name__
        y = check_label_vector(y, name)
        y = check_class_targets(y, name)
        classes, codes = np.unique(y, return_inverse=True)
        if warm:
            if not np.array_equal(classes, self.classes_):
                raise ValueError(
                    f"{name}: with `warm_start`=True, `y` must hold the classes of "
                    f"the previous fit {self.classes_.tolist()!r}; got "
                    f"{classes.tolist()!r}."
                )
        else:
            check_classes(classes, name)
        self.classes_ = classes
        return codes

    def _split(self, codes, rng):
        return validation_split(
            len(codes),
            self.validation_fraction,
            rng,
            codes=codes,
            classes=self.classes_,
            owner=type(self).__name__,
        )

    def _selector_layers(self, fit_selector, n_layers):
        """``(layers_, selector_)`` from a selector given as ``layers``.

        ``fit_selector()`` fits a clone when ``prefit=False``; with
        ``prefit=True`` the fitted selector is copied, as
        :class:`~sklearn.feature_selection.SelectFromModel` does.
        """
        name = type(self).__name__
        if self.prefit:
            try:
                check_is_fitted(self.layers)
            except NotFittedError as exc:
                raise NotFittedError(
                    f"{name}: `prefit`=True needs a fitted selector in `layers`; "
                    f"{type(self.layers).__name__} is not fitted. Fit it first, or "
                    "pass prefit=False to fit a clone on the training data."
                ) from exc
            selector = copy.deepcopy(self.layers)
        else:
            selector = fit_selector(clone(self.layers))
        layers = np.asarray(selector.selected_layers_, dtype=int)
        n_in = getattr(selector, "n_layers_in_", n_layers)
        if n_in != n_layers or layers.max() >= n_layers:
            raise ValueError(
                f"{name}: the selector in `layers` was fitted on {n_in} layers, "
                f"but the input has {n_layers}."
            )
        return layers, selector

    def _resolve_layers(self, n_layers, fit_selector):
        """``(layers_, selector_)`` from the ``layers`` and ``prefit`` parameters."""
        name = type(self).__name__
        if isinstance(self.layers, BaseEstimator):
            return self._selector_layers(fit_selector, n_layers)
        if self.prefit:
            raise ValueError(
                f"{name}: `prefit`=True needs a fitted selector in `layers`; got "
                f"layers={self.layers!r}."
            )
        if isinstance(self.layers, str):  # "all"
            return np.arange(n_layers), None
        return resolve_layer_indices(self.layers, n_layers, owner=name), None

    def _train(self, module, groups, forward, targets, train_idx, val_idx, generator):
        from skloes.heads._georeg_loss import GeoRegLoss, georeg_can_act
        from skloes.heads._training import train_loop, warn_not_converged

        batch = min(self.batch_size, len(train_idx))
        embed_dim = self._head(module).embed_dim
        if self.geo_weight > 0 and not georeg_can_act(
            batch, embed_dim, len(self.classes_), self.geo_variant
        ):
            warnings.warn(
                f"{type(self).__name__}: GeoReg cannot act here (batches of "
                f"{batch} rows, a fused embedding of width {embed_dim}, "
                f"{len(self.classes_)} classes): the spectral term needs "
                "at least 3 rows and 2 columns, the triangle term 3 classes. "
                "`geo_weight` has no effect; raise `batch_size` or `proj_dim`.",
                UserWarning,
                stacklevel=4,
            )
        geo = GeoRegLoss(weight=self.geo_weight, variant=self.geo_variant)
        result = train_loop(
            module,
            groups,
            forward,
            targets,
            train_idx,
            val_idx,
            geo_loss=geo,
            generator=generator,
            max_epochs=self.max_epochs,
            batch_size=self.batch_size,
            weight_decay=self.weight_decay,
            warmup=self.warmup,
            n_iter_no_change=self.n_iter_no_change,
            verbose=self.verbose,
            desc=type(self).__name__,
            val_metric=self._val_metric,
            keep_initial=bool(getattr(self, "linear_probe", False)),
        )
        self.history_ = result.history
        self.best_epoch_ = result.best_epoch
        self.n_iter_ = result.n_iter
        warn_not_converged(self, result, self.max_epochs)

    @staticmethod
    def _head(module):
        return getattr(module, "head", module)

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
        return self._outputs(X)[1]


class GeoRegClassifier(_BaseGeoReg):
    """Classifier head on layer features, trained with cross-entropy + GeoReg.

    The last step of ``Pipeline([HiddenStatesTransformer, LOESSelector,
    GeoRegClassifier])``, or a head on any layer stack. Each selected layer
    block is standardised (per column, on the training rows), then goes
    through an adapter ``LayerNorm(d) → Linear(d, proj_dim) → GELU``; the
    adapter outputs are fused (concatenated by default) into ``Z`` and a probe
    ``LayerNorm → Dropout(0.2) → Linear`` gives the logits. The loss is mean
    cross-entropy plus :class:`GeoRegLoss` on ``Z``. Training uses AdamW,
    linear warmup then cosine decay per step, gradient clipping at 1.0, and
    early stopping on the cross-entropy of a stratified validation split with
    the best epoch's weights restored. By default the logits also get a fixed
    linear path, a logistic regression fitted first, which the head corrects
    (``linear_probe``; linear probing then fine-tuning, Kumar et al., ICLR
    2022): on real features the head alone lost to a tuned logistic regression
    (see the user guide, :ref:`georeg`).

    Parameters
    ----------
    layers : "all", int, list of int or selector, default="all"
        Layer blocks to use, as indices into the stack (for a flat table, the
        block index). A selector (e.g. :class:`LOESSelector`) is cloned and
        fitted on the training data, unless ``prefit=True``; it contributes
        its ``selected_layers_``.
    prefit : bool, default=False
        Whether the selector in ``layers`` is already fitted: it is then
        copied and used as is (as ``SelectFromModel(prefit=True)`` does).
    layer_dim : int or None, default=None
        Block width of a flat table. None reads the width the table declares
        (the output of ``HiddenStatesTransformer``), and a plain table as one
        block; see :ref:`data_contract`.
    fusion : {"concat", "mean", "sum", "scalar_mix"}, default="concat"
        How the adapter outputs are combined.
    geo_weight : float, default=0.01
        GeoReg weight ``w``; 0 is the plain cross-entropy baseline. The
        spectral term acts on every batch of at least 3 rows (binary tasks
        included); the triangle term needs at least 3 classes in the batch.
        The default is a tenth of the paper's 0.1, which
        :class:`GeoRegFineTuner` keeps; why they differ is measured in the
        user guide (:ref:`georeg_head_weight`).
    geo_variant : {"robust", "reference"}, default="robust"
        See :class:`GeoRegLoss`.
    standardize : bool, default=True
        Standardise every input column on the training rows before the
        adapters.
    linear_probe : bool, default=True
        Start from a logistic regression on the concatenated blocks (``C`` by
        3-fold cross-validation), fitted on every training row, the
        validation split included, and kept as a fixed linear path to the
        logits; the head learns a correction on the other rows and the
        untrained model counts as epoch 0 of early stopping, so the logistic
        regression is kept unless an epoch beats it on the validation split.
        False gives the authors' head alone.
    proj_dim : int, default=256
        Adapter width.
    max_epochs : int, default=50
        Maximum number of epochs.
    batch_size : int, default=128
        Mini-batch size (the last partial batch is kept).
    lr : float, default=1e-4
        AdamW learning rate of the adapters and the probe.
    weight_decay : float, default=0.01
        AdamW weight decay on all trainable parameters.
    warmup : float, default=0.1
        Fraction of the steps with a linear warmup from 0.
    validation_fraction : float, default=0.1
        Stratified validation share for early stopping; 0 keeps the final
        weights and stops when the training loss stalls.
    n_iter_no_change : int, default=5
        Patience in epochs.
    device : str or torch.device, default="auto"
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
        The layer blocks the head uses, ascending.
    selector_ : estimator or None
        The fitted selector (a clone, or a copy with ``prefit=True``) when
        ``layers`` is one.
    mean_, scale_ : ndarray of shape (len(layers_), dim) or None
        The standardisation of the used blocks (None without it).
    module_ : torch.nn.Module
        The trained head.
    history_ : list of dict
        Per epoch: ``loss``, ``task_loss``, ``geo_loss``, ``geo_spectral``,
        ``geo_triangle``, ``val_score``, ``val_loss``, ``lr``.
    best_epoch_ : int
        The epoch whose weights were kept (1-based; 0 when the untrained
        model, the logistic regression with ``linear_probe=True``, was kept).
    n_iter_ : int
        Epochs run.
    device_ : torch.device
        Where the module lives.
    n_layers_in_, dim_in_ : int
        Layout of the input (``n_features_in_`` for a flat table).

    See Also
    --------
    GeoRegFineTuner : The same head with the backbone, fine-tuned on texts.
    GeoRegLoss : The regulariser.
    LOESSelector : Chooses the layers.

    Notes
    -----
    Same ``random_state`` on the same CPU gives identical weights and
    predictions; randomness comes from a seeded ``torch.Generator``, never the
    global one.
    Requires ``pip install skloes[torch]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes import GeoRegClassifier
    >>> rng = np.random.RandomState(0)
    >>> H = rng.normal(size=(3, 60, 8))
    >>> y = np.repeat([0, 1, 2], 20)
    >>> H[2] += np.eye(8)[y] * 3
    >>> clf = GeoRegClassifier(layers=[1, 2], proj_dim=16,
    ...                        random_state=0).fit(H, y)  # doctest: +SKIP
    >>> clf.predict(H).shape  # doctest: +SKIP
    (60,)
    """

    _parameter_constraints = {
        **_BaseGeoReg._parameter_constraints,
        "layer_dim": [None, Interval(Integral, 1, None, closed="left")],
        "standardize": ["boolean"],
        "linear_probe": ["boolean"],
    }

    def __init__(
        self,
        *,
        layers="all",
        prefit=False,
        layer_dim=None,
        fusion="concat",
        geo_weight=GEO_WEIGHT_FEATURES,
        geo_variant="robust",
        standardize=True,
        linear_probe=True,
        proj_dim=256,
        max_epochs=50,
        batch_size=128,
        lr=1e-4,
        weight_decay=0.01,
        warmup=0.1,
        validation_fraction=0.1,
        n_iter_no_change=5,
        device="auto",
        random_state=None,
        verbose=0,
        warm_start=False,
    ):
        self.layers = layers
        self.prefit = prefit
        self.layer_dim = layer_dim
        self.fusion = fusion
        self.geo_weight = geo_weight
        self.geo_variant = geo_variant
        self.standardize = standardize
        self.linear_probe = linear_probe
        self.proj_dim = proj_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    @fit_context(prefer_skip_nested_validation=False)  # a selector may be nested
    @fit_labels_doc
    def fit(self, X, y):
        """Train the head.

        Parameters
        ----------
        X : array-like
            A layer stack (n_layers, n_samples, dim) or a flat table
            (n_samples, n_features).
        {FIT_LABELS}
        """
        from skloes.core._torch import resolve_device
        from skloes.heads._modules import LayerFusionHead

        warm = self._fit_start(y)
        stack, y = self._validate_features(X, y, reset=not warm)
        codes, rng, generator = self._codes_and_draws(y, warm)
        if not warm:
            self.layers_, self.selector_ = self._resolve_layers(
                stack.shape[0], lambda sel: sel.fit(stack, y)
            )
            self.device_ = resolve_device(self.device, owner=type(self).__name__)
            self._fit_scaling(stack)
        feats = self._features(stack)
        train_idx, val_idx = self._split(codes, rng)
        if not warm:
            head = LayerFusionHead(
                len(self.layers_),
                feats.shape[2],
                len(self.classes_),
                proj_dim=self.proj_dim,
                fusion=self.fusion,
                generator=generator,
                linear_skip=self.linear_probe,
            )
            if self.linear_probe:
                head.set_linear_probe(*self._linear_probe(feats, codes, rng))
            self.module_ = head.to(self.device_)
        head = self.module_
        targets = torch.as_tensor(codes, device=self.device_)

        def forward(idx, train):
            return head(feats[idx].to(self.device_), generator if train else None)

        self._train(
            head,
            head.param_groups(self.lr),
            forward,
            targets,
            train_idx,
            val_idx,
            generator,
        )
        return self

    def _linear_probe(self, feats, codes, rng):
        """Logistic regression on the flattened blocks, C by 3-fold CV.

        Fitted on every training row, the validation split included (as a
        ``LogisticRegressionCV`` on the same data would be): the split only
        decides how long the correction trains. Returns ``(coef, intercept)``
        as softmax logits over ``classes_``.
        """
        from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

        X = feats.reshape(len(feats), -1).numpy().astype(np.float64)
        y = codes
        n_classes = len(self.classes_)
        smallest = np.bincount(y, minlength=n_classes).min()
        seed = int(rng.randint(0, 2**31 - 1))
        if smallest >= 2:
            from sklearn.model_selection import StratifiedKFold

            cv = StratifiedKFold(min(3, int(smallest)), shuffle=True, random_state=seed)
            model = LogisticRegressionCV(Cs=_LINEAR_CS, cv=cv, max_iter=1000)
        else:  # a class with one training row: no CV possible
            model = LogisticRegression(max_iter=1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lbfgs convergence on tiny C grids
            model.fit(X, y)
        coef, intercept = model.coef_, model.intercept_
        if coef.shape[0] == 1 and n_classes == 2:  # binary: class 0's logit is 0
            coef = np.vstack([np.zeros_like(coef), coef])
            intercept = np.r_[0.0, intercept]
        full_coef = np.zeros((n_classes, X.shape[1]))
        full_int = np.full(n_classes, -30.0)  # a class absent from training
        full_coef[model.classes_] = coef
        full_int[model.classes_] = intercept
        return full_coef, full_int

    def _fit_scaling(self, stack):
        if not self.standardize:
            self.mean_ = self.scale_ = None
            return
        blocks = stack[self.layers_]
        self.mean_ = blocks.mean(axis=1)
        std = blocks.std(axis=1)
        self.scale_ = np.where(std > 1e-12 * (1 + np.abs(self.mean_)), std, 1.0)

    def _features(self, stack):
        """Float32 tensor (n_samples, K, dim) of the used (scaled) blocks."""
        feats = layer_blocks(stack, self.layers_)
        if self.mean_ is None:
            return feats
        mean = torch.as_tensor(self.mean_, dtype=torch.float32)
        scale = torch.as_tensor(self.scale_, dtype=torch.float32)
        return (feats - mean) / scale

    def _validate_features(self, X, y="no_validation", *, reset):
        name = type(self).__name__
        if _is_text(X):
            raise TypeError(
                f"{name}: `X` holds strings, but {name} takes numeric layer "
                "features (a layer stack or a flat table); use GeoRegFineTuner "
                "to train on raw texts, or put a HiddenStatesTransformer first."
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
            self,
            X,
            y,
            layer_dim=self.layer_dim,
            reset=reset,
            dtype=(np.float32, np.float64),
            plain="one_layer",
        )

    def _outputs(self, X):
        """(logits, z) as float64 numpy arrays."""
        check_is_fitted(self)
        feats = self._features(self._validate_features(X, reset=False))
        return head_outputs(self.module_, feats, max(self.batch_size, 1024))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
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
