"""The CPU at hand: its model and the vector extensions its kernels can use.

Figures (speed, and where float32 rounding decides, equality) hold for the
kernels a CPU runs: torch, oneDNN, MKL, OpenBLAS and ONNX Runtime pick theirs
by the extensions they find. :func:`cpu_description` names them, for the
benchmarks' result files and for the server's check of an int8 folder built
before its products were made saturation-free (see the user guide, "Serving
a probe").

May import: nothing of skloes.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path

__all__ = [
    "CAPS",
    "VECTOR_EXTENSIONS",
    "capped_run_environment",
    "cpu_description",
    "has_int8_dot_product",
]

#: The extensions that decide which kernels run, by their ``/proc/cpuinfo``
#: flag, with the name a reader knows them by.
VECTOR_EXTENSIONS = {
    "avx2": "AVX2",
    "fma": "FMA",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX-512 VNNI",
    "avx_vnni": "AVX-VNNI",
    "avx512_bf16": "AVX-512 BF16",
    "amx_int8": "AMX-INT8",
}

#: The environment variables that cap the vector extensions the libraries'
#: kernels use (torch's ATen, oneDNN, MKL, OpenBLAS), as ``scripts/test.sh``
#: sets them to see on an AVX-512 machine what an AVX2 machine computes.
CAPS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}

# The extensions whose u8 x s8 dot product accumulates in 32 bits, so that it
# cannot saturate whatever the weights (VNNI's vpdpbusd, AMX's tiles).
_INT8_DOT = ("avx512_vnni", "avx_vnni", "amx_int8")


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple:
    """``(model name, flags)`` of ``/proc/cpuinfo`` (Linux), read once; the
    flags are None where they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    model, flags = None, None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if model is None and key.strip() == "model name":
            model = value.strip()
        elif flags is None and key.strip() == "flags":
            flags = frozenset(value.split())
    return model or platform.processor() or platform.machine() or "unknown CPU", flags


def _flags() -> frozenset | None:
    """The CPU flags; None where they cannot be read."""
    return _cpuinfo()[1]


def _model() -> str:
    return _cpuinfo()[0]


def cpu_description() -> dict:
    """The CPU's model and vector extensions.

    Returns
    -------
    description : dict
        ``model`` (the CPU's name), ``extensions`` (the names of
        :data:`VECTOR_EXTENSIONS` it has, or None where the flags cannot be
        read), ``int8_dot_product`` (whether its u8 x s8 products accumulate
        in 32 bits: VNNI or AMX; None where unknown), ``capped`` (the
        :data:`CAPS` variables set, which make the libraries use fewer of
        them) and ``summary``, one line for a table: ``"<model> (AVX2,
        AVX-512, ...)"``.
    """
    flags = _flags()
    found = (
        None
        if flags is None
        else [n for f, n in VECTOR_EXTENSIONS.items() if f in flags]
    )
    summary = _model() + (
        "" if found is None else f" ({', '.join(found) or 'no AVX2'})"
    )
    capped = {name: os.environ[name] for name in CAPS if os.environ.get(name)}
    if capped:
        summary += ", capped: " + ", ".join(f"{k}={v}" for k, v in capped.items())
    return {
        "model": _model(),
        "capped": capped,
        "extensions": found,
        "int8_dot_product": has_int8_dot_product(),
        "summary": summary,
    }


def has_int8_dot_product() -> bool | None:
    """Whether this CPU multiplies u8 by s8 with 32-bit accumulation (VNNI or
    AMX); None where its flags cannot be read."""
    flags = _flags()
    return None if flags is None else any(flag in flags for flag in _INT8_DOT)


def capped_run_environment() -> list:
    """``NAME=value`` settings of :data:`CAPS` for a run that computes what
    an AVX2 machine computes, except those the environment already sets;
    empty where the CPU has nothing beyond AVX2 (or its flags cannot be
    read), as a capped run would then repeat the first."""
    flags = _flags() or frozenset()
    if not any(flag.startswith(("avx512", "amx")) for flag in flags):
        return []
    # a cap the machine already sets stays (OPENBLAS_CORETYPE is set on
    # some CPUs whose own OpenBLAS kernels are wrong)
    return [f"{k}={v}" for k, v in CAPS.items() if k not in os.environ]
