#!/usr/bin/env bash
# Create .venv and install llm-anchors with everything its tests and benchmarks need.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e '.[test]' 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import llm_anchors, sklearn, pytest_asyncio" # fail loudly if the install did not take
