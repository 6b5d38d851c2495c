#!/usr/bin/env bash
# The main job: set up, then probe every layer of the embedded default model
# (offline MiniLM) on the default data (Rotten Tomatoes) and write a report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
exec "${PYTHON:-python3}" -m skloes probe "$@"
