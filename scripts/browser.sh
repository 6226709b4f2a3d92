#!/usr/bin/env bash
# Install Debian's Chromium for the report's browser test, where this machine lets us (apt, as root or
# with password-less sudo). Never fails: without a browser that one test is skipped, saying why.
set -uo pipefail
command -v chromium >/dev/null && exit 0
command -v apt-get >/dev/null || { echo "no apt-get: the report's browser test will be skipped" >&2; exit 0; }
if [ "$(id -u)" = 0 ]; then as_root=(); elif sudo -n true 2>/dev/null; then as_root=(sudo -n); else
  echo "not root and no sudo: the report's browser test will be skipped" >&2; exit 0
fi
apt_install() { DEBIAN_FRONTEND=noninteractive timeout 900 "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium; }
echo "installing chromium (Debian package) for the report's browser test" >&2
apt_install >/dev/null 2>&1 || { timeout 300 "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && apt_install >/dev/null 2>&1; } ||
  echo "could not install chromium: the report's browser test will be skipped" >&2
exit 0
