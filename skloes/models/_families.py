"""Model families: what each architecture needs that others do not, in one place.

Layer probing is fragile where architectures differ: which positions pooling
must leave out (a decoder's first token, a vision model's class, distillation
and register tokens), which token represents an input by default, what the
last hidden state is, how padding moves positions, whether a float16 store
holds the states, which matrix products an int8 export must keep in float32.
:func:`model_family` maps a model's config to its :class:`Family`, the one
record of those answers; every consumer (the extractor's
``exclude_tokens="auto"``, ``pooling="auto"`` and float16 check, the loading
of ViT-MAE without masking, a text batch's padding side, the forward pass's
last hidden state, the int8 export) reads it from here.

A model type not listed in :data:`FAMILIES` gets the safe defaults of its kind
(decoder or not) and a warning that names the model: its results were not
checked the way the listed families' were (see the user guide,
:ref:`model-families`).

May import: utils, core, models.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from dataclasses import dataclass

from skloes.core._pooling import AUTO_EXCLUDE

__all__ = ["FAMILIES", "Family", "Int8Rule", "is_decoder_only", "model_family"]


@dataclass(frozen=True)
class Int8Rule:
    """How a family's int8 export quantizes its matrix products.

    Attributes
    ----------
    per_token : bool
        One activation scale per token (each row of a product's input)
        rather than one per tensor: a text's output then does not depend on
        the other texts of its batch nor on their padding (one scale per
        tensor moved a MiniLM probability by up to 0.06 with its batch).
        True for every family.
    float_products : str or None
        A regular expression on the exported graph's product names (the
        module path, ``.../self_attn/q_proj/MatMul``) of the products kept in
        float32.
    feed_forward_out : bool
        Also keep in float32 the products that map the feed-forward width
        back to the model width, found by their weight's shape.
    smooth : float or None
        SmoothQuant's migration strength α, the per-channel scales calibrated
        on the export's sample texts; None for none.
    """

    per_token: bool = True
    float_products: str | None = None
    feed_forward_out: bool = False
    smooth: float | None = None


@dataclass(frozen=True)
class Family:
    """The quirks of one architecture that layer probing depends on.

    Attributes
    ----------
    name : str
        Short name (``"llama"``, ``"gemma3"``, ``"qwen2"``, ``"bert"``...).
    model_types : tuple of str
        The config ``model_type`` values of the family.
    decoder : bool
        A causal, decoder-only language model.
    pool_exclude : {"first", "special"} or None
        What ``exclude_tokens="auto"`` leaves out of ``"mean"`` and ``"max"``
        pooling: ``"first"``, each text's first position (a decoder's
        attention sink: SmolLM2's and Qwen2's first word, Gemma 3's BOS
        token), ``"special"``, a vision family's prefix tokens (see
        ``prefix``), or None.
    last_state : {"block", "output"} or None
        What ``hidden_states[-1]`` is: the last block's output (``"block"``,
        BERT) or the model's output after its final norm (``"output"``,
        Llama, Gemma 3, Qwen2, whose layer ``L`` then has another scale than
        layer ``L - 1``). None: not known, checked once per loaded model on one row.
    positions : {"count_real", "model"}
        Position ids under left padding: ``"count_real"`` counts real tokens
        only, as in an unpadded text (decoders); ``"model"`` leaves them to the
        model (encoders pad on the right).
    float16_store : bool
        Whether its pooled states fit a float16 store. False for a residual
        stream that reaches float16's range (65504): Gemma 3's reaches about
        1e5 at its BOS token and 3e4 in token means.
    int8 : Int8Rule
        How an int8 export quantizes its products
        (:func:`skloes.models._graph.write_int8_graph`).
    checked : str
        What the family's entries were checked on (a model and data), or
        ``""`` for the defaults of an unknown architecture.
    pooling : {"mean", "first"}, default="mean"
        What ``pooling="auto"`` resolves to: ``"first"``, the class token
        (ViT, DeiT and DINOv2, as the LOES authors pool them), or
        ``"mean"``, under ``exclude_tokens="auto"`` the mean of the patch
        tokens for a vision family (CLIP, SigLIP, ViT-MAE, BEiT) and of the
        tokens for a text family (every text family: the text default never
        changed).
    prefix : tuple of str, default=()
        The tokens a vision family puts before its patch tokens, in order:
        ``"class"`` (one), ``"distillation"`` (one, DeiT) and
        ``"registers"`` (``config.num_register_tokens``, DINOv2 with
        registers); counted by :meth:`n_prefix`. ``exclude_tokens="special"``
        (and ``"auto"`` for a vision family) leaves them all out of ``"mean"``
        and ``"max"`` pooling, as timm's ``avg`` pool does.
    padding_side : {"left", "right"} or None, default=None
        The side a text batch is padded on, whatever the tokenizer says;
        None keeps the tokenizer's.
    load_config : tuple of (str, object) pairs, default=()
        Config values set when the model is loaded (ViT-MAE:
        ``mask_ratio=0.0``, every patch kept).
    fixed_order : bool, default=False
        Pass ViT-MAE's ``noise`` input as ``0, 1, 2...``, so that its patch
        shuffle is the identity: without it the patches are shuffled at
        random on every call, even with ``mask_ratio=0``.
    embedding_state : bool, default=True
        Whether transformers' ``hidden_states`` start with the embedding
        output. False for Mamba, whose ``hidden_states`` are its blocks'
        outputs and then the final norm's: skloes indexes its layers as
        every other model's (0 the embedding output, the first block's
        input; ``L`` the final norm's output), see
        :func:`skloes.models._forward.full_hidden_states`.
    audio_padding : {"mask", "feat_extract_norm", "window"}, default="mask"
        How a batch of clips is formed so that a clip's states never depend
        on its batch (:mod:`skloes.models._audio`, resolved per config by
        :meth:`audio_batching`): ``"mask"``, padded with the sample-level
        mask; ``"feat_extract_norm"``, the config's ``feat_extract_norm``
        decides (``"group"``: clips of equal length only, no mask;
        ``"layer"``: the mask), for wav2vec2, HuBERT and WavLM; ``"window"``,
        padded to the model's fixed window and pooled over the frames of the
        real audio (Whisper).
    encoder_only : bool, default=False
        Load only the encoder of an encoder-decoder checkpoint (Whisper):
        ``AutoModel`` gives the whole model, whose decoder needs token
        inputs; the encoder's hidden states are the layers probed.
    """

    name: str
    model_types: tuple
    decoder: bool
    pool_exclude: str | None
    last_state: str | None
    positions: str
    float16_store: bool
    int8: Int8Rule
    checked: str = ""
    pooling: str = "mean"
    prefix: tuple = ()
    padding_side: str | None = None
    load_config: tuple = ()
    fixed_order: bool = False
    embedding_state: bool = True
    audio_padding: str = "mask"
    encoder_only: bool = False

    def audio_batching(self, config) -> str:
        """The batching rule of this family's clips under ``config``.

        Parameters
        ----------
        config : transformers.PretrainedConfig
            The model's config (its ``feat_extract_norm`` for wav2vec2,
            HuBERT and WavLM).

        Returns
        -------
        rule : {"mask", "equal_length", "window"}
            See :mod:`skloes.models._audio`.
        """
        if self.audio_padding != "feat_extract_norm":
            return self.audio_padding
        norm = getattr(config, "feat_extract_norm", "group")
        return "equal_length" if norm == "group" else "mask"

    def n_prefix(self, config) -> int:
        """Number of prefix tokens (class, distillation, registers) of ``config``.

        Parameters
        ----------
        config : transformers.PretrainedConfig
            The model's config (DINOv2's ``num_register_tokens``).

        Returns
        -------
        n_prefix : int
            The positions before the first patch token.
        """
        registers = int(getattr(config, "num_register_tokens", 0) or 0)
        counts = {"class": 1, "distillation": 1, "registers": registers}
        return sum(counts[kind] for kind in self.prefix)

    @property
    def known(self) -> bool:
        """Whether this family's quirks were checked (not the defaults)."""
        return bool(self.checked)


_ENCODER = dict(
    decoder=False,
    pool_exclude=None,
    positions="model",
    float16_store=True,
    # per-token scales, nothing kept in float32, no smoothing: on MiniLM's
    # default probe (300 Rotten Tomatoes texts) the same class as torch on
    # 99.25 % of 400 new texts (98.5 % with one scale per tensor), 2.9x torch
    # at one thread (3.4x per tensor; smoothing: 100 % but 2.6x)
    int8=Int8Rule(),
)
_DECODER = dict(
    decoder=True,
    pool_exclude=AUTO_EXCLUDE,
    positions="count_real",
    float16_store=True,
    # the safe default of a decoder: its feed-forward outputs in float32 (found
    # by shape, whatever they are named), per-token scales elsewhere, smoothed
    int8=Int8Rule(per_token=True, feed_forward_out=True, smooth=0.8),
)
# Measured on SmolLM2 and Gemma 3 (500 Rotten Tomatoes texts, 5 folds; the
# user guide's "Serving a probe"), kept for Qwen2: per-token scales, the
# inputs smoothed (alpha 0.8), and in float32 the feed-forward outputs (the
# massive activations) and the attention's key and value products (cheap: few
# heads).
_DECODER_INT8 = Int8Rule(
    per_token=True,
    float_products=r"/self_attn/(k|v)_proj/",
    feed_forward_out=True,
    smooth=0.8,
)
_VISION = dict(
    _ENCODER,
    # what exclude_tokens="auto" leaves out of "mean" and "max": the prefix
    # tokens (class, distillation, registers), as timm's avg pool does
    pool_exclude="special",
)
_VISION_CHECKED = "tiny random {} on LFW faces and digits (code paths only)"
#: The families whose quirks were checked, on the model named in ``checked``.
FAMILIES = (
    Family(
        "bert",
        ("bert",),
        last_state="block",
        checked="all-MiniLM-L6-v2 (offline package), tiny random BERTs",
        **_ENCODER,
    ),
    Family(
        "mpnet",
        ("mpnet",),
        last_state="block",
        checked="all-mpnet-base-v2 (offline package)",
        **_ENCODER,
    ),
    # Vision encoders. No pretrained vision weights ship offline: each rule
    # below was checked on a model built from the family's transformers
    # config at a small size with random weights, on scikit-image's LFW
    # faces and scikit-learn's digits (tests/models/test_vision_families.py);
    # the prefix tokens and the last hidden state are architecture, not
    # weights. The class token is the default for ViT, DeiT and DINOv2 (the
    # LOES authors pool them by it), the mean of the patch tokens for CLIP,
    # SigLIP, ViT-MAE and BEiT (BEiT's own pooler averages the patches).
    Family(
        "vit",
        ("vit",),
        last_state="block",
        checked=_VISION_CHECKED.format("ViTConfig"),
        **{**_VISION, "pooling": "first", "prefix": ("class",)},
    ),
    Family(
        "deit",
        ("deit",),
        last_state="block",
        checked=_VISION_CHECKED.format("DeiTConfig"),
        **{**_VISION, "pooling": "first", "prefix": ("class", "distillation")},
    ),
    Family(
        "dinov2",
        ("dinov2", "dinov2_with_registers"),
        last_state="block",
        checked=_VISION_CHECKED.format(
            "Dinov2Config, Dinov2WithRegistersConfig (4 registers)"
        ),
        **{**_VISION, "pooling": "first", "prefix": ("class", "registers")},
    ),
    Family(
        "clip-vision",
        ("clip_vision_model",),
        last_state="block",
        checked=_VISION_CHECKED.format("CLIPConfig's vision tower"),
        **{**_VISION, "prefix": ("class",)},
    ),
    Family(
        "siglip-vision",
        ("siglip_vision_model",),
        last_state="block",
        checked=_VISION_CHECKED.format("SiglipConfig's vision tower"),
        **_VISION,  # no class token: SigLIP pools with an attention head
    ),
    Family(
        "vit-mae",
        ("vit_mae",),
        last_state="block",
        checked=_VISION_CHECKED.format("ViTMAEConfig"),
        **{
            **_VISION,
            "prefix": ("class",),
            "load_config": (("mask_ratio", 0.0),),
            "fixed_order": True,
        },
    ),
    Family(
        "beit",
        ("beit",),
        last_state="block",
        checked=_VISION_CHECKED.format("BeitConfig"),
        **{**_VISION, "prefix": ("class",)},
    ),
    # The text towers of a CLIP or SigLIP checkpoint (texts given to one).
    Family(
        "clip-text",
        ("clip_text_model",),
        last_state="block",
        checked="tiny random CLIPConfig's text tower (code paths only)",
        **_ENCODER,
    ),
    Family(
        "siglip-text",
        ("siglip_text_model",),
        last_state="block",
        checked="tiny random SiglipConfig's text tower (code paths only)",
        **_ENCODER,
    ),
    # Speech encoders. wav2vec2, HuBERT and WavLM share one convolutional
    # feature encoder whose first layer's GroupNorm (feat_extract_norm=
    # "group", the base models the LOES paper probes) normalises over time,
    # padding included: their clips are batched with clips of equal length
    # only (a 0.5 s clip padded to 1 s moved its pooled states by up to 0.086
    # on a small group-norm wav2vec2); with "layer" the mask keeps padding out.
    Family(
        "wav2vec2",
        ("wav2vec2",),
        last_state=None,
        checked="tiny random Wav2Vec2, group and layer norm (code paths only)",
        **{**_ENCODER, "audio_padding": "feat_extract_norm"},
    ),
    Family(
        "hubert",
        ("hubert",),
        last_state=None,
        checked="tiny random HuBERT, group norm (code paths only)",
        **{**_ENCODER, "audio_padding": "feat_extract_norm"},
    ),
    Family(
        "wavlm",
        ("wavlm",),
        last_state=None,
        checked="tiny random WavLM, group norm (code paths only)",
        **{**_ENCODER, "audio_padding": "feat_extract_norm"},
    ),
    # Whisper (Radford et al. 2023): the encoder of the encoder-decoder, whose
    # input is always 30 s of log-mel frames (3,000, two per encoder frame);
    # clips are padded to that window as in training and pooled over the
    # frames of the real audio (one per 20 ms). hidden_states[-1] is the
    # output of the encoder's final layer norm.
    Family(
        "whisper",
        ("whisper",),
        last_state="output",
        checked="Whisper-base (offline CTranslate2 package), against CTranslate2",
        **{**_ENCODER, "audio_padding": "window", "encoder_only": True},
    ),
    Family(
        "llama",
        ("llama",),
        last_state="output",
        checked="SmolLM2-135M-Instruct (offline GGUF), tiny random Llamas",
        **{**_DECODER, "int8": _DECODER_INT8},
    ),
    Family(
        "gemma3",
        ("gemma3_text",),
        last_state="output",
        checked="Gemma 3 270M (offline GGUF)",
        **{**_DECODER, "float16_store": False, "int8": _DECODER_INT8},
    ),
    # Qwen2 and Qwen2.5 (one model_type). No BOS is added, so the first
    # position is the text's first word, and it is the attention sink: its
    # states reach 1,000 to 2,000 in absolute value from block 3 to block 21
    # against under 100 for the other tokens (Qwen2.5-Coder-0.5B), which keeps
    # even a max pool with it inside float16's range. Pads on the right with
    # <|endoftext|>; bias on the query, key and value products.
    Family(
        "qwen2",
        ("qwen2",),
        last_state="output",
        checked="Qwen2.5-Coder-0.5B-Instruct (offline GGUF)",
        **{**_DECODER, "int8": _DECODER_INT8},
    ),
    # Mamba (state-space blocks, no attention): no attention sink, so the
    # mean keeps every token (as the Layer-by-Layer paper pools it); no
    # position ids, and a state at a real token never sees a later position,
    # so a right-padded batch gives each text its unpadded states; the last
    # hidden state is the output after the final norm (norm_f).
    # transformers' hidden_states of Mamba leave the embeddings out (blocks
    # 1..L, then norm_f's output): skloes' layer 0 is still the embedding
    # output and layer l block l (its hooks), layer L norm_f's output.
    Family(
        "mamba",
        ("mamba",),
        last_state="output",
        checked="tiny random MambaConfig (code paths only)",
        **{
            **_DECODER,
            "pool_exclude": None,
            "positions": "model",
            "padding_side": "right",
            "embedding_state": False,
        },
    ),
)
_BY_TYPE = {kind: family for family in FAMILIES for kind in family.model_types}


def model_family(config, *, model=None, owner="skloes", warn=True) -> Family:
    """The :class:`Family` of a model's config; safe defaults for an unknown one.

    Parameters
    ----------
    config : transformers.PretrainedConfig
        The model's config (its ``model_type`` decides).
    model : str or None, default=None
        The model as the user named it, for the warning.
    owner : str, default="skloes"
        Name used in the warning.
    warn : bool, default=True
        Warn when the architecture is not one of :data:`FAMILIES`.

    Returns
    -------
    family : Family
        A listed family, or the defaults of a decoder (``"first"`` left out
        of pooling, float32 feed-forward outputs in an int8 export, the last
        hidden state checked on one row) or of an encoder, named ``"unknown"``.

    Examples
    --------
    >>> from transformers import LlamaConfig  # doctest: +SKIP
    >>> model_family(LlamaConfig()).name  # doctest: +SKIP
    'llama'
    """
    kind = getattr(config, "model_type", None)
    family = _BY_TYPE.get(kind)
    if family is not None:
        return family
    decoder = is_decoder_only(config)
    family = Family(
        "unknown",
        (kind,),
        last_state=None,
        **(_DECODER if decoder else _ENCODER),
    )
    if warn:
        named = f"{model!r} " if model is not None else ""
        warnings.warn(
            f"{owner}: the model {named}is of an architecture skloes has not "
            f"checked (model_type {kind!r}); using the safe defaults of "
            f"{'a decoder' if decoder else 'an encoder'}: "
            + (
                "the first position left out of pooling, the last hidden state "
                "checked on one row, feed-forward outputs in float32 in an int8 "
                "export. "
                if decoder
                else "no position left out of pooling, the last hidden state "
                "checked on one row. "
            )
            + "Checked families: "
            + ", ".join(f.name for f in FAMILIES)
            + " (user guide: model families).",
            UserWarning,
            stacklevel=3,
        )
    return family


def is_decoder_only(config) -> bool:
    """Whether a config is a causal, decoder-only language model (GPT, Llama...).

    True when transformers has a causal-LM head for the model type and no
    masked-LM head (BERT-like encoders have both) and the config is not an
    encoder-decoder.
    """
    from transformers.models.auto import modeling_auto

    kind = getattr(config, "model_type", None)
    return (
        kind in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and kind not in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
        and not getattr(config, "is_encoder_decoder", False)
    )
