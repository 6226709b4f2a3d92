#!/usr/bin/env bash
# Set up, lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# pytest exits 5 when it collected no test: set -e makes that a failure too.
.venv/bin/pytest "$@"
