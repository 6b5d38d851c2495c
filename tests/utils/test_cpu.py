"""The CPU's description, and the caps that make this machine compute what an
AVX2 machine computes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from skloes.utils import _cpu

AVX512_VNNI = frozenset({"avx2", "fma", "avx512f", "avx512_vnni"})
AVX2 = frozenset({"avx2", "fma"})
AMX = frozenset({"avx2", "avx512f", "amx_int8"})


@pytest.fixture
def flags(monkeypatch):
    def use(found):
        monkeypatch.setattr(_cpu, "_flags", lambda: found)
        monkeypatch.setattr(_cpu, "_model", lambda: "Some CPU")

    return use


@pytest.mark.parametrize(
    "found, extensions, dot",
    [
        (AVX512_VNNI, ["AVX2", "FMA", "AVX-512", "AVX-512 VNNI"], True),
        (AVX2, ["AVX2", "FMA"], False),
        (frozenset({"avx2", "avx_vnni"}), ["AVX2", "AVX-VNNI"], True),
        (
            frozenset({"avx2", "avx512f", "amx_int8"}),
            ["AVX2", "AVX-512", "AMX-INT8"],
            True,
        ),
        (frozenset({"sse4_2"}), [], False),
        (None, None, None),  # no /proc/cpuinfo
    ],
)
def test_the_description_names_what_the_flags_hold(
    flags, monkeypatch, found, extensions, dot
):
    for name in _cpu.CAPS:
        monkeypatch.delenv(name, raising=False)
    flags(found)
    got = _cpu.cpu_description()
    assert got["extensions"] == extensions and got["int8_dot_product"] is dot
    assert got["summary"].startswith("Some CPU") and got["capped"] == {}
    for name in extensions or []:
        assert name in got["summary"]


def test_only_a_cpu_beyond_avx2_gets_a_capped_run(flags, monkeypatch):
    for name in _cpu.CAPS:
        monkeypatch.delenv(name, raising=False)
    flags(AVX2)
    assert _cpu.capped_run_environment() == []
    flags(None)
    assert _cpu.capped_run_environment() == []
    flags(AVX512_VNNI)
    assert _cpu.capped_run_environment() == [f"{k}={v}" for k, v in _cpu.CAPS.items()]
    # the machine's own OpenBLAS setting stays
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Zen")
    caps = _cpu.capped_run_environment()
    assert not [c for c in caps if c.startswith("OPENBLAS_CORETYPE=")]
    assert _cpu.cpu_description()["capped"] == {"OPENBLAS_CORETYPE": "Zen"}


PROBE = """
import json, numpy, threadpoolctl, torch
numpy.ones((64, 64)) @ numpy.ones((64, 64))
blas = [i.get("architecture") for i in threadpoolctl.threadpool_info()
        if i.get("internal_api") == "openblas"]
print(json.dumps({"aten": torch.backends.cpu.get_cpu_capability(), "openblas": blas}))
"""


def test_the_caps_reach_the_kernels():
    """On an AVX-512 machine, the capped run's torch and OpenBLAS really use
    their AVX2 kernels (MKL and oneDNN read their variables alike)."""
    pytest.importorskip("torch")
    pytest.importorskip("threadpoolctl")
    caps = _cpu.capped_run_environment()
    if not caps:
        pytest.skip("this CPU has nothing beyond AVX2 to cap")
    env = dict(kv.split("=", 1) for kv in caps)
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["aten"] == "AVX2"
    if "OPENBLAS_CORETYPE" in env:
        assert got["openblas"] and set(got["openblas"]) == {"Haswell"}
