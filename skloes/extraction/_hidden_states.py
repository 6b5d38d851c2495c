"""HiddenStatesTransformer: pooled per-layer hidden states of a Hugging Face model."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
import os
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from skloes.core._cache import (
    HiddenStatesCache,
    content_key,
    model_fingerprint,
    open_output,
    publish_output,
    read_output,
)
from skloes.core._contract import (
    flat_table,
    layer_feature_names,
    resolve_layer_indices,
)
from skloes.core._frames import as_container, output_container
from skloes.core._images import image_or_text
from skloes.core._memory import release_memory
from skloes.core._pooling import (  # noqa: F401 (AUTO_EXCLUDE: documented default)
    AUTO_EXCLUDE,
    POOLINGS,
    excluded_tokens,
    kept_tokens,
    pool,
    pool_layers,
    resolve_exclude_tokens,
)
from skloes.core._store import FLOAT16_MAX
from skloes.core._texts import one_column
from skloes.core._torch import DEVICE_CONSTRAINT, require_torch, resolve_device, torch
from skloes.models._audio import audio_batches, model_audio
from skloes.models._families import model_family
from skloes.models._forward import find_blocks, forward_pooled
from skloes.models._inputs import (
    audio_rule,
    check_inputs,
    check_max_length,
    check_pass_memory,
    encode_batch,
    identity_noise,
    image_prefix,
    text_batch,
    text_limits,
    token_batches,
    token_mask,
    tokenize_texts,
)
from skloes.models._loading import (
    check_weight_files,
    default_model,
    detect_modality,
    is_two_tower,
    load_model,
    load_processor,
    n_hidden_states,
    read_config,
    resolve_model_path,
    tower_config,
)
from skloes.utils._deprecation import renamed_params
from skloes.utils._optional import import_optional
from skloes.utils._param_validation import Interval, StrOptions, fit_context

__all__ = ["HiddenStatesTransformer", "default_model"]

# A cached output at least this large is returned memory-mapped from the cache.
MEMMAP_MIN_BYTES = 1 << 30
# No progress bar below this many batches.
PROGRESS_MIN_BATCHES = 8
# What `max_batch_tokens="auto"` resolves to: on the CPU, measured on MiniLM
# and SmolLM2 (doc/user_guide/hidden_states.rst, extraction memory); on an
# accelerator, 32 texts of up to 256 tokens per pass (not measured).
AUTO_BATCH_TOKENS = {"cpu": 256, "accelerator": 8192}
# (model folder, fingerprint, trust_remote_code) -> text_limits(tokenizer, config),
# per process: clones fitted in a search load the tokenizer once.
_TEXT_LIMITS: dict = {}
# Settings that ``fit`` resolves into the fitted state (the features later
# steps were fitted on): changed after fit, they are refused until the next
# fit, never silently ignored.
FIXED_AT_FIT = ("model", "pooling", "exclude_tokens", "layers", "max_length")
# Settings a fitted extractor honours when they change: the device and the
# token budget are resolved again, and a model loaded under other settings is
# loaded again (``_load``), so that no output is computed under one setting
# and cached under another's key.
RESOLVED_AGAIN = ("device", "max_batch_tokens")


@renamed_params(progress=("verbose", int))
class HiddenStatesTransformer(
    TransformerMixin, BaseEstimator, auto_wrap_output_keys=None
):
    """Extract the pooled hidden state of every layer of a Hugging Face model.

    ``transform`` runs the model over raw inputs (texts, images or audio
    waveforms) and pools each requested layer's token states into one vector per
    sample, giving a layer stack ``(n_layers, n_samples, dim)``. Layer ``0`` is
    the embedding output; layers ``1..L`` are the transformer blocks (Hugging
    Face ``hidden_states`` indexing).

    Parameters
    ----------
    model : str, os.PathLike or None, default=None
        A local model folder, a ``.gguf`` file or a folder holding one
        (converted once to safetensors in the user cache), or a Hugging Face
        hub id; hub ids that an installed offline package ships (see
        :func:`skloes.offline_models`) resolve to it with no network. None is
        the embedded default: the offline all-MiniLM-L6-v2 package when it is
        installed, otherwise the hub id
        ``"sentence-transformers/all-MiniLM-L6-v2"``. Weights load from
        safetensors only. See :ref:`offline-models`.

    pooling : {"auto", "mean", "cls", "first", "last", "max"} or callable, \
default="auto"
        How a layer's token states become one vector, always under the
        attention mask (padding never contributes): the mean over real tokens,
        the first real token (``"cls"`` is an alias of ``"first"``), the last
        real token (correct under left or right padding) or the element-wise
        maximum. ``"auto"`` is the model family's choice
        (:ref:`model-families`): ``"mean"`` for every text and audio model
        (the default before 0.3, unchanged), the class token for ViT, DeiT
        and DINOv2 (as the LOES authors pool them),
        the mean of the patch tokens for CLIP, SigLIP, ViT-MAE and BEiT. For
        an image model, ``"cls"``/``"first"`` is its class token (an error
        for SigLIP, which has none) and ``"mean"`` under the default
        ``exclude_tokens`` averages its patch tokens only. A callable
        ``f(hidden, mask) -> (B, k)`` gets one layer's ``(B, T, D)`` states
        and the ``(B, T)`` mask inside the batch loop; the output width is
        then ``k``; its mask leaves out the tokens that ``exclude_tokens``
        removes. Outputs of a callable are never cached.

        .. versionchanged:: 0.3
           The default is ``"auto"`` (it was ``"mean"``, which averaged an
           image model's class, distillation and register tokens in).

    exclude_tokens : {"auto", "special", "first"} or None, default="auto"
        Tokens left out of ``"mean"`` and ``"max"`` pooling and of a callable
        pooling's mask: ``"special"`` the tokenizer's special tokens (BOS,
        CLS, SEP, EOS...) of a text, and the prefix tokens of an image (the
        class token, DeiT's distillation token, DINOv2's registers),
        ``"first"`` each input's first token (a decoder's attention sink
        carries huge activations; an image's class token), None none.
        ``"auto"`` is the model family's choice (:ref:`model-families`):
        ``"first"`` for decoder-only language models (SmolLM2's first word,
        Gemma 3's BOS token), ``"special"`` for image models (the patch
        tokens only, as timm's ``avg`` pool), None for other models
        (encoders are trained with their special tokens in the mean); the
        choice was measured, see :ref:`pooling-special-tokens`. An input made
        only of excluded tokens keeps them all. Text and image models (audio:
        ``"auto"`` or None).

        .. versionchanged:: 0.3
           Applies to image models (``"auto"`` leaves their prefix tokens
           out).

    layers : "all", int or list of int, default="all"
        Hugging Face ``hidden_states`` indices to return (0 = embeddings,
        negatives count from the end). Blocks deeper than the deepest requested
        layer are not run.

    output : {"stack", "flat"}, default="stack"
        ``"stack"`` returns ``(n_layers, n_samples, dim)``; ``"flat"`` returns
        ``(n_samples, n_layers * dim)`` with columns ``layer{l}_{j}``, the
        scikit-learn-native form (cross-validation, ``set_output``). The flat
        array is a :class:`~skloes.core._contract.LayerTable` that carries
        its ``layer_dim``, so later steps read its layers without being told
        (see :ref:`data_contract`). ``set_output(transform="pandas")`` or
        ``"polars"`` makes the flat output a frame; a stack has no frame form
        and is returned as is, so that in a ``Pipeline`` set to frames the
        selector after the extractor returns the frame.

    batch_size : int, default=32
        Inputs per forward pass (at most: ``max_batch_tokens`` splits long
        batches). Batches are formed from length-sorted inputs and the
        original order is restored.

    max_batch_tokens : int, "auto" or None, default="auto"
        Upper bound on ``texts x padded length`` of one forward pass: a
        length-sorted batch over it is split into smaller ones (a single text
        longer than the budget runs alone; a pass the free memory cannot
        hold is a ``MemoryError`` naming ``max_length`` before any pass, see
        :ref:`extraction-memory`). A forward pass's activations grow
        linearly with its tokens, so this bounds the working set of the
        longest batches, which ``batch_size`` alone does not (32 texts of 512
        tokens are 64 times 32 of 8); outputs do not change beyond float
        rounding. ``"auto"`` is 256 tokens on the CPU, which keeps the peak
        memory near the model and the output at some 5-10 % of MiniLM's speed
        (measured, see :ref:`extraction-memory`), and 8,192 on an
        accelerator, where throughput needs large passes (32 texts of up to
        256 tokens stay whole; not measured here). None splits nothing. Text
        models only (images and audio batch by ``batch_size``).

    max_length : int, default=512
        Texts longer than this many tokens are truncated (no error). A
        ``max_length`` up to 512 is capped at the model's own limit (the
        tokenizer's ``model_max_length`` and the model's position
        embeddings); a larger one beyond that limit is an error at ``fit``,
        as is one that leaves no token of the text after the special tokens
        the tokenizer adds (below 3 for BERT's ``[CLS] ... [SEP]``). Ignored
        for images and audio.

        .. versionchanged:: 0.2
           Refused at ``fit`` when it leaves no room for the text (it turned
           truncation off); truncation always applies at the model's limit.

        .. versionchanged:: 0.3
           Above 512, a length beyond the model's limit is refused (it was
           capped at the limit).

    device : str or torch.device, default="auto"
        Torch device; ``"auto"`` picks CUDA, then MPS, then CPU. A device that
        is not available here is an error at ``fit``.

    dtype : {"float32", "float16"}, default="float32"
        Dtype of the returned array (``"float16"`` halves its memory); the
        model computes in ``precision``. There is no ``"bfloat16"``: numpy
        has no such dtype (``precision="bfloat16"`` computes in it). A pooled
        value beyond float16's range (65504) stops ``transform`` with an
        error naming the layer, never an infinity; Gemma 3's residual stream
        reaches it (``fit`` warns), see :ref:`model-families`.

    precision : {"float32", "bfloat16", "int8"}, default="float32"
        Arithmetic of the forward pass. ``"int8"``: dynamic int8
        quantization (weights per output channel, activations per token,
        prepared in about a second at load), CPU only. ``"bfloat16"``: the
        whole model in bfloat16 (pooling stays float32). Both are faster on
        CPUs with int8/bfloat16 units and move the features slightly; the
        returned array still has ``dtype``. Measured speed, quality and the choice of
        engines: :ref:`extraction-precision`.

        .. versionadded:: 0.2

    cache : str, os.PathLike or None, default=None
        Folder of a content-addressed cache of pooled states, one ``.npy`` per
        input, keyed by the model's weights, ``pooling``, ``max_length``, the
        resolved layers, ``dtype``, ``precision`` and the input content.
        Inputs found there are not recomputed (a hit returns the stored
        bytes; a miss computed in another batch equals them to float32
        rounding), and a transform whose inputs are all cached does not load
        the model. A cached output of at least
        1 GiB is returned memory-mapped (read-only) from the cache folder.

    sampling_rate : int or None, default=None
        The sampling rate in Hz of the waveforms given as arrays (audio files
        and ``datasets`` audio dicts carry their own); None is the model's
        own (16 kHz for wav2vec2 and Whisper). Clips at another rate are
        resampled to the model's with a polyphase filter
        (:func:`scipy.signal.resample_poly`). Audio models only; see
        :ref:`audio-in`.

        .. versionadded:: 0.3

    resample : bool, default=True
        Whether clips at another rate than the model's are resampled; False
        refuses them with an error naming both rates.

        .. versionadded:: 0.3

    verbose : int, default=0
        ``>= 1`` shows a tqdm bar on stderr for extractions of at least 8
        batches (tqdm stays quiet when stderr is not a terminal).

    trust_remote_code : bool, default=False
        Allow models whose config asks for their own Python code (an
        ``auto_map``). Without it such a model is refused before any of its
        code runs; with it, a warning names the files about to run.

    Attributes
    ----------
    model_path_ : str
        Local folder the model loads from.

    model_fingerprint_ : str
        Hash of the model's weights, config and processor files at ``fit``.
        When the model is loaded again (after unpickling, or after
        :func:`~skloes.probe.load_probe`), its files must hash the same, or
        the extractor refuses with an error naming the folder.

        .. versionadded:: 0.2

    modality_ : {"text", "image", "audio"}
        Input type, from the model's main input; for a two-tower checkpoint
        (CLIP, SigLIP), from ``X`` at ``fit``: images go through its vision
        tower, texts through its text tower.

    n_model_layers_ : int
        Number of hidden states of the model (blocks + 1).

    layers_ : ndarray of shape (n_layers,)
        Resolved, sorted, non-negative layer indices returned.

    n_layers_ : int
        ``len(layers_)``.

    dim_ : int
        Width of a pooled vector (the model width; ``k`` for a callable
        ``pooling`` once a transform has run).

    device_ : torch.device
        Resolved torch device (the type of every skloes estimator's
        ``device_``).

        .. versionchanged:: 0.2
           A ``torch.device``; it was a string.

    exclude_tokens_ : {"special", "first"} or None
        Resolved ``exclude_tokens``.

    pooling_ : str or callable
        Resolved ``pooling`` (``"auto"`` replaced by the family's choice).

        .. versionadded:: 0.3

    sampling_rate_ : int or None
        The rate an audio model takes its clips at (its feature extractor's),
        which clips at other rates are resampled to; None for text and
        images.

        .. versionadded:: 0.3

    n_prefix_tokens_ : int
        The tokens an image model puts before its patch tokens (class,
        distillation, registers; 0 for text and audio), counted from its
        config.

        .. versionadded:: 0.3

    family_ : str
        The model family whose quirks apply (``"llama"``, ``"gemma3"``,
        ``"bert"``...; ``"unknown"`` for an architecture skloes has not
        checked, which gets safe defaults and a warning). See
        :ref:`model-families`.

        .. versionadded:: 0.3

    max_batch_tokens_ : int or None
        Resolved ``max_batch_tokens`` (None for images and audio).

    max_length_ : int or None
        The length texts are truncated to: ``max_length`` capped at the
        model's limit (None for images and audio).

        .. versionadded:: 0.2

    model_ : transformers.PreTrainedModel
        The backbone in eval mode, loaded on first access (not pickled).

    processor_ : object
        Tokenizer, image processor or feature extractor (not pickled).

    See Also
    --------
    skloes.LOESSelector : Select the most informative layers of the stack.

    Notes
    -----
    Requires ``pip install skloes[torch]``. Extraction runs under
    ``torch.inference_mode``, pools each layer on the device inside the forward
    pass as its block produces it (forward hooks), computes identical inputs
    once, tokenizes each text once and never holds token-level states of more
    than one layer of one batch. Decoder batches padded on the left get
    position ids that skip the padding, so left and right padding give the
    same vectors up to float32 rounding. A clip's states never depend on its
    batch beyond float32 rounding, by its family's rule
    (:ref:`speech-batching`): wav2vec2, HuBERT and WavLM with a group-norm
    feature encoder (the base models) batch only clips of equal length, with
    no mask; Whisper pads every clip to its 30 s window and pools the frames
    of the real audio only (one per 20 ms); other audio models are padded
    per batch under the sample-level attention mask. Images are
    read into RGB ``uint8`` arrays (grey repeated on three channels; values
    on 0..1 and scikit-learn's digits scale 0..16 brought to 0..255) and each
    goes through the model's image processor on its own, so an image's
    features do not depend on its batch beyond float32 rounding. ViT-MAE is
    loaded with ``mask_ratio=0`` and its patches kept in order, so that it
    sees every patch and gives the same features on every call (He et al.
    2022 mask 75 % of the patches in pre-training only).

    Examples
    --------
    >>> from skloes import HiddenStatesTransformer
    >>> from skloes.models._testing import make_tiny_model
    >>> path = make_tiny_model()  # doctest: +SKIP
    >>> hst = HiddenStatesTransformer(path, device="cpu")  # doctest: +SKIP
    >>> hst.fit_transform(["a good movie", "a dull plot"]).shape  # doctest: +SKIP
    (3, 2, 8)
    """

    _parameter_constraints: dict = {
        "model": [str, os.PathLike, None],
        "pooling": [StrOptions({"auto", *POOLINGS}), callable],
        "exclude_tokens": [StrOptions({"auto", "special", "first"}), None],
        "layers": [
            StrOptions({"all"}),
            Interval(Integral, None, None, closed="neither"),
            list,
            tuple,
            np.ndarray,
        ],
        "output": [StrOptions({"stack", "flat"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_batch_tokens": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            None,
        ],
        "max_length": [Interval(Integral, 1, None, closed="left")],
        "device": DEVICE_CONSTRAINT,
        "dtype": [StrOptions({"float32", "float16"})],
        "precision": [StrOptions({"float32", "bfloat16", "int8"})],
        "cache": [str, os.PathLike, None],
        "sampling_rate": [Interval(Integral, 1, None, closed="left"), None],
        "resample": ["boolean"],
        "verbose": ["verbose"],
        "trust_remote_code": ["boolean"],
    }

    def __init__(
        self,
        model=None,
        *,
        pooling="auto",
        exclude_tokens="auto",
        layers="all",
        output="stack",
        batch_size=32,
        max_batch_tokens="auto",
        max_length=512,
        device="auto",
        dtype="float32",
        precision="float32",
        cache=None,
        sampling_rate=None,
        resample=True,
        verbose=0,
        trust_remote_code=False,
        progress="deprecated",
    ):
        self.model = model
        self.pooling = pooling
        self.exclude_tokens = exclude_tokens
        self.layers = layers
        self.output = output
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_length = max_length
        self.device = device
        self.dtype = dtype
        self.precision = precision
        self.cache = cache
        self.sampling_rate = sampling_rate
        self.resample = resample
        self.verbose = verbose
        self.trust_remote_code = trust_remote_code
        self.progress = progress

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Resolve the model and the layers; weights load on first use.

        Parameters
        ----------
        X : iterable of str, list of arrays or ndarray of shape (n_samples, ...)
            Raw inputs of the model's modality, checked here. A table (a
            DataFrame, or a 2-D array of strings) must have exactly one
            column, the texts; a wider one is an error naming ``X``.
        y : array-like of shape (n_samples,) or None, default=None
            Ignored; its length must match ``X``.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        self._fit(X, y)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
        """Fit, then return the pooled hidden states of ``X``.

        Equivalent to ``fit(X, y).transform(X)``, but ``X`` is checked, hashed
        and tokenized once (and a generator is consumed once).

        Parameters
        ----------
        X : list of str, list of arrays or ndarray of shape (n_samples, ...)
            Raw inputs of the model's modality.
        y : array-like of shape (n_samples,) or None, default=None
            Ignored; its length must match ``X``.

        Returns
        -------
        H : ndarray of shape (n_layers, n_samples, dim) or (n_samples, n_layers * dim)
            The layer stack (``output="stack"``) or the flat table.
        """
        return self._as_output(self._transform_items(self._fit(X, y)), X)

    def _fit(self, X, y):
        """Fit and return the checked inputs."""
        name = type(self).__name__
        require_torch()
        if self.cache is not None and "\x00" in os.fspath(self.cache):
            raise ValueError(  # the OS refuses it, in words of its own
                f"{name}: `cache` holds a NUL character; got {self.cache!r}."
            )
        path = resolve_model_path(self.model, owner=name)
        config = read_config(path, trust_remote_code=self.trust_remote_code, owner=name)
        check_weight_files(path, owner=name)  # headers only: fail here, not later
        modality = detect_modality(config)
        if is_two_tower(config):  # CLIP, SigLIP: the tower that takes X
            X = one_column(X, "image", name)
            X = X if hasattr(X, "__len__") else list(X)
            modality = image_or_text(X)
            config = tower_config(config, modality)
        self.sampling_rate_, self._audio_window = (
            model_audio(path) if modality == "audio" else (None, None)
        )
        audio = self._audio_reading(modality)
        items = check_inputs(X, modality, owner=name, audio=audio)
        if y is not None and len(y) != len(items):
            raise ValueError(
                f"{name}: `y` must have one entry per sample of `X`; got "
                f"{len(y)} for {len(items)} samples."
            )
        self.model_path_ = path
        self.model_fingerprint_ = model_fingerprint(path)
        self.modality_ = modality
        self.n_model_layers_ = n_hidden_states(config)
        self.layers_ = resolve_layer_indices(
            self.layers, self.n_model_layers_, owner=name
        )
        self.n_layers_ = len(self.layers_)
        self.dim_ = int(config.hidden_size) if not callable(self.pooling) else None
        self.device_ = resolve_device(self.device, owner=name)
        _precision().check_precision(self.precision, self.device_, owner=name)
        family = model_family(config, model=self.model, owner=name)
        self.family_ = family.name
        # decoders' positions count real tokens under left padding
        self._decoder = modality == "text" and family.positions == "count_real"
        self.exclude_tokens_ = resolve_exclude_tokens(
            self.exclude_tokens, modality, family.pool_exclude, owner=name
        )
        self.n_prefix_tokens_ = family.n_prefix(config) if modality == "image" else 0
        self.pooling_ = self._resolve_pooling(family, modality)
        if self.dtype == "float16" and not family.float16_store:
            warnings.warn(
                f"{name}: the hidden states of {family.name} models can exceed "
                f"float16's range ({FLOAT16_MAX:.0f}); with `dtype='float16'` "
                "transform stops at the first such value (use dtype='float32').",
                UserWarning,
                stacklevel=3,
            )
        self.max_batch_tokens_ = self._resolve_batch_tokens()
        self.max_length_ = None
        if modality == "text":
            self.max_length_ = check_max_length(
                self.max_length, self._text_limits(config), owner=name
            )
        self._fitted_settings = {
            key: _snapshot(getattr(self, key)) for key in FIXED_AT_FIT + RESOLVED_AGAIN
        }
        self._drop_loaded()
        return items

    def _text_limits(self, config):
        """:func:`text_limits` of this model's tokenizer (memoised per process)."""
        key = (self.model_path_, self.model_fingerprint_, bool(self.trust_remote_code))
        if key not in _TEXT_LIMITS:
            tokenizer = load_processor(
                self.model_path_,
                "text",
                trust_remote_code=self.trust_remote_code,
                owner=type(self).__name__,
            )
            _TEXT_LIMITS[key] = text_limits(tokenizer, config)
        return _TEXT_LIMITS[key]

    def _resolve_pooling(self, family, modality):
        """``pooling``, with ``"auto"`` the family's choice; the class token
        of a vision model that has one."""
        if callable(self.pooling):
            return self.pooling
        pooling = family.pooling if self.pooling == "auto" else self.pooling
        if modality == "image" and pooling in ("cls", "first"):
            if self.n_prefix_tokens_ == 0:
                raise ValueError(
                    f"{type(self).__name__}: `pooling`={self.pooling!r} takes the "
                    f"class token, but {family.name} models have none (their first "
                    "token is a patch); use 'mean' or 'auto'."
                )
        return pooling

    def _resolve_batch_tokens(self):
        if self.modality_ != "text":
            return None
        if self.max_batch_tokens != "auto":
            return self.max_batch_tokens
        cpu = self.device_.type == "cpu"
        return AUTO_BATCH_TOKENS["cpu" if cpu else "accelerator"]

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """Return the pooled hidden states of the requested layers.

        Parameters
        ----------
        X : list of str, list of arrays or ndarray of shape (n_samples, ...)
            Texts, images or audio clips. Audio: 1-D waveforms (at
            ``sampling_rate``), 2-D multi-channel ones (averaged to mono),
            integer PCM (scaled by its dtype's range), WAV file paths, or
            Hugging Face ``datasets`` audio dicts; clips longer than
            Whisper's 30 s window are cropped to it (see :ref:`audio-in`).
            Images: file paths (read with
            Pillow; URLs are refused), PIL images, 2-D ``(H, W)`` grey or
            3-D ``(H, W, C)``/``(C, H, W)`` arrays or tensors, a 3-D or 4-D
            batch of them, Hugging Face ``datasets`` image dicts, or ready
            float ``(C, H, W)`` pixel values of the model's input size; grey
            and small-range images are scaled (see :ref:`images-in`).

        Returns
        -------
        H : ndarray of shape (n_layers, n_samples, dim) or (n_samples, n_layers * dim)
            The layer stack (``output="stack"``) or the flat table.
        """
        check_is_fitted(self)
        items = check_inputs(
            X, self.modality_, owner=type(self).__name__, audio=self._audio_reading()
        )
        return self._as_output(self._transform_items(items), X)

    def _audio_reading(self, modality=None):
        """How clips are read (:func:`skloes.models._audio.read_audio`):
        the rate of arrays given, the model's rate and window (from ``fit``)."""
        if (modality or self.modality_) != "audio":
            return None
        return {
            "sampling_rate": self.sampling_rate,
            "model_rate": getattr(self, "sampling_rate_", None),
            "resample": self.resample,
            "window": getattr(self, "_audio_window", None),
        }

    def set_output(self, *, transform=None):
        """Set the container of the flat output.

        The flat table (``output="flat"``) becomes a pandas or polars
        DataFrame with the columns ``layer{l}_{j}``; the layer stack
        (``output="stack"``) is 3-D, has no frame form and is returned as is
        whatever the setting (in a ``Pipeline`` set to frames, the selector
        after the extractor returns the frame).

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default=None
            The container of ``transform`` and ``fit_transform``; None leaves
            the setting unchanged.

        Returns
        -------
        self : object
            This transformer.
        """
        if transform is not None:
            config = dict(getattr(self, "_sklearn_output_config", {}))
            config["transform"] = transform
            self._sklearn_output_config = config
        return self

    def _as_output(self, out, X):
        """The flat output in the container ``set_output`` asked for."""
        if self.output == "stack":
            return out
        container = output_container(self)
        if container == "default":
            return out
        return as_container(out, self.get_feature_names_out(), container, like=X)

    def _transform_items(self, items):
        self._honour_changed_settings()
        keys = [content_key(item) for item in items]
        first = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        store = self._store()
        if store is None:
            return self._format(self._extract_all(items, keys, first))
        return self._transform_cached(items, keys, first, store)

    def _extract_all(self, items, keys, first):
        """Each distinct input computed once, written straight to its column;
        duplicates copied in place (no second array of the output's size)."""
        unique = np.fromiter(first.values(), dtype=np.intp, count=len(first))
        out = None

        def sink(index, pooled):
            nonlocal out
            out = self._allocate(out, pooled, len(items))
            out[:, unique[index]] = pooled

        self._extract([items[i] for i in unique], sink)
        _copy_duplicates(out, keys, first)
        return out

    def _transform_cached(self, items, keys, first, store):
        shape = (self.n_layers_, len(items), self.dim_)
        nbytes = int(np.prod(shape)) * np.dtype(self.dtype).itemsize
        target = None
        if nbytes >= MEMMAP_MIN_BYTES:
            target = store.output_path(keys)
            cached = read_output(target, shape, self.dtype)
            if cached is not None:
                return self._format(cached)
            tmp, out = open_output(target, shape, self.dtype)
        else:
            out = np.empty(shape, dtype=self.dtype)
        missing = {}
        every_layer = self._every_layer_store()
        for key, i in first.items():
            entry = store.read(key)
            if entry is None and every_layer is not None:
                entry = every_layer.read(key)  # a superset entry serves a subset
                entry = None if entry is None else entry[self.layers_]
            if entry is None:
                missing[key] = i
            else:
                out[:, i] = entry
        if missing:
            todo = list(missing.items())

            def sink(index, pooled):  # store each batch as soon as it is pooled
                for j, local in enumerate(index):
                    key, i = todo[local]
                    store.write(key, pooled[:, j])
                    out[:, i] = pooled[:, j]

            self._extract([items[i] for _, i in todo], sink)
        _copy_duplicates(out, keys, first)
        if target is not None:
            out = publish_output(tmp, out, target)
        return self._format(out)

    def _honour_changed_settings(self):
        """Refuse a setting fixed at fit that changed since; resolve the device
        and the token budget again when they changed (see ``FIXED_AT_FIT``)."""
        fitted = getattr(self, "_fitted_settings", None)
        if fitted is None:  # fitted by skloes < 0.3
            return
        for key in FIXED_AT_FIT:
            if not same_setting(fitted[key], getattr(self, key)):
                raise SettingChangedError(
                    type(self).__name__, key, fitted[key], getattr(self, key)
                )
        name = type(self).__name__
        if not same_setting(fitted["device"], self.device):
            self.device_ = resolve_device(self.device, owner=name)
            _precision().check_precision(self.precision, self.device_, owner=name)
        if not same_setting(fitted["max_batch_tokens"], self.max_batch_tokens):
            self.max_batch_tokens_ = self._resolve_batch_tokens()
        self._fitted_settings = {
            **fitted,
            **{key: _snapshot(getattr(self, key)) for key in RESOLVED_AGAIN},
        }

    def _format(self, stack):
        if self.output == "stack":
            return stack
        return flat_table(stack, self.layers_)

    def _store(self, layers=None):
        """The cache of this configuration (of ``layers``, default the requested
        ones), or None without a cache."""
        if self.cache is None or callable(self.pooling):
            return None
        layers = self.layers_ if layers is None else layers
        settings = {
            "model": self.model_fingerprint_,
            "modality": self.modality_,
            "pooling": "first" if self._pooling == "cls" else self._pooling,
            "exclude_tokens": (
                self.exclude_tokens_ if self._pooling in ("mean", "max") else None
            ),
            "max_length": self.max_length_,
            "layers": [int(l) for l in layers],
            "dtype": self.dtype,
        }
        if self.precision != "float32":  # float32 keys as before 0.2
            settings["precision"] = self.precision
        return HiddenStatesCache(
            self.cache, settings, (len(layers), self.dim_), self.dtype
        )

    def _every_layer_store(self):
        """The cache of every layer, which serves any subset (None if the
        requested layers are every layer)."""
        if self.n_layers_ == self.n_model_layers_:
            return None
        return self._store(np.arange(self.n_model_layers_))

    def _with_layers(self, layers):
        """A fitted copy that returns the hidden states ``layers`` (sorted
        indices of the model's), sharing the loaded model (no reload)."""
        other = copy.copy(self)
        layers = np.asarray(layers, dtype=np.intp)
        every = len(layers) == self.n_model_layers_
        other.set_params(layers="all" if every else [int(l) for l in layers])
        other.layers_, other.n_layers_ = layers, len(layers)
        fitted = getattr(self, "_fitted_settings", None)
        if fitted is not None:  # the copy is fitted with its own layers
            other._fitted_settings = {**fitted, "layers": _snapshot(other.layers)}
        return other

    # ------------------------------------------------------------ extraction
    def _extract(self, items, sink):
        """Run the model over distinct inputs, batch by batch.

        Each batch's pooled states go to ``sink(index, pooled)`` (``index``:
        positions in ``items``; ``pooled``: ``(n_layers, len(index), dim)``).
        """
        model, processor = self.model_, self.processor_
        encoded = None
        if self.modality_ == "text":
            encoded = tokenize_texts(
                processor,
                items,
                self.max_length_,
                config=model.config,
                owner=type(self).__name__,
            )
            self._check_not_empty(encoded)
        batches = self._batches(items, encoded)
        if encoded is not None:
            check_pass_memory(
                model.config,
                int(max(self.layers_)),
                [len(row) for row in encoded["input_ids"]],
                batches,
                device=self.device_,
                owner=type(self).__name__,
            )
        with torch.inference_mode():
            for index in self._progress(batches):
                if encoded is not None:
                    pooled = self._pool_text_batch(model, processor, encoded, index)
                else:
                    pooled = self._pool_batch(model, processor, items, index)
                if self.dtype == "float16":
                    self._check_float16_range(pooled)
                pooled = pooled.to(getattr(torch, self.dtype)).cpu().numpy()
                self._check_finite(pooled)
                sink(index, pooled)
                del pooled
                release_memory()

    def _pool_text_batch(self, model, tokenizer, encoded, index):
        inputs, mask, exclude = text_batch(
            tokenizer,
            encoded,
            index,
            exclude_tokens=self.exclude_tokens_,
            decoder=self._decoder,
            device=self.device_,
        )
        return forward_pooled(
            model,
            inputs,
            self.layers_,
            self._pool_fn(mask, exclude),
            blocks=self._blocks,
        )

    def _pool_batch(self, model, processor, items, index):
        """Images and audio: the processor pads; pooling under the frame mask."""
        inputs = encode_batch(
            processor,
            self.modality_,
            [items[i] for i in index],
            max_length=self.max_length,
            device=self.device_,
            config=model.config,
        )
        dtype = next(model.parameters()).dtype  # bfloat16 models take bfloat16
        inputs = {
            key: value.to(dtype)
            if value.is_floating_point() and dtype.is_floating_point
            else value
            for key, value in inputs.items()
        }
        if self._loaded_family.fixed_order:  # ViT-MAE: patches in their order
            inputs["noise"] = identity_noise(inputs["pixel_values"], model.config)
        pool_fn = None

        def lazy(hidden):  # the frame mask needs the number of frames
            nonlocal pool_fn
            if pool_fn is None:
                mask = token_mask(model, inputs, hidden.shape[1])
                exclude = None
                if self.modality_ == "image":  # class, distillation, registers
                    prefix = image_prefix(getattr(self, "n_prefix_tokens_", 0), mask)
                    exclude = excluded_tokens(self.exclude_tokens_, mask, prefix)
                pool_fn = self._pool_fn(mask, exclude)
            return pool_fn(hidden)

        return forward_pooled(model, inputs, self.layers_, lazy, blocks=self._blocks)

    def _pool_fn(self, mask, exclude):
        """One layer's ``(B, T, D)`` states -> ``(B, k)`` under this batch's mask."""
        pooling = self._pooling
        if not callable(pooling):
            return lambda hidden: pool(hidden.float(), mask, pooling, exclude)
        owner, widths = type(self).__name__, []
        if exclude is not None:  # a callable sees the tokens mean pooling keeps
            mask = kept_tokens(mask, exclude)

        def call(hidden):
            value = pool_layers([hidden.float()], [0], mask, self.pooling, owner=owner)[
                0
            ]
            if widths and value.shape[1] != widths[0]:
                raise ValueError(
                    f"{owner}: callable `pooling` must return the same width k for "
                    f"every layer; got {widths[0]} and {value.shape[1]}."
                )
            widths.append(value.shape[1])
            return value

        return call

    def _check_not_empty(self, encoded):
        for i, row in enumerate(encoded["input_ids"]):
            if len(row) == 0:
                raise ValueError(
                    f"{type(self).__name__}: text {i} of `X` has no token for this "
                    "tokenizer (an empty string?); every text needs at least one."
                )

    def _check_finite(self, pooled):
        if not np.isfinite(pooled).all():
            raise ValueError(
                f"{type(self).__name__}: the model produced NaN or inf hidden states"
                + (
                    " (float16 overflow: use `dtype='float32'`)."
                    if self.dtype == "float16"
                    else "."
                )
            )

    def _check_float16_range(self, pooled):
        """Refuse, naming the layer, a pooled value a float16 store would hold
        as infinity (the model's own NaN and inf are :meth:`_check_finite`'s)."""
        peak = torch.nan_to_num(pooled.float(), nan=0.0, posinf=0.0, neginf=0.0)
        peak = peak.abs().amax(dim=(1, 2))
        over = torch.nonzero(peak > FLOAT16_MAX).flatten().tolist()
        if not over:
            return
        layers = self.layers_
        raise ValueError(
            f"{type(self).__name__}: layer {layers[over[0]]} of "
            f"{self.model_path_!r} ({getattr(self, 'family_', 'unknown')} family) "
            f"has pooled values up to {float(peak[over[0]]):.3g}, beyond "
            f"float16's range ({FLOAT16_MAX:.0f}) (layers over it in this batch: "
            f"{[int(layers[i]) for i in over]}); a float16 store would hold "
            "infinities. Use `dtype='float32'`."
        )

    def _allocate(self, out, pooled, n):
        if out is not None:
            if pooled.shape[2] != out.shape[2]:
                raise ValueError(
                    f"{type(self).__name__}: callable `pooling` must return the same "
                    f"width k for every batch; got {out.shape[2]} then "
                    f"{pooled.shape[2]}."
                )
            return out
        self.dim_ = int(pooled.shape[2])
        return np.empty((pooled.shape[0], n, pooled.shape[2]), dtype=self.dtype)

    def _batch_order(self, items, encoded):
        """Input indices in batch order: longest first (text)."""
        if len(items) <= self.batch_size and self.max_batch_tokens_ is None:
            return np.arange(len(items))
        if encoded is not None:
            lengths = np.fromiter(map(len, encoded["input_ids"]), dtype=np.int64)
        else:
            return np.arange(len(items))
        return np.argsort(-lengths, kind="stable")

    def _batches(self, items, encoded):
        """Index arrays of the forward passes, in batch order."""
        if self.modality_ == "audio":  # the family's rule (equal lengths...)
            rule = audio_rule(self.model_.config)
            return audio_batches([len(w) for w in items], self.batch_size, rule)
        order = self._batch_order(items, encoded)
        if encoded is None or self.max_batch_tokens_ is None:
            return [
                order[start : start + self.batch_size]
                for start in range(0, len(order), self.batch_size)
            ]
        lengths = [len(encoded["input_ids"][i]) for i in order]
        return token_batches(order, lengths, self.batch_size, self.max_batch_tokens_)

    def _progress(self, batches):
        if self.verbose < 1 or len(batches) < PROGRESS_MIN_BATCHES:
            return batches
        tqdm = import_optional("tqdm.auto")
        return tqdm.tqdm(
            batches, desc="hidden states", unit="batch", disable=None, leave=False
        )

    # ---------------------------------------------------------- lazy loading
    def _load_settings(self):
        """What a loaded model depends on besides its files: loaded under
        other settings, it is loaded again."""
        return (self.precision, bool(self.trust_remote_code), str(self.device_))

    def _load(self):
        check_is_fitted(self)
        if getattr(self, "_loaded_with", None) != self._load_settings():
            self._drop_loaded()  # e.g. set_params(precision="int8") after a load
        if getattr(self, "_model", None) is None:
            name = type(self).__name__
            _precision().check_precision(self.precision, self.device_, owner=name)
            self._check_weights()
            self._processor = load_processor(
                self.model_path_,
                self.modality_,
                trust_remote_code=self.trust_remote_code,
                owner=name,
            )
            precision = _precision()
            self._model = precision.apply_precision(
                load_model(
                    self.model_path_,
                    trust_remote_code=self.trust_remote_code,
                    device=self.device_,
                    owner=name,
                    torch_dtype=precision.load_dtype(self.precision),
                    modality=self.modality_,
                ),
                self.precision,
            )
            self._loaded_family = model_family(self._model.config, warn=False)
            for key, value in self._loaded_family.load_config:  # MAE unmasked
                if getattr(self._model.config, key, None) != value:
                    raise RuntimeError(
                        f"{name}: {self._loaded_family.name} must load with "
                        f"{key}={value!r}; transformers gave "
                        f"{getattr(self._model.config, key, None)!r}."
                    )
            side = self._loaded_family.padding_side
            if side is not None and self.modality_ == "text":
                self._processor.padding_side = side
            self._blocks = find_blocks(self._model)
            self._loaded_with = self._load_settings()

    def _check_weights(self):
        """The weights behind ``model`` are those ``fit`` saw, or a clear error.

        A model folder that moved (another machine, another ``SKLOES_HOME``)
        is found again from ``model``; its files must hash as at ``fit``.
        """
        name, path = type(self).__name__, self.model_path_
        if not os.path.isdir(path):
            try:
                path = resolve_model_path(self.model, owner=name)
            except (OSError, ValueError):
                raise ValueError(
                    f"{name}: the `model` this extractor was fitted with is gone: "
                    f"its folder {self.model_path_!r} does not exist any more and "
                    f"`model`={self.model!r} resolves to no other copy here; "
                    "restore the model files or refit the extractor."
                ) from None
        if model_fingerprint(path) != self.model_fingerprint_:
            raise ValueError(
                f"{name}: the model files in {path!r} (`model`={self.model!r}) "
                "changed since this extractor was fitted; refit it, or restore "
                "the files it was fitted with."
            )
        self.model_path_ = path

    @property
    def model_(self):
        """The backbone (``transformers.PreTrainedModel``), loaded on demand."""
        self._load()
        return self._model

    @property
    def processor_(self):
        """The tokenizer, image processor or feature extractor, loaded on demand."""
        self._load()
        return self._processor

    def _drop_loaded(self):
        self._model = self._processor = self._blocks = self._loaded_with = None
        self._loaded_family = None

    @property
    def _pooling(self):
        """The resolved pooling (``pooling_``; ``pooling`` when fitted by
        skloes < 0.3, which had no ``"auto"``)."""
        return getattr(self, "pooling_", self.pooling)

    def __getstate__(self):
        state = super().__getstate__()
        for key in (
            "_model",
            "_processor",
            "_blocks",
            "_loaded_with",
            "_loaded_family",
        ):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._drop_loaded()

    # ------------------------------------------------------------- metadata
    def get_feature_names_out(self, input_features=None):
        """Column names ``layer{l}_{j}`` of the flat output.

        A layer stack (``output="stack"``) has no columns of its own; its
        names are those of the same values laid flat, which are the names a
        selector after it derives its own from. So a ``Pipeline`` of an
        extractor and a selector gives its names whatever the output.

        .. versionchanged:: 0.3
           Names for ``output="stack"`` too (it was an error).

        Parameters
        ----------
        input_features : None
            Ignored (the input is raw data, not named columns).

        Returns
        -------
        feature_names_out : ndarray of str objects
            ``layer{l}_{j}`` for each returned layer ``l`` and unit ``j``.
        """
        check_is_fitted(self)
        if self.dim_ is None:
            raise ValueError(
                f"{type(self).__name__}: the width of a callable `pooling` is known "
                "after the first transform; call transform first."
            )
        return layer_feature_names(self.layers_, self.dim_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.input_tags.allow_nan = False
        tags.target_tags.required = False
        tags.transformer_tags.preserves_dtype = []
        return tags


def _precision():
    """:mod:`skloes.models._precision`, which imports torch at its top."""
    import skloes.models._precision as _precision

    return _precision


class SettingChangedError(ValueError):
    """A setting fixed at ``fit`` that changed since (see ``FIXED_AT_FIT``)."""

    def __init__(self, owner, param, fitted, now):
        self.param, self.fitted, self.now = param, fitted, now
        super().__init__(
            f"{owner}: `{param}` is {now!r} but was {fitted!r} at fit, and the "
            "features of a fitted estimator are fixed at fit: fit it again, or "
            f"set `{param}` back to {fitted!r}."
        )


def _snapshot(value):
    """A copy of a list or array setting (an in-place edit is a change); any
    other value as is (a callable pooling stays the same object)."""
    if isinstance(value, (list, np.ndarray)):
        return copy.copy(value)
    return value


def same_setting(a, b):
    """Whether two values of a setting are the same (arrays by dtype kind and
    values, paths by their text, anything else by ``==``)."""
    if a is b:
        return True
    if isinstance(a, (str, os.PathLike)) and isinstance(b, (str, os.PathLike)):
        return os.fspath(a) == os.fspath(b)
    sequences = (list, tuple, np.ndarray)
    if isinstance(a, sequences) or isinstance(b, sequences):
        if not (isinstance(a, sequences) and isinstance(b, sequences)):
            return False
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype.kind == b.dtype.kind and np.array_equal(a, b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _copy_duplicates(out, keys, first):
    """Fill the column of each repeated input from its first occurrence."""
    for i, key in enumerate(keys):
        if first[key] != i:
            out[:, i] = out[:, first[key]]
