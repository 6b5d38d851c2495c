#!/usr/bin/env bash
# The test suite: set up, then run every test (unit, doctests, real-model
# integration tests and the examples) except those marked slow; then, on a CPU
# with AVX-512, the tests marked cpu_sensitive again with the vector units
# capped to AVX2, so that this machine also checks what an AVX2 machine
# computes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1
# The tests read prepared bundles (SmolLM2 converted from GGUF) from the user
# cache that setup.sh filled, so the conversion runs once per machine.
export SKLOES_TEST_HOME="${SKLOES_TEST_HOME:-${SKLOES_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/skloes}}"
mkdir -p "$SKLOES_TEST_HOME"
# One pytest-xdist worker a core (SKLOES_TEST_WORKERS overrides; 1 runs in
# this process), each worker's BLAS and torch pools sized to its share of the
# cores so that the workers do not oversubscribe them. Tests that start a local
# Ray cluster run on one worker (tests/conftest.py groups them).
CORES="$("$PY" -c 'import os; print(len(os.sched_getaffinity(0)))')"
WORKERS="${SKLOES_TEST_WORKERS:-$CORES}"
PYTEST=("$PY" -m pytest)
if [ "$WORKERS" -gt 1 ]; then
    THREADS=$(( CORES / WORKERS > 0 ? CORES / WORKERS : 1 ))
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$THREADS}"
    export MKL_NUM_THREADS="${MKL_NUM_THREADS:-$THREADS}"
    export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$THREADS}"
    PYTEST+=(-n "$WORKERS" --dist loadgroup)
fi
"${PYTEST[@]}" "$@"
# The caps (skloes.utils._cpu.CAPS) reach torch's ATen, oneDNN, MKL and
# OpenBLAS; ONNX Runtime picks its kernels by CPUID alone (the int8 tests
# emulate an AVX2 kernel in numpy instead). SKLOES_TEST_CAPPED=0 skips it.
CAPS="$("$PY" -c 'from skloes.utils._cpu import capped_run_environment as c; print(" ".join(c()))')"
if [ "${SKLOES_TEST_CAPPED:-1}" != 0 ] && [ -n "$CAPS" ]; then
    echo "== again with the vector units capped to AVX2: $CAPS"
    # Without arguments, only the test files that mark a test cpu_sensitive
    # (the marker is written in the file that holds the test) are collected
    # again: collecting the whole suite takes longer than these tests run.
    SELECTED=("$@")
    if [ "$#" -eq 0 ]; then
        mapfile -t SELECTED < <(grep -rlw --include='test_*.py' cpu_sensitive tests)
    fi
    status=0
    env $CAPS "${PYTEST[@]}" -m "cpu_sensitive and not slow and not gpu" \
        "${SELECTED[@]}" || status=$?
    # 5: the arguments selected no cpu_sensitive test
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
fi
