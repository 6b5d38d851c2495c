"""Tiny random-initialised models for offline tests and doctests."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import tempfile
from pathlib import Path

from skloes.core._torch import torch

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
    >>> from skloes.models._testing import make_tiny_model
    >>> path = make_tiny_model()  # doctest: +SKIP
    """
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = Path(path or tempfile.mkdtemp(prefix="skloes-tiny-bert-"))
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_WORDS]
    tokenizer = BertTokenizerFast(
        vocab={word: i for i, word in enumerate(vocab)}, model_max_length=64
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    _save_quietly(BertModel(config).eval(), path)
    tokenizer.save_pretrained(path)
    return str(path)


def make_tiny_vit(
    path=None, *, num_hidden_layers=2, hidden_size=8, image_size=16, seed=0
):
    """Save a tiny random ``ViTModel`` with its image processor to ``path``.

    Parameters
    ----------
    path : str, os.PathLike or None, default=None
        Target folder; a new temporary folder when None.
    num_hidden_layers : int, default=2
        Number of transformer blocks.
    hidden_size : int, default=8
        Width of every hidden state.
    image_size : int, default=16
        Side of the square input; patches are 4x4, so there are
        ``(image_size // 4) ** 2 + 1`` tokens (with CLS).
    seed : int, default=0
        Seeds the random initialisation.

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel`` and ``AutoImageProcessor``.

    Examples
    --------
    >>> from skloes.models._testing import make_tiny_vit
    >>> path = make_tiny_vit()  # doctest: +SKIP
    """
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    path = Path(path or tempfile.mkdtemp(prefix="skloes-tiny-vit-"))
    path.mkdir(parents=True, exist_ok=True)
    config = ViTConfig(
        image_size=image_size,
        patch_size=4,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
    )
    torch.manual_seed(seed)
    _save_quietly(ViTModel(config, add_pooling_layer=False).eval(), path)
    ViTImageProcessor(size={"height": image_size, "width": image_size}).save_pretrained(
        path
    )
    return str(path)


def make_tiny_wav2vec2(
    path=None, *, num_hidden_layers=2, hidden_size=8, stable_layer_norm=True, seed=0
):
    """Save a tiny random ``Wav2Vec2Model`` with its feature extractor to ``path``.

    The convolutional front end has strides 5 and 4 (one frame per 20
    samples), and the feature extractor returns an attention mask.

    Parameters
    ----------
    path : str, os.PathLike or None, default=None
        Target folder; a new temporary folder when None.
    num_hidden_layers : int, default=2
        Number of transformer blocks.
    hidden_size : int, default=8
        Width of every hidden state.
    stable_layer_norm : bool, default=True
        Pre-norm blocks with a final layer norm (the variant whose last hidden
        state differs from the last block's output) rather than post-norm.
    seed : int, default=0
        Seeds the random initialisation.

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel`` and ``AutoFeatureExtractor``.

    Examples
    --------
    >>> from skloes.models._testing import make_tiny_wav2vec2
    >>> path = make_tiny_wav2vec2()  # doctest: +SKIP
    """
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2Model

    path = Path(path or tempfile.mkdtemp(prefix="skloes-tiny-wav2vec2-"))
    path.mkdir(parents=True, exist_ok=True)
    config = Wav2Vec2Config(
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        conv_dim=(8, 8),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm="layer",
        do_stable_layer_norm=stable_layer_norm,
        mask_time_prob=0.0,
    )
    torch.manual_seed(seed)
    _save_quietly(Wav2Vec2Model(config).eval(), path)
    Wav2Vec2FeatureExtractor(
        feature_size=1,
        sampling_rate=16000,
        padding_value=0.0,
        do_normalize=True,
        return_attention_mask=True,
    ).save_pretrained(path)
    return str(path)


def _save_quietly(model, path):
    from skloes.utils._optional import quiet_transformers

    with quiet_transformers():
        model.save_pretrained(path)


def make_tiny_llama(
    path=None,
    *,
    num_hidden_layers=2,
    hidden_size=8,
    add_bos=False,
    pad_token=False,
    seed=0,
):
    """Save a tiny random ``LlamaModel`` (a decoder) with a word-level tokenizer.

    Parameters
    ----------
    path : str, os.PathLike or None, default=None
        Target folder; a new temporary folder when None.
    num_hidden_layers : int, default=2
        Number of decoder blocks.
    hidden_size : int, default=8
        Width of every hidden state.
    add_bos : bool, default=False
        Whether the tokenizer prepends ``<s>`` to every text (as Llama 2 does;
        SmolLM2 does not).
    pad_token : bool, default=False
        Whether the tokenizer has a pad token (many decoders have none).
    seed : int, default=0
        Seeds the random initialisation.

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel`` and ``AutoTokenizer``.

    Examples
    --------
    >>> from skloes.models._testing import make_tiny_llama
    >>> path = make_tiny_llama()  # doctest: +SKIP
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    path = Path(path or tempfile.mkdtemp(prefix="skloes-tiny-llama-"))
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["<unk>", "<s>", "</s>", *_WORDS] + (["<pad>"] if pad_token else [])
    backend = Tokenizer(
        models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>")
    )
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if add_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", 1)]
        )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>" if pad_token else None,
        model_max_length=64,
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    _save_quietly(LlamaModel(config).eval(), path)
    tokenizer.save_pretrained(path)
    return str(path)
