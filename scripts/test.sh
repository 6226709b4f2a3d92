#!/usr/bin/env bash
# Set up everything (llama-server is built once per machine and cached in ~/.cache/llm-anchors), lint, run the
# fast tier (no network, no model server, no browser: a simple break fails here, in about a minute), type-check,
# then start the local LLM on 127.0.0.1 and run the rest (the LLM, the browser, the slow tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# pytest exits 5 when it collected no test: set -e makes that a failure too.
.venv/bin/pytest -m "not llm and not browser and not slow" --durations=5 "$@"
.venv/bin/mypy
bash scripts/browser.sh  # Chromium, for the report's browser test

log=$(mktemp -t llama-server-ci.XXXXXX)
.venv/bin/python -m adapters.llamacpp serve > "$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  url=$(grep -m1 '^http://127.0.0.1' "$log" || true)
  [ -n "$url" ] && break
  kill -0 $server 2>/dev/null || { cat "$log"; echo "llama-server did not start" >&2; exit 1; }
  sleep 0.2
done
[ -n "$url" ] || { cat "$log"; echo "llama-server did not start in time" >&2; exit 1; }
export LLM_ANCHORS_LLAMA_URL=$url
echo "local LLM at $url"
.venv/bin/pytest -m "llm or browser or slow" --durations=15 "$@"
