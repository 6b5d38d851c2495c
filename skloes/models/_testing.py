"""Tiny random-initialised models for offline tests and doctests."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import tempfile
from pathlib import Path

from skloes.core._torch import torch
from skloes.utils._docstrings import fill_doc

_WORDS = (
    "the a an and or not good bad great awful movie film plot actor story "
    "is was very quite really fun dull boring lovely i you it this that"
).split()

_doc = fill_doc(
    PATH="""
    path : str, os.PathLike or None, default=None
        Target folder; a new temporary folder when None.""",
    HIDDEN_SIZE="""
    hidden_size : int, default=8
        Width of every hidden state.""",
    SEED="""
    seed : int, default=0
        Seeds the random initialisation.""",
)


def _folder(path, prefix):
    """``path`` created (a new temporary folder named ``prefix*`` when None)."""
    path = Path(path or tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save_model(path, seed, model_class, config, **kwargs):
    """Seed torch, then build ``model_class(config, **kwargs)`` and save it."""
    from skloes.utils._optional import quiet_transformers

    torch.manual_seed(seed)
    model = model_class(config, **kwargs).eval()
    with quiet_transformers():
        model.save_pretrained(path)


@_doc
def make_tiny_model(path=None, *, num_hidden_layers=2, hidden_size=8, seed=0):
    """Save a tiny random ``BertModel`` with a word-level tokenizer to ``path``.

    Parameters
    ----------
    {PATH}
    num_hidden_layers : int, default=2
        Number of transformer blocks (the model has one more hidden state).
    {HIDDEN_SIZE}
    {SEED}

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

    path = _folder(path, "skloes-tiny-bert-")
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
    _save_model(path, seed, BertModel, config)
    tokenizer.save_pretrained(path)
    return str(path)


@_doc
def make_tiny_vit(
    path=None, *, num_hidden_layers=2, hidden_size=8, image_size=16, seed=0
):
    """Save a tiny random ``ViTModel`` with its image processor to ``path``.

    Parameters
    ----------
    {PATH}
    num_hidden_layers : int, default=2
        Number of transformer blocks.
    {HIDDEN_SIZE}
    image_size : int, default=16
        Side of the square input; patches are 4x4, so there are
        ``(image_size // 4) ** 2 + 1`` tokens (with CLS).
    {SEED}

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

    path = _folder(path, "skloes-tiny-vit-")
    config = ViTConfig(
        image_size=image_size,
        patch_size=4,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
    )
    _save_model(path, seed, ViTModel, config, add_pooling_layer=False)
    ViTImageProcessor(size={"height": image_size, "width": image_size}).save_pretrained(
        path
    )
    return str(path)


@_doc
def make_tiny_wav2vec2(
    path=None,
    *,
    num_hidden_layers=2,
    hidden_size=8,
    stable_layer_norm=True,
    feat_extract_norm="layer",
    model_type="wav2vec2",
    seed=0,
):
    """Save a tiny random ``Wav2Vec2Model`` with its feature extractor to ``path``.

    The convolutional front end has strides 5 and 4 (one frame per 20
    samples), and the feature extractor returns an attention mask.

    Parameters
    ----------
    {PATH}
    num_hidden_layers : int, default=2
        Number of transformer blocks.
    {HIDDEN_SIZE}
    stable_layer_norm : bool, default=True
        Pre-norm blocks with a final layer norm (the variant whose last hidden
        state differs from the last block's output) rather than post-norm.
    feat_extract_norm : {"layer", "group"}, default="layer"
        The convolutional feature encoder's norm: ``"group"`` is the kind of
        the pretrained base models (wav2vec2-base, HuBERT-base, WavLM-base),
        whose first GroupNorm normalises over time, padding included; the
        feature extractor then returns no attention mask, as theirs.
    model_type : {"wav2vec2", "hubert", "wavlm"}, default="wav2vec2"
        The architecture (they share the feature encoder).
    {SEED}

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel`` and ``AutoFeatureExtractor``.

    Examples
    --------
    >>> from skloes.models._testing import make_tiny_wav2vec2
    >>> path = make_tiny_wav2vec2()  # doctest: +SKIP
    """
    import transformers
    from transformers import Wav2Vec2FeatureExtractor

    names = {"wav2vec2": "Wav2Vec2", "hubert": "Hubert", "wavlm": "WavLM"}
    name = names[model_type]
    config_class = getattr(transformers, f"{name}Config")
    path = _folder(path, f"skloes-tiny-{model_type}-")
    config = config_class(
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        conv_dim=(8, 8),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm=feat_extract_norm,
        do_stable_layer_norm=stable_layer_norm,
        mask_time_prob=0.0,
    )
    _save_model(path, seed, getattr(transformers, f"{name}Model"), config)
    Wav2Vec2FeatureExtractor(
        feature_size=1,
        sampling_rate=16000,
        padding_value=0.0,
        do_normalize=True,
        return_attention_mask=feat_extract_norm == "layer",
    ).save_pretrained(path)
    return str(path)


@_doc
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
    {PATH}
    num_hidden_layers : int, default=2
        Number of decoder blocks.
    {HIDDEN_SIZE}
    add_bos : bool, default=False
        Whether the tokenizer prepends ``<s>`` to every text (as Llama 2 does;
        SmolLM2 does not).
    pad_token : bool, default=False
        Whether the tokenizer has a pad token (many decoders have none).
    {SEED}

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

    path = _folder(path, "skloes-tiny-llama-")
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
    _save_model(path, seed, LlamaModel, config)
    tokenizer.save_pretrained(path)
    return str(path)


# The vision families of skloes.models._families, built from their real
# transformers configs at a small size: (config, model, image processor)
# class names, and the config's extra settings.
_VISION_KINDS = {
    "vit": ("ViTConfig", "ViTModel", "ViTImageProcessor", {}),
    "deit": ("DeiTConfig", "DeiTModel", "DeiTImageProcessor", {}),
    "dinov2": ("Dinov2Config", "Dinov2Model", "BitImageProcessor", {}),
    "dinov2-registers": (
        "Dinov2WithRegistersConfig",
        "Dinov2WithRegistersModel",
        "BitImageProcessor",
        {"num_register_tokens": 4},
    ),
    "vit-mae": ("ViTMAEConfig", "ViTMAEModel", "ViTImageProcessor", {}),
    "beit": ("BeitConfig", "BeitModel", "BeitImageProcessor", {}),
    "clip": ("CLIPConfig", "CLIPModel", "CLIPImageProcessor", {}),
    "siglip": ("SiglipConfig", "SiglipModel", "SiglipImageProcessor", {}),
}
VISION_KINDS = tuple(_VISION_KINDS)


def _word_tokenizer(pad_token="<pad>", padding_side="right", max_length=16):
    """A word-level fast tokenizer over ``_WORDS`` (no special token added)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = [pad_token, "<unk>", "</s>", *_WORDS]
    backend = Tokenizer(
        models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>")
    )
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="</s>",
        unk_token="<unk>",
        pad_token=pad_token,
        model_max_length=max_length,
        padding_side=padding_side,
    )
    return tokenizer, len(vocab)


def _image_processor(name, image_size):
    import transformers

    square = {"height": image_size, "width": image_size}
    settings = {
        "ViTImageProcessor": {"size": square},
        "DeiTImageProcessor": {"size": square, "crop_size": square},
        "BitImageProcessor": {
            "size": {"shortest_edge": image_size},
            "crop_size": square,
        },
        "BeitImageProcessor": {"size": square, "do_center_crop": False},
        "CLIPImageProcessor": {
            "size": {"shortest_edge": image_size},
            "crop_size": square,
        },
        "SiglipImageProcessor": {"size": square},
    }[name]
    return getattr(transformers, name)(**settings)


@_doc
def make_tiny_vision_model(
    kind="vit", path=None, *, num_hidden_layers=2, hidden_size=16, image_size=16, seed=0
):
    """Save a small random vision model of a family skloes knows, with its processor.

    Built from the family's own transformers config (patches of 4x4, random
    weights): the prefix tokens, the last hidden state and the processor
    are the family's; the weights are not trained. A ``"clip"`` or
    ``"siglip"`` folder holds the whole two-tower checkpoint, with a
    word-level tokenizer for its text tower.

    Parameters
    ----------
    kind : {"vit", "deit", "dinov2", "dinov2-registers", "vit-mae", "beit", \
"clip", "siglip"}, default="vit"
        The family (``"dinov2-registers"``: DINOv2 with 4 register tokens).
    {PATH}
    num_hidden_layers : int, default=2
        Number of transformer blocks.
    hidden_size : int, default=16
        Width of every hidden state.
    image_size : int, default=16
        Side of the square input the processor gives.
    {SEED}

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel`` and ``AutoImageProcessor``.

    Examples
    --------
    >>> from skloes.models._testing import make_tiny_vision_model
    >>> path = make_tiny_vision_model("dinov2-registers")  # doctest: +SKIP
    """
    import transformers

    config_name, model_name, processor_name, extra = _VISION_KINDS[kind]
    path = _folder(path, f"skloes-tiny-{kind}-")
    blocks = dict(
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
    )
    vision = dict(blocks, image_size=image_size, patch_size=4, **extra)
    config_class = getattr(transformers, config_name)
    if kind in ("clip", "siglip"):
        tokenizer, vocab_size = _word_tokenizer()
        text = dict(blocks, vocab_size=vocab_size, max_position_embeddings=16)
        text.update(pad_token_id=0, bos_token_id=2, eos_token_id=2)
        config = config_class(text_config=text, vision_config=vision)
        tokenizer.save_pretrained(path)
    else:
        config = config_class(**vision)
    kwargs = {"add_pooling_layer": False} if kind in ("vit", "deit") else {}
    _save_model(path, seed, getattr(transformers, model_name), config, **kwargs)
    _image_processor(processor_name, image_size).save_pretrained(path)
    return str(path)


@_doc
def make_tiny_mamba(path=None, *, num_hidden_layers=2, hidden_size=16, seed=0):
    """Save a small random ``MambaModel`` with a left-padding word tokenizer.

    The tokenizer pads on the left, so that a test can see the Mamba family
    pad on the right whatever the tokenizer says.

    Parameters
    ----------
    {PATH}
    num_hidden_layers : int, default=2
        Number of Mamba blocks.
    hidden_size : int, default=16
        Width of every hidden state.
    {SEED}

    Returns
    -------
    path : str
        The folder, loadable with ``AutoModel`` and ``AutoTokenizer``.

    Examples
    --------
    >>> from skloes.models._testing import make_tiny_mamba
    >>> path = make_tiny_mamba()  # doctest: +SKIP
    """
    from transformers import MambaConfig, MambaModel

    path = _folder(path, "skloes-tiny-mamba-")
    tokenizer, vocab_size = _word_tokenizer(padding_side="left", max_length=64)
    config = MambaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        state_size=4,
        expand=2,
        conv_kernel=4,
        pad_token_id=0,
        eos_token_id=2,
        bos_token_id=2,
    )
    _save_model(path, seed, MambaModel, config)
    tokenizer.save_pretrained(path)
    return str(path)
