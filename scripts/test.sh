#!/usr/bin/env bash
# Set up everything (llama-server is built and vLLM's CPU build installed once per machine, cached in
# ~/.cache/llm-anchors), lint, run the fast tier (no network, no model server, no browser: a simple break fails
# here, in about two minutes), type-check, then start the local LLM on 127.0.0.1 and run the rest (the LLM, the
# browser, the slow tests), then the same model on vLLM and its tier. `--no-vllm` leaves the vLLM tier out.
set -euo pipefail
cd "$(dirname "$0")/.."
vllm=1
if [ "${1:-}" = "--no-vllm" ]; then vllm=0; shift; fi
bash scripts/setup.sh --test  # the first command's set-up, and what the tests need beyond it
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# pytest exits 5 when it collected no test: set -e makes that a failure too.
.venv/bin/pytest -m "not llm and not browser and not slow and not vllm" --durations=5 "$@"
.venv/bin/mypy
bash scripts/browser.sh  # Chromium, for the report's browser test

# serve MODULE WHAT SECONDS: start `python -m MODULE serve` in the background; its URL in $url, its pid in $server.
serve() {
  local log
  log=$(mktemp -t "$1-ci.XXXXXX")
  .venv/bin/python -m "$1" serve > "$log" 2>&1 &
  server=$!
  url=""
  for _ in $(seq 1 $(($3 * 5))); do
    url=$(grep -m1 '^http://127.0.0.1' "$log" || true)
    [ -n "$url" ] && break
    kill -0 $server 2>/dev/null || { cat "$log"; echo "$2 did not start" >&2; exit 1; }
    sleep 0.2
  done
  [ -n "$url" ] || { cat "$log"; echo "$2 did not start in time" >&2; exit 1; }
  echo "$2 at $url"
}
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT

serve llm_anchors.backends.llamacpp "local LLM (llama-server)" 120
export LLM_ANCHORS_LLAMA_URL=$url
.venv/bin/pytest -m "llm or browser or slow" --durations=15 "$@"
kill $server; wait $server 2>/dev/null || true

[ $vllm = 1 ] || exit 0
.venv/bin/python -m llm_anchors.backends.vllm setup >/dev/null  # once per machine: ~2.5 min, 4 GB
serve llm_anchors.backends.vllm "local LLM (vLLM)" 600
export LLM_ANCHORS_VLLM_URL=$url
.venv/bin/pytest -m vllm --durations=10 "$@"
