#!/usr/bin/env bash
# The test suite: set up, then run every test (unit, doctests, real-model
# integration tests and the examples) except those marked slow.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
# The tests read prepared bundles (SmolLM2 converted from GGUF) from the user
# cache that setup.sh filled, so the conversion runs once per machine.
export SKLOES_TEST_HOME="${SKLOES_TEST_HOME:-${SKLOES_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/skloes}}"
mkdir -p "$SKLOES_TEST_HOME"
# One pytest-xdist worker a core (SKLOES_TEST_WORKERS overrides; 1 runs in
# this process), each worker's BLAS and torch pools sized to its share of the
# cores so that the workers do not oversubscribe them. Tests that start a local
# Ray cluster run on one worker (tests/conftest.py groups them).
CORES="$("${PYTHON:-python3}" -c 'import os; print(len(os.sched_getaffinity(0)))')"
WORKERS="${SKLOES_TEST_WORKERS:-$CORES}"
if [ "$WORKERS" -gt 1 ]; then
    THREADS=$(( CORES / WORKERS > 0 ? CORES / WORKERS : 1 ))
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$THREADS}"
    export MKL_NUM_THREADS="${MKL_NUM_THREADS:-$THREADS}"
    export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$THREADS}"
    exec "${PYTHON:-python3}" -m pytest -n "$WORKERS" --dist loadgroup "$@"
fi
exec "${PYTHON:-python3}" -m pytest "$@"
