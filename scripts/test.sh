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
exec "${PYTHON:-python3}" -m pytest "$@"
