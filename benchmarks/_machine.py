"""The machine a benchmark ran on: one home for every result file's record.

Figures hold for the CPU that measured them: its vector extensions (AVX2,
AVX-512, VNNI, AMX) decide which kernels torch, OpenBLAS and MKL run, and
so their speed and, where float32 rounding decides, their values.
:func:`machine` gives the record a JSON result stores; :func:`machine_line`
the line a Markdown table prints beside it, from the machine at hand or from
a stored record (an old one without the CPU says "CPU not recorded").
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

try:
    from skloes.utils._cpu import cpu_description
except ImportError:  # another environment (lmprobe's): _cpu imports nothing of skloes
    _spec = importlib.util.spec_from_file_location(
        "_skloes_cpu", Path(__file__).parents[1] / "skloes" / "utils" / "_cpu.py"
    )
    _cpu = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_cpu)
    cpu_description = _cpu.cpu_description

NOT_RECORDED = "CPU not recorded"

_NAMES = {
    "openblas": "OpenBLAS",
    "mkl": "MKL",
    "blis": "BLIS",
    "flexiblas": "FlexiBLAS",
}


def kernels() -> list[dict]:
    """The BLAS and OpenMP libraries loaded (threadpoolctl), with the kernel
    family each picked, and torch's CPU capability (its ATen kernels)."""
    import numpy  # noqa: F401  (threadpoolctl sees only loaded libraries)

    try:
        import torch
    except ImportError:
        torch = None
    try:  # another environment (lmprobe's) may lack it: a record, not a check
        from threadpoolctl import threadpool_info
    except ImportError:
        threadpool_info = list

    found = [
        {
            "library": info["internal_api"],
            "version": info.get("version"),
            "architecture": info.get("architecture"),
        }
        for info in threadpool_info()
    ]
    if torch is not None:
        found.append(
            {
                "library": "torch",
                "version": torch.__version__,
                "architecture": torch.backends.cpu.get_cpu_capability(),
            }
        )
    return found


def machine() -> dict:
    """The record of this machine for a JSON result: ``cpu_description()``'s
    fields (``model``, ``extensions``, ``int8_dot_product``, ``capped``,
    ``summary``), ``cores`` (those this process may run on) and ``kernels``."""
    return {
        **cpu_description(),
        "cores": len(os.sched_getaffinity(0)),
        "kernels": kernels(),
    }


def machine_line(record) -> str:
    """One Markdown line naming the machine a record describes: a
    :func:`machine` dict (``machine_line(machine())`` for this one), or an
    older record (a dict with only ``cpu``, a string, or None)."""
    if isinstance(record, dict) and record.get("summary"):
        line = f"Measured on {record['summary']}"
        if record.get("cores"):
            line += f", {record['cores']} cores"
        names = []
        for k in record.get("kernels") or []:
            if k["library"] == "openmp" or not k.get("architecture"):
                continue  # OpenMP runtimes have no kernels of their own
            name = _NAMES.get(k["library"], k["library"])
            if f"{name} {k['architecture']}" not in names:
                names.append(f"{name} {k['architecture']}")
        return line + (f"; kernels: {', '.join(names)}." if names else ".")
    if isinstance(record, dict) and record.get("cpu"):
        return f"Measured on {record['cpu']} (vector extensions not recorded)."
    if isinstance(record, str) and record:
        return f"Measured on {record}; {NOT_RECORDED}."
    return f"{NOT_RECORDED}."


def machine_lines(records) -> str:
    """The distinct :func:`machine_line` of several records, one a line."""
    return "\n".join(dict.fromkeys(machine_line(r) for r in records))
