"""Trainable heads over layer blocks and the training loop they share (torch).

This module imports torch at its top (with the ``pip install skloes[torch]`` hint
when it is missing): import it inside ``fit`` (never at the top of an estimator
module), so that ``import skloes`` and ``import skloes.baselines`` stay
torch-free. The estimator-side helpers that need no torch at import (pickling,
the validation split, logits to probabilities) live in :mod:`skloes._torch_head`.

The pieces, reused by :class:`~skloes.GeoRegClassifier`,
:class:`~skloes.GeoRegFineTuner` and the ScalarMix baselines:

- :class:`LayerFusionHead` maps a batch of layer blocks ``(B, K, d)`` to logits
  and to the fused embedding ``Z`` (the input of the probe's LayerNorm, where
  GeoReg acts). ``fusion`` chooses how the blocks are combined: ``"concat"``
  (the authors' head), ``"mean"``, ``"sum"`` or ``"scalar_mix"``
  (``g·Σ softmax(w)_l·h_l``); ``adapters`` switches the per-layer
  ``LayerNorm → Linear → GELU`` adapters on or off.
- :func:`train_loop` runs AdamW + warmup/cosine + clipping + early stopping with
  best-weight restore on any module, given a ``forward(idx, train)`` callable
  that returns ``(outputs, z)`` for the samples ``idx``. To plug a different
  head, pass a different module and forward; to give some parameters their own
  learning rate, pass several ``param_groups`` (e.g. the ScalarMix weights at
  1e-3 via :meth:`LayerFusionHead.param_groups`).

Randomness never touches torch's global generator: weights are initialised and
dropout masks drawn from an explicit :class:`torch.Generator`.

Examples
--------
>>> import torch  # doctest: +SKIP
>>> from skloes._heads import LayerFusionHead, train_loop  # doctest: +SKIP
>>> g = torch.Generator().manual_seed(0)  # doctest: +SKIP
>>> X, y = torch.randn(64, 3, 8), torch.arange(64) % 2  # doctest: +SKIP
>>> head = LayerFusionHead(3, 8, 2, proj_dim=16, generator=g)  # doctest: +SKIP
>>> def fwd(idx, train):  # doctest: +SKIP
...     return head(X[idx], generator=g if train else None)
>>> res = train_loop(head, head.param_groups(1e-3), fwd, y, torch.arange(48),
...                  torch.arange(48, 64), generator=g, max_epochs=3)  # doctest: +SKIP
>>> len(res.history)  # doctest: +SKIP
3
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from skloes.utils._torch import FUSIONS, torch_module

torch = torch_module()
F = torch.nn.functional
nn = torch.nn


# --------------------------------------------------------------------------
# Devices and seeding
# --------------------------------------------------------------------------
def make_generator(random_state):
    """A CPU ``torch.Generator`` seeded by one draw from ``check_random_state``."""
    from sklearn.utils import check_random_state

    seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    return torch.Generator().manual_seed(seed)


def _init_linear(linear, generator):
    """PyTorch's default ``Linear`` initialisation, drawn from ``generator``.

    ``kaiming_uniform_(a=√5)`` and the bias rule both reduce to
    ``U(-1/√fan_in, 1/√fan_in)``.
    """
    bound = 1.0 / math.sqrt(linear.in_features)
    with torch.no_grad():
        linear.weight.copy_(_uniform(linear.weight.shape, bound, generator))
        if linear.bias is not None:
            linear.bias.copy_(_uniform(linear.bias.shape, bound, generator))


def _uniform(shape, bound, generator):
    return (torch.rand(shape, generator=generator) * 2.0 - 1.0) * bound


def dropout(x, p, generator):
    """Inverted dropout with masks from ``generator`` (identity when p == 0)."""
    if p <= 0.0 or generator is None:
        return x
    keep = torch.rand(x.shape, generator=generator).to(x.device) >= p
    return x * keep / (1.0 - p)


# --------------------------------------------------------------------------
# The head
# --------------------------------------------------------------------------
class LayerFusionHead(nn.Module):
    """Per-layer adapters, a fusion of the layer blocks, and a linear probe.

    ``forward(x)`` takes ``x`` of shape ``(B, K, d)`` (K layer blocks of width
    d) and returns ``(outputs, z)``: ``z`` is the fused embedding (before the
    probe's LayerNorm) and ``outputs`` the probe's ``n_outputs`` logits.

    Parameters
    ----------
    n_layers : int
        Number of layer blocks K.
    dim : int
        Width d of each block.
    n_outputs : int
        Number of classes (or regression targets).
    proj_dim : int, default=256
        Adapter output width.
    fusion : {"concat", "mean", "sum", "scalar_mix"}, default="concat"
        ``"concat"`` gives ``D' = K·proj_dim`` (``K·d`` without adapters); the
        others give ``D' = proj_dim`` (``d``). ``"scalar_mix"`` is
        ``g·Σ softmax(w)_l·h_l`` with ``w = 0`` and ``g = 1`` at start; ``g`` is
        learnt without adapters and fixed at 1 with them.
    adapters : bool, default=True
        Use ``LayerNorm(d) → Linear(d, proj_dim) → GELU`` per block.
    dropout : float, default=0.2
        Dropout rate of the probe.
    generator : torch.Generator or None, default=None
        Source of the initial weights (PyTorch's default distributions).
    linear_skip : bool, default=False
        Add a linear path ``skip(x.reshape(B, K·d))`` to the logits: a
        logistic-regression probe on the raw blocks, set by
        :meth:`set_linear_probe` and kept fixed, which the adapters and the
        probe then correct (the probe starts at zero).

    Attributes
    ----------
    mix_weights : torch.nn.Parameter or None
        The ScalarMix logits ``w`` (``"scalar_mix"`` only).
    scale : torch.Tensor or None
        The ScalarMix scale ``g`` (a parameter without adapters, a buffer
        fixed at 1 with them).
    embed_dim : int
        ``D'``.
    init_kwargs : dict
        The constructor arguments (without ``generator``), to rebuild the head
        from a state dict.

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> from skloes._heads import LayerFusionHead  # doctest: +SKIP
    >>> head = LayerFusionHead(3, 8, 2, proj_dim=4)  # doctest: +SKIP
    >>> out, z = head(torch.randn(5, 3, 8))  # doctest: +SKIP
    >>> out.shape, z.shape  # doctest: +SKIP
    (torch.Size([5, 2]), torch.Size([5, 12]))
    """

    def __init__(self, n_layers, dim, n_outputs, *, proj_dim=256, fusion="concat",
                 adapters=True, dropout=0.2, generator=None, linear_skip=False):
        super().__init__()
        self.init_kwargs = {
            "n_layers": int(n_layers), "dim": int(dim), "n_outputs": int(n_outputs),
            "proj_dim": int(proj_dim), "fusion": fusion, "adapters": bool(adapters),
            "dropout": float(dropout), "linear_skip": bool(linear_skip),
        }
        if fusion not in FUSIONS:
            raise ValueError(f"`fusion` must be one of {FUSIONS}; got {fusion!r}.")
        self.n_layers, self.dim = int(n_layers), int(dim)
        self.n_outputs = int(n_outputs)
        self.fusion, self.p_dropout = fusion, float(dropout)
        width = proj_dim if adapters else dim
        if adapters:
            self.adapters = nn.ModuleList(
                nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, proj_dim), nn.GELU())
                for _ in range(n_layers)
            )
        else:
            self.adapters = None
        self.embed_dim = width * n_layers if fusion == "concat" else width
        self.mix_weights = None
        if fusion != "scalar_mix":
            self.scale = None
        else:
            self.mix_weights = nn.Parameter(torch.zeros(n_layers))
            if adapters:
                self.register_buffer("scale", torch.ones(()))
            else:
                self.scale = nn.Parameter(torch.ones(()))
        self.norm = nn.LayerNorm(self.embed_dim)
        self.probe = nn.Linear(self.embed_dim, n_outputs)
        self.skip = None
        if linear_skip:
            self.skip = nn.Linear(self.n_layers * self.dim, n_outputs)
            self.skip.requires_grad_(False)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        """Re-draw every Linear from ``generator``; LayerNorms to (1, 0).

        Parameters
        ----------
        generator : torch.Generator or None, default=None
            Source of the weights (the global generator when None).
        """
        for module in self.modules():
            if isinstance(module, nn.Linear):
                _init_linear(module, generator)
            elif isinstance(module, nn.LayerNorm):
                module.reset_parameters()
        if self.mix_weights is not None:
            with torch.no_grad():
                self.mix_weights.zero_()
                self.scale.fill_(1.0)

    def set_linear_probe(self, coef, intercept):
        """Set the fixed linear path and zero the probe (``linear_skip`` only).

        Parameters
        ----------
        coef : array-like of shape (n_outputs, n_layers * dim)
            Weights on the flattened blocks (rows of ``x.reshape(B, -1)``).
        intercept : array-like of shape (n_outputs,)
            Biases.
        """
        with torch.no_grad():
            self.skip.weight.copy_(torch.as_tensor(coef, dtype=torch.float32))
            self.skip.bias.copy_(torch.as_tensor(intercept, dtype=torch.float32))
            self.probe.weight.zero_()
            self.probe.bias.zero_()

    def param_groups(self, lr, lr_mix=None):
        """AdamW parameter groups: the ScalarMix weights get ``lr_mix``.

        Parameters
        ----------
        lr : float
            Learning rate of adapters, probe (and ``g``).
        lr_mix : float or None, default=None
            Learning rate of the mix logits ``w``; ``lr`` when None.

        Returns
        -------
        groups : list of dict
        """
        mix = [self.mix_weights] if self.mix_weights is not None else []
        rest = [p for p in self.parameters() if all(p is not m for m in mix)]
        groups = [{"params": rest, "lr": lr}]
        if mix:
            groups.append({"params": mix, "lr": lr if lr_mix is None else lr_mix})
        return groups

    def layer_weights(self):
        """``softmax(w)`` as a numpy array (``"scalar_mix"`` only, else None).

        Returns
        -------
        weights : ndarray of shape (n_layers,) or None
        """
        if self.mix_weights is None:
            return None
        return torch.softmax(self.mix_weights.detach(), 0).cpu().numpy()

    def embed(self, x):
        """Fused embedding ``Z`` of shape (B, D') from blocks ``x`` (B, K, d).

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, n_layers, dim)
            Layer blocks.

        Returns
        -------
        z : torch.Tensor of shape (batch_size, embed_dim)
        """
        if self.adapters is not None:
            x = torch.stack([a(x[:, k]) for k, a in enumerate(self.adapters)], 1)
        if self.fusion == "concat":
            return x.reshape(x.shape[0], -1)
        if self.fusion == "mean":
            return x.mean(1)
        if self.fusion == "sum":
            return x.sum(1)
        weights = torch.softmax(self.mix_weights, 0)
        return self.scale * torch.einsum("bkd,k->bd", x, weights)

    def forward(self, x, generator=None):
        """Return ``(outputs, z)``; dropout is active only in training mode.

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, n_layers, dim)
            Layer blocks.
        generator : torch.Generator or None, default=None
            Source of the dropout masks; no dropout when None.

        Returns
        -------
        outputs : torch.Tensor of shape (batch_size, n_outputs)
        z : torch.Tensor of shape (batch_size, embed_dim)
        """
        z = self.embed(x)
        h = self.norm(z)
        if self.training:
            h = dropout(h, self.p_dropout, generator)
        out = self.probe(h)
        if self.skip is not None:
            out = out + self.skip(x.reshape(x.shape[0], -1))
        return out, z


# --------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------
@dataclass
class TrainResult:
    """What :func:`train_loop` returns.

    ``history`` holds one dict per epoch (``epoch``, ``loss``, ``task_loss``,
    ``geo_loss``, ``geo_spectral``, ``geo_triangle``, ``val_score``, ``lr``);
    ``best_epoch`` is 1-based (0: the initial weights were kept, see
    ``keep_initial``; otherwise the restored epoch, or the last without a
    validation split); ``converged`` says whether early stopping fired.
    """

    history: list = field(default_factory=list)
    best_epoch: int = 0
    n_iter: int = 0
    converged: bool = False


def warmup_cosine(total_steps, warmup):
    """LR factor per step: linear warmup over ``warmup·total`` steps, then cosine.

    Parameters
    ----------
    total_steps : int
        Number of optimiser steps of the whole run.
    warmup : float
        Fraction of the steps spent warming up from 0.

    Returns
    -------
    factor : callable
        ``step -> float`` for :class:`torch.optim.lr_scheduler.LambdaLR`.
    """
    n_warm = int(warmup * total_steps)

    def factor(step):
        if step < n_warm:
            return step / max(1, n_warm)
        progress = (step - n_warm) / max(1, total_steps - n_warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def score_outputs(outputs, y, task="classification"):
    """Accuracy (classification) or uniform-average R² (regression)."""
    if task == "classification":
        return float((outputs.argmax(1) == y).double().mean())
    y, outputs = y.double().reshape(len(y), -1), outputs.double()
    sse = ((y - outputs) ** 2).sum(0)
    sst = ((y - y.mean(0)) ** 2).sum(0).clamp(min=1e-12)
    return float((1.0 - sse / sst).mean())


def predict_outputs(module, forward, idx, batch_size):
    """Concatenated ``forward(batch, train=False)`` outputs in eval mode.

    Parameters
    ----------
    module : torch.nn.Module
        Switched to eval mode.
    forward : callable
        ``forward(idx, train) -> (outputs, z)``.
    idx : torch.Tensor of int
        Samples to predict.
    batch_size : int
        Chunk size.

    Returns
    -------
    outputs : torch.Tensor
        Detached, on the module's device.
    z : torch.Tensor
        The fused embeddings, detached.
    """
    module.eval()
    outs, zs = [], []
    with torch.no_grad():
        for start in range(0, len(idx), batch_size):
            out, z = forward(idx[start:start + batch_size], False)
            outs.append(out)
            zs.append(z)
    return torch.cat(outs), torch.cat(zs)


def _task_loss(outputs, target, task):
    if task == "classification":
        return F.cross_entropy(outputs, target)
    return F.mse_loss(outputs, target.reshape(outputs.shape))


def _state_copy(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def train_loop(module, param_groups, forward, y, train_idx, val_idx=None, *,
               geo_loss=None, task="classification", generator=None,
               max_epochs=15, batch_size=128, weight_decay=0.01, warmup=0.1,
               clip_norm=1.0, n_iter_no_change=3, tol=1e-4, verbose=0,
               desc="train", val_metric="score", keep_initial=False):
    """Train ``module`` with AdamW, warmup + cosine, clipping and early stopping.

    Each step draws a batch of ``train_idx`` (reshuffled every epoch from
    ``generator``, last partial batch kept), computes
    ``task loss + geo_loss(z, y)`` from ``forward(batch, True)`` and updates.
    After each epoch the validation score is computed; the best epoch's
    weights (ties: the earlier) are restored at the end. Without validation
    samples, training stops when the training loss has not improved by
    ``tol`` for ``n_iter_no_change`` epochs, and the final weights are kept.

    Parameters
    ----------
    module : torch.nn.Module
        Everything that trains (its ``state_dict`` is what gets restored).
    param_groups : list of dict
        AdamW groups, each with its ``"params"`` and ``"lr"``.
    forward : callable
        ``forward(idx, train) -> (outputs, z)`` for a LongTensor of sample
        indices; ``train`` says whether dropout should be active.
    y : torch.Tensor
        Targets of all samples (class codes, or floats for regression), on the
        device of ``outputs``.
    train_idx, val_idx : torch.Tensor of int
        Sample indices (CPU); ``val_idx`` None or empty means no validation.
    geo_loss : GeoRegLoss or None, default=None
        Regulariser on ``z``; with ``weight == 0`` its terms are only logged.
    task : {"classification", "regression"}, default="classification"
        Cross-entropy + accuracy, or MSE + R².
    generator : torch.Generator or None, default=None
        Source of shuffles, triplets and (through ``forward``) dropout.
    max_epochs : int, default=15
        Maximum number of epochs.
    batch_size : int, default=128
        Mini-batch size (the last partial batch is kept).
    weight_decay : float, default=0.01
        AdamW weight decay.
    warmup : float, default=0.1
        Share of the steps with a linear warmup (then cosine decay to 0).
    clip_norm : float, default=1.0
        Global gradient-norm clip; 0 disables it.
    n_iter_no_change : int, default=3
        Patience in epochs.
    tol : float, default=1e-4
        Minimal training-loss improvement when there is no validation split.
    verbose : int, default=0
        A tqdm progress bar over epochs when > 0.
    desc : str, default="train"
        Label of the progress bar and of error messages.
    val_metric : {"score", "loss"}, default="score"
        What early stopping watches on the validation samples: the score
        (accuracy or R²; ``val_score``) or minus the task loss (``val_loss``,
        smoother on a few dozen validation rows).
    keep_initial : bool, default=False
        Score the untrained module first (epoch 0): when no epoch beats it,
        its weights are restored and ``best_epoch`` is 0.

    Returns
    -------
    result : TrainResult
    """
    has_val = val_idx is not None and len(val_idx) > 0
    n_steps = max_epochs * math.ceil(len(train_idx) / batch_size)
    opt = torch.optim.AdamW(param_groups, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(n_steps, warmup))
    params = [p for group in param_groups for p in group["params"]]
    res, best, best_state, stall = TrainResult(), -np.inf, None, 0
    epochs = range(1, max_epochs + 1)
    if verbose:
        from skloes.utils._optional import import_optional

        epochs = import_optional("tqdm.auto").tqdm(epochs, desc=desc, leave=False)
    if has_val and keep_initial:
        best = _val_value(module, forward, y, val_idx, batch_size, task, val_metric)[0]
        best_state = _state_copy(module)
    for epoch in epochs:
        row = _train_epoch(module, opt, sched, params, forward, y, train_idx,
                           geo_loss, task, generator, batch_size, clip_norm,
                           epoch, desc)
        if has_val:
            value, row["val_score"], row["val_loss"] = _val_value(
                module, forward, y, val_idx, batch_size, task, val_metric)
            improved = value > best
        else:
            row["val_score"] = float("nan")
            improved = -row["loss"] > best + tol
            value = -row["loss"]
        res.history.append(row)
        res.n_iter = epoch
        if verbose:
            epochs.set_postfix(loss=f"{row['loss']:.4f}", val=f"{row['val_score']:.4f}")
        if improved:
            best, stall, res.best_epoch = value, 0, epoch
            if has_val:
                best_state = _state_copy(module)
        else:
            stall += 1
            if stall >= n_iter_no_change:
                res.converged = True
                break
    if has_val and best_state is not None:
        module.load_state_dict(best_state)
    if not has_val:
        res.best_epoch = res.n_iter
    module.eval()
    return res


def _val_value(module, forward, y, val_idx, batch_size, task, val_metric):
    """(value watched, score, loss) on the validation samples."""
    out, _ = predict_outputs(module, forward, val_idx, max(batch_size, 256))
    y_val = y[val_idx.to(y.device)]
    score = score_outputs(out, y_val, task)
    loss = float(_task_loss(out, y_val, task))
    return (score if val_metric == "score" else -loss), score, loss


def _train_epoch(module, opt, sched, params, forward, y, train_idx, geo_loss,
                 task, generator, batch_size, clip_norm, epoch, desc):
    module.train()
    perm = train_idx[torch.randperm(len(train_idx), generator=generator)]
    sums = dict.fromkeys(("loss", "task_loss", "geo_loss", "geo_spectral",
                          "geo_triangle"), 0.0)
    for step, start in enumerate(range(0, len(perm), batch_size), 1):
        batch = perm[start:start + batch_size]
        target = y[batch.to(y.device)]
        out, z = forward(batch, True)
        task_loss = _task_loss(out, target, task)
        spec, tri, geo = _geo_terms(geo_loss, z, target, task, generator)
        total = task_loss + geo
        if not torch.isfinite(total):
            raise FloatingPointError(
                f"{desc}: the training loss is not finite at epoch {epoch}, step "
                f"{step} (task loss {float(task_loss.detach())}, GeoReg "
                f"{float(geo.detach())}); lower "
                "`lr` or check the input features."
            )
        opt.zero_grad(set_to_none=True)
        total.backward()
        if clip_norm:
            torch.nn.utils.clip_grad_norm_(params, clip_norm)
        opt.step()
        sched.step()
        n = len(batch)
        for key, val in zip(sums, (total, task_loss, geo, spec, tri), strict=True):
            sums[key] += float(val.detach()) * n
    row = {"epoch": epoch}
    row.update({k: v / len(perm) for k, v in sums.items()})
    row["lr"] = opt.param_groups[0]["lr"]
    return row


def _geo_terms(geo_loss, z, target, task, generator):
    """(spectral, triangle, weighted total); logged without grad when w = 0."""
    if geo_loss is None:
        zero = z.new_zeros(())
        return zero, zero, zero
    labels = target if task == "classification" else None
    if geo_loss.weight == 0:
        with torch.no_grad():
            spec, tri = geo_loss.terms(z.detach(), labels, generator)
        return spec, tri, z.new_zeros(())
    spec, tri = geo_loss.terms(z, labels, generator)
    return spec, tri, geo_loss.weight * (spec + tri)


def warn_not_converged(estimator, result, max_epochs):
    """Raise ConvergenceWarning when the run used all ``max_epochs``."""
    from sklearn.exceptions import ConvergenceWarning

    if not result.converged and result.n_iter >= max_epochs:
        warnings.warn(
            f"{type(estimator).__name__}: stopped at `max_epochs`={max_epochs} "
            "before the validation score (or, without validation, the training "
            "loss) stopped improving; consider a larger `max_epochs`.",
            ConvergenceWarning,
            stacklevel=3,
        )


# --------------------------------------------------------------------------
# Backbone + head (end-to-end fine-tuning)
# --------------------------------------------------------------------------
class BackboneHead(nn.Module):
    """A Hugging Face backbone, cut after ``depth``, pooled, then a head.

    The forward pass runs blocks ``1..depth`` only (through
    :func:`skloes._models.forward_hidden_states`), pools the ``layers`` with
    :func:`skloes._pooling.pool_layers` (leaving out the tokens the caller
    excludes, as :class:`~skloes.HiddenStatesTransformer` does) and feeds
    the ``(B, K, d)`` blocks to ``head``. :meth:`freeze_above_depth` stops
    gradients of the blocks above ``depth``; the embedding module and blocks
    ``1..depth`` stay trainable.

    Parameters
    ----------
    backbone : transformers.PreTrainedModel
        The model (from :func:`skloes._models.load_model`).
    head : torch.nn.Module
        Maps ``(B, K, d)`` to ``(outputs, z)``, e.g. :class:`LayerFusionHead`.
    layers : sequence of int
        Hidden-state indices pooled for the head (0 is the embedding output).
    pooling : str
        A pooling name understood by :func:`skloes._pooling.pool`.
    processor : object or None, default=None
        The tokenizer (or image/audio processor) of ``backbone``; kept here so
        that :func:`pack_module` pickles it with the weights.

    Examples
    --------
    >>> from skloes._heads import BackboneHead  # doctest: +SKIP
    >>> module = BackboneHead(backbone, head, [1, 3], "mean")  # doctest: +SKIP
    >>> outputs, z = module(inputs)  # doctest: +SKIP
    """

    def __init__(self, backbone, head, layers, pooling, processor=None):
        super().__init__()
        from skloes._models import find_blocks

        self.processor = processor
        self.backbone = backbone
        self.head = head
        self.layers = [int(l) for l in layers]
        self.pooling = pooling
        self.depth = max(self.layers)
        self._blocks = find_blocks(backbone)

    def freeze_above_depth(self):
        """Turn off gradients of the blocks above ``depth``; return the rest.

        Returns
        -------
        params : list of torch.nn.Parameter
            The backbone parameters that can still train.
        """
        frozen = set()
        if self._blocks is not None:
            for block in self._blocks[self.depth:]:
                frozen.update(id(p) for p in block.parameters())
        trainable = []
        for p in self.backbone.parameters():
            p.requires_grad_(id(p) not in frozen)
            if id(p) not in frozen:
                trainable.append(p)
        return trainable

    def pool(self, inputs, exclude=None):
        """The pooled ``layers`` of one batch, ``(n_layers, B, d)``.

        Parameters
        ----------
        inputs : dict of str to torch.Tensor
            From :func:`skloes._models.text_batch` or
            :func:`skloes._models.encode_batch`.
        exclude : torch.Tensor of shape (B, T) or None, default=None
            Tokens left out of ``"mean"`` and ``"max"`` pooling (from
            :func:`skloes._models.text_batch`), as
            :class:`~skloes.HiddenStatesTransformer` leaves them out.

        Returns
        -------
        pooled : torch.Tensor of shape (n_layers, B, d)
        """
        from skloes._models import forward_hidden_states, token_mask
        from skloes._pooling import pool_layers

        states = forward_hidden_states(self.backbone, inputs, self.depth,
                                       blocks=self._blocks)
        mask = token_mask(self.backbone, inputs, states[0].shape[1])
        return pool_layers(states, self.layers, mask, self.pooling, exclude=exclude)

    def forward(self, inputs, generator=None, exclude=None):
        """``(outputs, z)`` for a dict of model inputs.

        Parameters
        ----------
        inputs : dict of str to torch.Tensor
            From :func:`skloes._models.text_batch` or
            :func:`skloes._models.encode_batch`.
        generator : torch.Generator or None, default=None
            Dropout masks of the head.
        exclude : torch.Tensor of shape (B, T) or None, default=None
            Tokens left out of pooling (see :meth:`pool`).

        Returns
        -------
        outputs, z : torch.Tensor
        """
        return self.head(self.pool(inputs, exclude).transpose(0, 1), generator)


# --------------------------------------------------------------------------
# Pickling through CPU state dicts
# --------------------------------------------------------------------------
def pack_module(module, path=None, tuned=True):
    """A picklable CPU description of a :class:`LayerFusionHead` or
    :class:`BackboneHead`: constructor arguments and CPU state dicts.

    Parameters
    ----------
    module : LayerFusionHead or BackboneHead
        The trained module, on any device.
    path : str or None, default=None
        Model folder of a :class:`BackboneHead` (used when not ``tuned``).
    tuned : bool, default=True
        Whether the backbone weights changed; when False they are left out and
        reloaded from ``path`` by :func:`unpack_module`.

    Returns
    -------
    packed : dict
    """
    if isinstance(module, LayerFusionHead):
        state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
        return {"kind": "head", "init": module.init_kwargs, "state": state}
    weights = None
    if tuned:
        weights = {k: v.detach().cpu()
                   for k, v in module.backbone.state_dict().items()}
    return {
        "kind": "backbone", "config": module.backbone.config, "backbone": weights,
        "path": path, "head": pack_module(module.head),
        "processor": module.processor, "layers": module.layers,
        "pooling": module.pooling,
    }


def unpack_module(packed):
    """Rebuild (on CPU, in eval mode) what :func:`pack_module` described.

    Parameters
    ----------
    packed : dict
        From :func:`pack_module`.

    Returns
    -------
    module : LayerFusionHead or BackboneHead
    """
    if packed["kind"] == "head":
        module = LayerFusionHead(**packed["init"])
        module.load_state_dict(packed["state"])
        return module.eval()
    if packed["backbone"] is None:  # unchanged pretrained weights: reload them
        from skloes._models import load_model

        backbone = load_model(packed["path"])
    else:
        from skloes.utils._optional import import_optional

        transformers = import_optional("transformers")
        with torch.random.fork_rng(devices=[]):  # from_config draws random weights
            backbone = transformers.AutoModel.from_config(packed["config"])
        backbone.load_state_dict(packed["backbone"])
    head = unpack_module(packed["head"])
    module = BackboneHead(backbone.eval(), head, packed["layers"], packed["pooling"],
                          processor=packed["processor"])
    return module.eval()
