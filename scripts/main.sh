#!/usr/bin/env bash
# The main job: set up only what it needs (scripts/setup.sh --main), then probe
# every layer of the embedded default model (the offline SmolLM2 decoder, 500
# texts) on the default data (Rotten Tomatoes) and write a report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main
export HF_HUB_OFFLINE=1
# The job's own default folder (./skloes_report) is rewritten on every run, with
# the fitted probe saved in skloes_report/probe (run it on new texts with
# `skloes predict skloes_report/probe --data FILE`); a folder given with --out is
# never overwritten unless --force is given too.
args=("$@")
case " $* " in
  *" --out "* | *" --out="*) ;;
  *) args+=(--force)
     case " $* " in *" --save "* | *" --save="*) ;; *) args+=(--save skloes_report/probe) ;; esac ;;
esac
exec "${PYTHON:-python3}" -m skloes probe ${args[@]+"${args[@]}"}
