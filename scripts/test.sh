#!/usr/bin/env bash
# The test suite: set up, then run every test (unit, doctests, real-model
# integration tests and the examples) except those marked slow.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
exec "${PYTHON:-python3}" -m pytest "$@"
