"""Torch, imported on demand, and the names the torch heads share (torch-free)."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.utils._optional import import_optional

# How a head combines its layer blocks (skloes._heads.LayerFusionHead).
FUSIONS = ("concat", "mean", "sum", "scalar_mix")


def torch_module():
    """``torch``, or an ImportError saying ``pip install skloes[torch]``."""
    return import_optional("torch", extra="torch")
