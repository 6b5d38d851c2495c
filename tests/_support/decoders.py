"""The offline decoder LLMs the suite runs the whole loop on, one per family.

Each name has a session fixture ``<name>_path`` in tests/conftest.py that
converts the model once and skips where its packages are not installed.
"""

from __future__ import annotations

# name -> (hub id, family, hidden states, width)
DECODERS = {
    "smollm2": ("HuggingFaceTB/SmolLM2-135M-Instruct", "llama", 31, 576),
    "gemma3": ("google/gemma-3-270m", "gemma3", 19, 640),
    "qwen2": ("Qwen/Qwen2.5-Coder-0.5B-Instruct", "qwen2", 25, 896),
}


def decoder_path(request, name):
    """The converted folder of decoder ``name`` (skips where not installed)."""
    return request.getfixturevalue(f"{name}_path")
