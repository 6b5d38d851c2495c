"""The torch modules of the heads: layer-fusion head, backbone head, pickling.

This module imports torch at its top (with the ``pip install skloes[torch]`` hint
when it is missing): import it inside ``fit`` (never at the top of an estimator
module), so that ``import skloes`` and ``import skloes.heads`` stay torch-free.
The estimator-side helpers that need no torch at import (pickling, the
validation split, logits to probabilities) live in :mod:`skloes.heads._mixins`;
the training loop in :mod:`skloes.heads._training`.

The pieces, reused by :class:`~skloes.heads.GeoRegClassifier`,
:class:`~skloes.heads.GeoRegFineTuner` and the ScalarMix baselines:

- :class:`LayerFusionHead` maps a batch of layer blocks ``(B, K, d)`` to logits
  and to the fused embedding ``Z`` (the input of the probe's LayerNorm, where
  GeoReg acts). ``fusion`` chooses how the blocks are combined: ``"concat"``
  (the authors' head), ``"mean"``, ``"sum"`` or ``"scalar_mix"``
  (``g·Σ softmax(w)_l·h_l``); ``adapters`` switches the per-layer
  ``LayerNorm → Linear → GELU`` adapters on or off.
- :class:`BackboneHead` runs a backbone up to its deepest useful block and a
  :class:`LayerFusionHead` on its pooled layers (end-to-end fine-tuning).
- To plug a different head into :func:`skloes.heads._training.train_loop`, pass
  a different module and forward; to give some parameters their own learning
  rate, pass several ``param_groups`` (e.g. the ScalarMix weights at 1e-3 via
  :meth:`LayerFusionHead.param_groups`).

Randomness never touches torch's global generator: weights are initialised and
dropout masks drawn from an explicit :class:`torch.Generator`.

Examples
--------
>>> import torch  # doctest: +SKIP
>>> from skloes.heads._modules import LayerFusionHead  # doctest: +SKIP
>>> from skloes.heads._training import train_loop  # doctest: +SKIP
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

from skloes.core._torch import torch
from skloes.heads._options import FUSIONS

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
    >>> from skloes.heads._modules import LayerFusionHead  # doctest: +SKIP
    >>> head = LayerFusionHead(3, 8, 2, proj_dim=4)  # doctest: +SKIP
    >>> out, z = head(torch.randn(5, 3, 8))  # doctest: +SKIP
    >>> out.shape, z.shape  # doctest: +SKIP
    (torch.Size([5, 2]), torch.Size([5, 12]))
    """

    def __init__(
        self,
        n_layers,
        dim,
        n_outputs,
        *,
        proj_dim=256,
        fusion="concat",
        adapters=True,
        dropout=0.2,
        generator=None,
        linear_skip=False,
    ):
        super().__init__()
        self.init_kwargs = {
            "n_layers": int(n_layers),
            "dim": int(dim),
            "n_outputs": int(n_outputs),
            "proj_dim": int(proj_dim),
            "fusion": fusion,
            "adapters": bool(adapters),
            "dropout": float(dropout),
            "linear_skip": bool(linear_skip),
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
# Backbone + head (end-to-end fine-tuning)
# --------------------------------------------------------------------------
class BackboneHead(nn.Module):
    """A Hugging Face backbone, cut after ``depth``, pooled, then a head.

    The forward pass runs blocks ``1..depth`` only (through
    :func:`skloes.models._forward.forward_hidden_states`), pools the ``layers`` with
    :func:`skloes.core._pooling.pool_layers` (leaving out the tokens the caller
    excludes, as :class:`~skloes.extraction.HiddenStatesTransformer` does) and feeds
    the ``(B, K, d)`` blocks to ``head``. :meth:`freeze_above_depth` stops
    gradients of the blocks above ``depth``; the embedding module and blocks
    ``1..depth`` stay trainable.

    Parameters
    ----------
    backbone : transformers.PreTrainedModel
        The model (from :func:`skloes.models._loading.load_model`).
    head : torch.nn.Module
        Maps ``(B, K, d)`` to ``(outputs, z)``, e.g. :class:`LayerFusionHead`.
    layers : sequence of int
        Hidden-state indices pooled for the head (0 is the embedding output).
    pooling : str
        A pooling name understood by :func:`skloes.core._pooling.pool`.
    processor : object or None, default=None
        The tokenizer (or image/audio processor) of ``backbone``; kept here so
        that :func:`pack_module` pickles it with the weights.

    Examples
    --------
    >>> from skloes.heads._modules import BackboneHead  # doctest: +SKIP
    >>> module = BackboneHead(backbone, head, [1, 3], "mean")  # doctest: +SKIP
    >>> outputs, z = module(inputs)  # doctest: +SKIP
    """

    def __init__(self, backbone, head, layers, pooling, processor=None):
        super().__init__()
        from skloes.models._forward import find_blocks

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
            for block in self._blocks[self.depth :]:
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
            From :func:`skloes.models._inputs.text_batch` or
            :func:`skloes.models._inputs.encode_batch`.
        exclude : torch.Tensor of shape (B, T) or None, default=None
            Tokens left out of ``"mean"`` and ``"max"`` pooling (from
            :func:`skloes.models._inputs.text_batch`), as
            :class:`~skloes.extraction.HiddenStatesTransformer` leaves them out.

        Returns
        -------
        pooled : torch.Tensor of shape (n_layers, B, d)
        """
        from skloes.core._pooling import pool_layers
        from skloes.models._forward import forward_hidden_states
        from skloes.models._inputs import token_mask

        states = forward_hidden_states(
            self.backbone, inputs, self.depth, blocks=self._blocks
        )
        mask = token_mask(self.backbone, inputs, states[0].shape[1])
        return pool_layers(states, self.layers, mask, self.pooling, exclude=exclude)

    def forward(self, inputs, generator=None, exclude=None):
        """``(outputs, z)`` for a dict of model inputs.

        Parameters
        ----------
        inputs : dict of str to torch.Tensor
            From :func:`skloes.models._inputs.text_batch` or
            :func:`skloes.models._inputs.encode_batch`.
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
        weights = {k: v.detach().cpu() for k, v in module.backbone.state_dict().items()}
    return {
        "kind": "backbone",
        "config": module.backbone.config,
        "backbone": weights,
        "path": path,
        "head": pack_module(module.head),
        "processor": module.processor,
        "layers": module.layers,
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
        from skloes.models._loading import load_model

        backbone = load_model(packed["path"])
    else:
        from skloes.utils._optional import import_optional

        transformers = import_optional("transformers")
        with torch.random.fork_rng(devices=[]):  # from_config draws random weights
            backbone = transformers.AutoModel.from_config(packed["config"])
        backbone.load_state_dict(packed["backbone"])
    head = unpack_module(packed["head"])
    module = BackboneHead(
        backbone.eval(),
        head,
        packed["layers"],
        packed["pooling"],
        processor=packed["processor"],
    )
    return module.eval()
