"""The forward pass that stops after the deepest requested block.

:func:`forward_pooled` pools each requested layer inside the pass (hooks on the
blocks) and aborts it after the deepest one, so later blocks never run;
:func:`forward_hidden_states` returns the token-level states the same way.
Layer indices follow Hugging Face ``hidden_states``: ``0`` is the embedding
output (the input of the first block) and ``1..L`` are the blocks.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import weakref

from skloes.core._torch import torch

_BLOCK_LIST_NAMES = ("layer", "layers", "h", "block", "blocks")


class _StopForward(Exception):
    """Raised by a hook to end a forward pass after the deepest block needed."""


def find_blocks(model):
    """The transformer blocks of ``model`` in order, or None if not found.

    Uses the block classes ``transformers`` records ``hidden_states`` from
    (``_can_record_outputs``), else a ``ModuleList`` of ``num_hidden_layers``
    modules named ``layer``/``layers``/``h``/``block(s)``.
    """
    n_blocks = int(model.config.num_hidden_layers)
    spec = (getattr(type(model), "_can_record_outputs", None) or {}).get(
        "hidden_states"
    )
    if spec is not None:
        specs = spec if isinstance(spec, (list, tuple)) else [spec]
        classes = tuple(getattr(s, "target_class", s) for s in specs)
        classes = tuple(c for c in classes if isinstance(c, type))
        if classes:
            blocks = [m for m in model.modules() if isinstance(m, classes)]
            if len(blocks) == n_blocks:
                return blocks
    found = [
        module
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList)
        and len(module) == n_blocks
        and name.rsplit(".", 1)[-1] in _BLOCK_LIST_NAMES
    ]
    return list(found[0]) if len(found) == 1 else None


def forward_hidden_states(model, inputs, depth: int, *, blocks=None) -> list:
    """Hidden states ``0..depth`` of one batch, running blocks ``1..depth`` only.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        From :func:`load_model`.
    inputs : dict of str to torch.Tensor
        From :func:`encode_batch`.
    depth : int
        Deepest ``hidden_states`` index needed (0 = embeddings, L = last block).
    blocks : list of torch.nn.Module or None, default=None
        From :func:`find_blocks`; looked up when None.

    Returns
    -------
    hidden_states : list of torch.Tensor of shape (batch, n_tokens, dim)
        ``depth + 1`` tensors; entry ``l`` equals ``hidden_states[l]`` of a full
        ``model(**inputs, output_hidden_states=True)`` call.

    Notes
    -----
    For ``depth < L`` forward hooks record the input of the first block and the
    output of each block, and the pass is aborted after block ``depth``, so later
    blocks never run. The last hidden state can differ from the last block's
    output (a final norm in some models), so ``depth == L`` runs the full model.
    Works under ``torch.inference_mode`` and with gradients enabled.
    """
    n_blocks = int(model.config.num_hidden_layers)
    if blocks is None:
        blocks = find_blocks(model)
    if depth >= n_blocks or blocks is None:
        return full_hidden_states(model, inputs)[: depth + 1]
    states = []

    def record_input(module, args, kwargs):
        states.append(args[0] if args else kwargs["hidden_states"])
        if depth == 0:
            raise _StopForward

    def record_output(module, args, output):
        states.append(output[0] if isinstance(output, (tuple, list)) else output)
        if len(states) == depth + 1:
            raise _StopForward

    handles = [blocks[0].register_forward_pre_hook(record_input, with_kwargs=True)]
    handles += [block.register_forward_hook(record_output) for block in blocks[:depth]]
    try:
        model(**inputs)
    except _StopForward:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if len(states) != depth + 1:  # a block was skipped (layerdrop): be exact
        return full_hidden_states(model, inputs)[: depth + 1]
    return states


def full_hidden_states(model, inputs) -> list:
    """Every hidden state of one full pass, indexed as skloes indexes them.

    ``0`` is the embedding output and ``1..L`` the blocks (the last one as
    the family's ``last_state`` says). transformers' ``hidden_states`` are
    that list for every family but Mamba, whose ``hidden_states`` are the
    blocks' outputs and then the final norm's output, without the
    embeddings (``Family.embedding_state``): they are put back in front and
    the last block's raw output is left out, as in Llama.
    """
    from skloes.models._families import model_family

    states = list(model(**inputs, output_hidden_states=True).hidden_states)
    if not model_family(model.config, warn=False).embedding_state:
        embeddings = model.get_input_embeddings()(inputs["input_ids"])
        states = [embeddings, *states[:-2], states[-1]]
    return states


_LAST_STATE_SOURCE = weakref.WeakKeyDictionary()  # model -> "block" | "output" | "full"


def forward_pooled(model, inputs, layers, pool_fn, *, blocks=None):
    """Pooled states of one batch, each layer pooled as soon as it is produced.

    Like :func:`forward_hidden_states` followed by pooling, but forward hooks
    pool each requested layer inside the pass and keep only the pooled
    ``(batch, k)`` vectors, so the batch's token-level states of all layers are
    never held at once (``output_hidden_states=True`` holds ``L + 1`` of them).
    Blocks deeper than ``max(layers)`` do not run.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        From :func:`load_model`.
    inputs : dict of str to torch.Tensor
        Keyword arguments of ``model``.
    layers : sequence of int
        Sorted, non-negative ``hidden_states`` indices.
    pool_fn : callable
        ``pool_fn(hidden) -> (batch, k)`` tensor for one layer's
        ``(batch, n_tokens, dim)`` states.
    blocks : list of torch.nn.Module or None, default=None
        From :func:`find_blocks`; looked up when None.

    Returns
    -------
    pooled : torch.Tensor of shape (n_layers, batch, k)
        Entry ``i`` equals ``pool_fn(hidden_states[layers[i]])`` of a full
        ``model(**inputs, output_hidden_states=True)`` call.
    """
    n_blocks = int(model.config.num_hidden_layers)
    wanted = [int(l) for l in layers]
    depth = max(wanted)
    if blocks is None:
        blocks = find_blocks(model)
    if blocks is None:
        source = "full"
    elif depth < n_blocks:
        source = "block"  # hidden_states[l] is block l's output for l < L
    else:  # None: not known yet for this model, settled on this batch
        source = _LAST_STATE_SOURCE.get(model)
    if source == "full":
        return _pool_full(model, inputs, wanted, pool_fn)
    # hook every wanted layer; the last is settled after the pass unless known
    last_open = depth == n_blocks and source != "block"
    hooked = set(wanted) - ({n_blocks} if last_open else set())
    stop = None if last_open else depth
    pooled, count, last_block = {}, [0], []

    def keep(layer, hidden):
        if layer in hooked:
            pooled[layer] = pool_fn(hidden)
        elif last_open and layer == n_blocks and source is None:
            last_block.append(hidden)
        if layer == stop:
            raise _StopForward

    def record_input(module, args, kwargs):
        keep(0, args[0] if args else kwargs["hidden_states"])

    def record_output(module, args, output):
        count[0] += 1
        keep(count[0], output[0] if isinstance(output, (tuple, list)) else output)

    handles = [blocks[0].register_forward_pre_hook(record_input, with_kwargs=True)]
    handles += [block.register_forward_hook(record_output) for block in blocks[:depth]]
    try:
        out = model(**inputs)
    except _StopForward:
        out = None
    finally:
        for handle in handles:
            handle.remove()
    if last_open:
        if source is None:
            source = _settle_last_state(model, inputs, blocks, last_block, out)
        if source == "full":
            return _pool_full(model, inputs, wanted, pool_fn)
        last = last_block[-1] if source == "block" else out.last_hidden_state
        pooled[n_blocks] = pool_fn(last)
    if any(l not in pooled for l in wanted):  # a block was skipped (layerdrop)
        return _pool_full(model, inputs, wanted, pool_fn)
    return torch.stack([pooled[l] for l in wanted])


def _pool_full(model, inputs, wanted, pool_fn):
    states = full_hidden_states(model, inputs)
    return torch.stack([pool_fn(states[l]) for l in wanted])


def _settle_last_state(model, inputs, blocks, last_block, out) -> str:
    """Source of ``hidden_states[-1]`` from one pass: free when the last block's
    output is ``last_hidden_state`` (BERT), else a one-row probe (Llama, ViT)."""
    last = getattr(out, "last_hidden_state", None)
    if last_block and last is not None and torch_equal(last_block[-1], last):
        _LAST_STATE_SOURCE[model] = "block"
        return "block"
    if not last_block:
        _LAST_STATE_SOURCE[model] = "full"
        return "full"
    return _last_state_source(model, inputs, blocks)


def torch_equal(a, b) -> bool:
    """Same shape and values (``torch.equal``)."""
    return a.shape == b.shape and bool(torch.equal(a, b))


def _last_state_source(model, inputs, blocks) -> str:
    """Where ``hidden_states[-1]`` comes from, checked once per model on one row.

    transformers replaces the last block's output by ``last_hidden_state`` in
    some models and not in others. A model family that states it
    (``Family.last_state`` in :mod:`skloes.models._families`) is taken at its
    word; otherwise one row of the first batch is run with
    ``output_hidden_states=True`` and compared (one extra row per loaded
    model).

    ``"block"``: the last block's output; ``"output"``: ``last_hidden_state``
    (a final norm applied, as in Llama); ``"full"``: neither (only a full
    ``output_hidden_states`` pass is exact).
    """
    if model in _LAST_STATE_SOURCE:
        return _LAST_STATE_SOURCE[model]
    from skloes.models._families import model_family

    known = model_family(model.config, warn=False).last_state
    if known is not None:  # the family says it (and the tests check it)
        _LAST_STATE_SOURCE[model] = known
        return known
    captured = []

    def grab(module, args, output):
        captured.append(output[0] if isinstance(output, (tuple, list)) else output)

    one = {key: value[:1] for key, value in inputs.items()}
    handle = blocks[-1].register_forward_hook(grab)
    try:
        with torch.inference_mode():
            out = model(**one, output_hidden_states=True)
    finally:
        handle.remove()
    last = out.hidden_states[-1]
    if captured and torch.equal(last, captured[-1]):
        source = "block"
    elif getattr(out, "last_hidden_state", None) is not None and torch.equal(
        last, out.last_hidden_state
    ):
        source = "output"
    else:
        source = "full"
    _LAST_STATE_SOURCE[model] = source
    return source
