"""The training loop every torch head shares.

:func:`train_loop` runs AdamW + warmup/cosine + clipping + early stopping with
best-weight restore on any module, given a ``forward(idx, train)`` callable
that returns ``(outputs, z)`` for the samples ``idx``; :func:`predict_outputs`
runs the same forward for inference. Randomness never touches torch's global
generator: dropout masks come from an explicit :class:`torch.Generator`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from skloes.core._torch import torch


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
            out, z = forward(idx[start : start + batch_size], False)
            outs.append(out)
            zs.append(z)
    return torch.cat(outs), torch.cat(zs)


def _task_loss(outputs, target, task):
    if task == "classification":
        return torch.nn.functional.cross_entropy(outputs, target)
    return torch.nn.functional.mse_loss(outputs, target.reshape(outputs.shape))


def _state_copy(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def train_loop(
    module,
    param_groups,
    forward,
    y,
    train_idx,
    val_idx=None,
    *,
    geo_loss=None,
    task="classification",
    generator=None,
    max_epochs=15,
    batch_size=128,
    weight_decay=0.01,
    warmup=0.1,
    clip_norm=1.0,
    n_iter_no_change=3,
    tol=1e-4,
    verbose=0,
    desc="train",
    val_metric="score",
    keep_initial=False,
):
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
    opt = _optimiser(param_groups, n_steps, weight_decay, warmup)
    run = _Run(*opt, module, forward, y, train_idx, geo_loss, task)
    run.generator, run.batch_size = generator, batch_size
    run.clip_norm, run.desc = clip_norm, desc
    val = None
    if has_val:
        val = functools.partial(
            _val_value, module, forward, y, val_idx, batch_size, task, val_metric
        )
    res, best, best_state, stall = TrainResult(), -np.inf, None, 0
    if val is not None and keep_initial:
        best, best_state = val()[0], _state_copy(module)
    epochs = _epochs(max_epochs, verbose, desc)
    for epoch in epochs:
        row = run.epoch(epoch)
        value, improved = _watch(row, val, best, tol)
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


def _optimiser(param_groups, n_steps, weight_decay, warmup):
    """AdamW over ``param_groups``, its warmup + cosine schedule over
    ``n_steps``, and the parameters it updates (for the gradient clip)."""
    opt = torch.optim.AdamW(
        param_groups, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(n_steps, warmup))
    return opt, sched, [p for group in param_groups for p in group["params"]]


def _epochs(max_epochs, verbose, desc):
    """The epochs ``1..max_epochs``, under a tqdm bar when ``verbose``."""
    epochs = range(1, max_epochs + 1)
    if verbose:
        from skloes.utils._optional import import_optional

        epochs = import_optional("tqdm.auto").tqdm(epochs, desc=desc, leave=False)
    return epochs


def _watch(row, val, best, tol):
    """Fill the validation columns of an epoch's ``row``; return the value
    early stopping watches and whether it beats ``best``: the validation
    score or loss (``val()``), else minus the training loss by ``tol``."""
    if val is None:
        row["val_score"] = float("nan")
        return -row["loss"], -row["loss"] > best + tol
    value, row["val_score"], row["val_loss"] = val()
    return value, value > best


def _val_value(module, forward, y, val_idx, batch_size, task, val_metric):
    """(value watched, score, loss) on the validation samples."""
    out, _ = predict_outputs(module, forward, val_idx, max(batch_size, 256))
    y_val = y[val_idx.to(y.device)]
    score = score_outputs(out, y_val, task)
    loss = float(_task_loss(out, y_val, task))
    return (score if val_metric == "score" else -loss), score, loss


@dataclass
class _Run:
    """The parts of one training run that every epoch reads."""

    opt: object
    sched: object
    params: list
    module: object
    forward: object
    y: object
    train_idx: object
    geo_loss: object
    task: str
    # the loop settings, set by train_loop
    generator: object = None
    batch_size: int = None
    clip_norm: float = None
    desc: str = None

    def epoch(self, epoch):
        """Train one epoch; its history row."""
        self.module.train()
        perm = self.train_idx[
            torch.randperm(len(self.train_idx), generator=self.generator)
        ]
        sums = dict.fromkeys(
            ("loss", "task_loss", "geo_loss", "geo_spectral", "geo_triangle"), 0.0
        )
        for step, start in enumerate(range(0, len(perm), self.batch_size), 1):
            batch = perm[start : start + self.batch_size]
            target = self.y[batch.to(self.y.device)]
            out, z = self.forward(batch, True)
            task_loss = _task_loss(out, target, self.task)
            spec, tri, geo = _geo_terms(
                self.geo_loss, z, target, self.task, self.generator
            )
            total = task_loss + geo
            if not torch.isfinite(total):
                raise FloatingPointError(
                    f"{self.desc}: the training loss is not finite at epoch "
                    f"{epoch}, step {step} (task loss {float(task_loss.detach())}, "
                    f"GeoReg {float(geo.detach())}); lower "
                    "`lr` or check the input features."
                )
            self.opt.zero_grad(set_to_none=True)
            total.backward()
            if self.clip_norm:
                torch.nn.utils.clip_grad_norm_(self.params, self.clip_norm)
            self.opt.step()
            self.sched.step()
            n = len(batch)
            for key, val in zip(sums, (total, task_loss, geo, spec, tri), strict=True):
                sums[key] += float(val.detach()) * n
        row = {"epoch": epoch}
        row.update({k: v / len(perm) for k, v in sums.items()})
        row["lr"] = self.opt.param_groups[0]["lr"]
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
