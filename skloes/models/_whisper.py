"""OpenAI Whisper from a CTranslate2 model file, read with numpy alone.

The offline Whisper-base bundle (see :ref:`offline-models`) ships the model in
CTranslate2's format (Klein et al., the OpenNMT project), the one
faster-whisper loads: one ``model.bin`` and the tokenizer files. This module
reads that file without CTranslate2 and writes the same weights as a Hugging
Face Whisper folder (Radford et al. 2023, "Robust Speech Recognition via
Large-Scale Weak Supervision"), so that ``AutoModel`` loads it like any other
model. :mod:`skloes.models._registry` checks the parts, joins them and
publishes the folder in the user cache once.

The file (CTranslate2's ``python/ctranslate2/specs/model_spec.py``, binary
version 6), little-endian: a uint32 version; the spec's name (a uint16
length, then the bytes with a final NUL) and a uint32 revision; a uint32
count of variables, each a name, a uint8 rank, ``rank`` uint32 dimensions, a
uint8 dtype id (0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16),
a uint32 byte count and the data; then a uint32 count of aliases, each a name
and the name of the variable it stands for.

May import: utils, core, models.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np

__all__ = ["read_ctranslate2", "write_whisper_folder"]

#: The CTranslate2 binary versions this reader knows.
BINARY_VERSIONS = (6,)
_DTYPES = {
    0: np.float32,
    1: np.int8,
    2: np.int16,
    3: np.int32,
    4: np.float16,
}


class _Reader:
    """Little-endian fields of a bytes object, read in order."""

    def __init__(self, data: bytes, where: str):
        self.data, self.pos, self.where = memoryview(data), 0, where

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.data):
            raise ValueError(
                f"{self.where} ends at byte {len(self.data)}, inside a field "
                f"that needs bytes {self.pos}..{self.pos + n}: it is truncated."
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def number(self, fmt: str) -> int:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return bytes(self.take(self.number("H"))).rstrip(b"\0").decode("utf-8")


def read_ctranslate2(path) -> tuple:
    """Read a CTranslate2 ``model.bin`` into numpy arrays.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.

    Returns
    -------
    spec : str
        The spec's name (``"WhisperSpec"``).
    revision : int
        The spec's revision.
    variables : dict of str to ndarray
        Every variable by name (scalars as 0-d arrays), aliases included
        (each the array of the variable it names).
    """
    data = Path(path).read_bytes()
    reader = _Reader(data, f"the CTranslate2 model file {str(path)!r}")
    version = reader.number("I")
    if version not in BINARY_VERSIONS:
        raise ValueError(
            f"{str(path)!r} is CTranslate2 binary version {version}; this reader "
            f"knows versions {list(BINARY_VERSIONS)}."
        )
    spec, revision = reader.string(), reader.number("I")
    variables = {}
    for _ in range(reader.number("I")):
        name = reader.string()
        shape = tuple(reader.number("I") for _ in range(reader.number("B")))
        dtype_id, n_bytes = reader.number("B"), reader.number("I")
        if dtype_id not in _DTYPES:
            raise ValueError(
                f"{str(path)!r}: variable {name!r} has dtype id {dtype_id}, "
                f"which this reader does not read (known: {sorted(_DTYPES)})."
            )
        array = np.frombuffer(reader.take(n_bytes), dtype=_DTYPES[dtype_id])
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(
                f"{str(path)!r}: variable {name!r} of shape {shape} holds "
                f"{array.size} values."
            )
        variables[name] = array.reshape(shape)
    for _ in range(reader.number("I")):
        alias, target = reader.string(), reader.string()
        variables[alias] = variables[target]
    if reader.pos != len(data):
        raise ValueError(
            f"{str(path)!r} has {len(data) - reader.pos} bytes after its last "
            "alias: not one CTranslate2 model file."
        )
    return spec, revision, variables


def _attention(prefix, out, source, fused):
    """One attention's products: CTranslate2 fuses the query, key and value
    products (``fused="qkv"``), or the key and value of a cross-attention
    (``fused="kv"``: the query is ``linear_0``) into one matrix; transformers'
    Whisper has one product each and no bias on the key."""
    names = ("q", "k", "v") if fused == "qkv" else ("k", "v")
    first = 0 if fused == "qkv" else 1
    weight, bias = source[f"linear_{first}/weight"], source[f"linear_{first}/bias"]
    for name, w, b in zip(
        names,
        np.split(weight, len(names)),
        np.split(bias, len(names)),
        strict=True,
    ):
        out[f"{prefix}.{name}_proj.weight"] = w
        if name != "k":
            out[f"{prefix}.{name}_proj.bias"] = b
        elif np.any(b != 0):
            raise ValueError(f"{prefix}: the key product has a non-zero bias.")
    if fused == "kv":
        out[f"{prefix}.q_proj.weight"] = source["linear_0/weight"]
        out[f"{prefix}.q_proj.bias"] = source["linear_0/bias"]
    last = f"linear_{first + 1}"
    out[f"{prefix}.out_proj.weight"] = source[f"{last}/weight"]
    out[f"{prefix}.out_proj.bias"] = source[f"{last}/bias"]


def _norm(out, name, source, prefix):
    out[f"{name}.weight"] = source[f"{prefix}/gamma"]
    out[f"{name}.bias"] = source[f"{prefix}/beta"]


def _linear(out, name, source, prefix):
    out[f"{name}.weight"] = source[f"{prefix}/weight"]
    out[f"{name}.bias"] = source[f"{prefix}/bias"]


def _scope(variables, prefix):
    """The variables under ``prefix/``, by the rest of their name."""
    start = len(prefix) + 1
    return {k[start:]: v for k, v in variables.items() if k.startswith(prefix + "/")}


def _n_layers(variables, side):
    found = {
        int(m.group(1))
        for name in variables
        if (m := re.match(rf"{side}/layer_(\d+)/", name))
    }
    if found != set(range(len(found))):
        raise ValueError(f"the {side} layers are not numbered 0..n-1: {found}")
    return len(found)


def whisper_state_dict(variables: dict) -> dict:
    """transformers' ``WhisperModel`` state dict of a CTranslate2 ``WhisperSpec``.

    Parameters
    ----------
    variables : dict of str to ndarray
        From :func:`read_ctranslate2`.

    Returns
    -------
    state : dict of str to ndarray
        float32 arrays by transformers' names (``encoder.layers.0.self_attn
        .q_proj.weight``...), the encoder's and the decoder's.
    """
    out: dict = {}
    enc = _scope(variables, "encoder")
    for i in (1, 2):
        _linear(out, f"encoder.conv{i}", enc, f"conv{i}")
    out["encoder.embed_positions.weight"] = enc["position_encodings/encodings"]
    _norm(out, "encoder.layer_norm", enc, "layer_norm")
    for i in range(_n_layers(variables, "encoder")):
        block, name = _scope(enc, f"layer_{i}"), f"encoder.layers.{i}"
        _block(out, name, block)
    dec = _scope(variables, "decoder")
    out["decoder.embed_tokens.weight"] = dec["embeddings/weight"]
    out["decoder.embed_positions.weight"] = dec["position_encodings/encodings"]
    _norm(out, "decoder.layer_norm", dec, "layer_norm")
    for i in range(_n_layers(variables, "decoder")):
        block, name = _scope(dec, f"layer_{i}"), f"decoder.layers.{i}"
        _block(out, name, block)
        cross = _scope(block, "attention")
        _attention(f"{name}.encoder_attn", out, cross, "kv")
        _norm(out, f"{name}.encoder_attn_layer_norm", cross, "layer_norm")
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def _block(out, name, block):
    """A block's self-attention and feed-forward (pre-norm, as Whisper's)."""
    attention = _scope(block, "self_attention")
    _attention(f"{name}.self_attn", out, attention, "qkv")
    _norm(out, f"{name}.self_attn_layer_norm", attention, "layer_norm")
    _norm(out, f"{name}.final_layer_norm", block, "ffn/layer_norm")
    _linear(out, f"{name}.fc1", block, "ffn/linear_0")
    _linear(out, f"{name}.fc2", block, "ffn/linear_1")


def whisper_config(variables: dict, ct2_config: dict, tokenizer: dict) -> dict:
    """transformers' ``WhisperConfig`` values of a CTranslate2 ``WhisperSpec``:
    sizes from the arrays' shapes, heads from the spec's ``num_heads``, the
    special tokens' ids from the tokenizer, the suppressed tokens from
    CTranslate2's ``config.json``."""
    conv1 = variables["encoder/conv1/weight"]  # (width, mel bins, 3)
    ids = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", ())}
    end = ids["<|endoftext|>"]
    return {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "vocab_size": int(variables["decoder/embeddings/weight"].shape[0]),
        "num_mel_bins": int(conv1.shape[1]),
        "d_model": int(conv1.shape[0]),
        "encoder_layers": _n_layers(variables, "encoder"),
        "decoder_layers": _n_layers(variables, "decoder"),
        "encoder_attention_heads": int(variables["encoder/num_heads"]),
        "decoder_attention_heads": int(variables["decoder/num_heads"]),
        "encoder_ffn_dim": int(
            variables["encoder/layer_0/ffn/linear_0/weight"].shape[0]
        ),
        "decoder_ffn_dim": int(
            variables["decoder/layer_0/ffn/linear_0/weight"].shape[0]
        ),
        "max_source_positions": int(
            variables["encoder/position_encodings/encodings"].shape[0]
        ),
        "max_target_positions": int(
            variables["decoder/position_encodings/encodings"].shape[0]
        ),
        "activation_function": "gelu",
        "scale_embedding": False,
        "pad_token_id": end,
        "bos_token_id": end,
        "eos_token_id": end,
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "suppress_tokens": list(ct2_config.get("suppress_ids", ())),
        "begin_suppress_tokens": list(ct2_config.get("suppress_ids_begin", ())),
        "dtype": "float32",
    }


def write_whisper_folder(model_bin, ct2_config, tokenizer_json, dest) -> dict:
    """Write a CTranslate2 Whisper model as a Hugging Face Whisper folder.

    Parameters
    ----------
    model_bin : path-like
        The CTranslate2 ``model.bin`` (a ``WhisperSpec``).
    ct2_config : path-like
        CTranslate2's ``config.json`` beside it (suppressed tokens).
    tokenizer_json : path-like
        The Hugging Face ``tokenizer.json`` beside it (copied; the special
        tokens' ids come from it).
    dest : path-like
        An existing empty folder; gets ``config.json``, ``model.safetensors``
        (float32: the float16 weights widened exactly),
        ``preprocessor_config.json`` (the 80-bin log-mel of 30 s windows at
        16 kHz) and ``tokenizer.json``.

    Returns
    -------
    config : dict
        The values written to ``config.json``.
    """
    from safetensors.numpy import save_file

    spec, revision, variables = read_ctranslate2(model_bin)
    if spec != "WhisperSpec":
        raise ValueError(f"{str(model_bin)!r} holds a {spec}, not a WhisperSpec.")
    tokenizer = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    config = whisper_config(
        variables, json.loads(Path(ct2_config).read_text(encoding="utf-8")), tokenizer
    )
    dest = Path(dest)
    save_file(
        whisper_state_dict(variables), dest / "model.safetensors", {"format": "pt"}
    )
    del variables
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    (dest / "preprocessor_config.json").write_text(
        json.dumps(_feature_extractor(config["num_mel_bins"]), indent=2, sort_keys=True)
    )
    shutil.copyfile(tokenizer_json, dest / "tokenizer.json")
    return config


def _feature_extractor(n_mels: int) -> dict:
    """Whisper's log-mel feature extractor: ``n_mels`` bins of 25 ms windows
    every 10 ms over 30 s of 16 kHz audio (OpenAI's ``whisper/audio.py``)."""
    return {
        "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": n_mels,
        "sampling_rate": 16000,
        "hop_length": 160,
        "chunk_length": 30,
        "n_fft": 400,
        "n_samples": 480000,
        "nb_max_frames": 3000,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": False,
        "processor_class": "WhisperProcessor",
    }
