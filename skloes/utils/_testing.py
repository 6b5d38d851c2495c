"""Tiny random-initialised models for offline tests and doctests."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import tempfile
from pathlib import Path

_WORDS = (
    "the a an and or not good bad great awful movie film plot actor story "
    "is was very quite really fun dull boring lovely i you it this that"
).split()


def make_tiny_model(path=None, *, num_hidden_layers=2, hidden_size=8, seed=0):
    """Save a tiny random ``BertModel`` with a word-level tokenizer to ``path``.

    Parameters
    ----------
    path : str, os.PathLike or None, default=None
        Target folder; a new temporary folder when None.
    num_hidden_layers : int, default=2
        Number of transformer blocks (the model has one more hidden state).
    hidden_size : int, default=8
        Width of every hidden state.
    seed : int, default=0
        Seeds the random initialisation.

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel.from_pretrained``.

    Examples
    --------
    >>> from skloes.utils._testing import make_tiny_model
    >>> path = make_tiny_model()  # doctest: +SKIP
    """
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = Path(path or tempfile.mkdtemp(prefix="skloes-tiny-bert-"))
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_WORDS]
    tokenizer = BertTokenizerFast(vocab={word: i for i, word in enumerate(vocab)})
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers, num_attention_heads=2,
        intermediate_size=2 * hidden_size, max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
