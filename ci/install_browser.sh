#!/usr/bin/env bash
# Installs headless Chromium for tests/test_dashboard_browser.py (Debian), if it is missing.
set -euo pipefail
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then
    echo "browser present: $(command -v "$b")"
    exit 0
  fi
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
command -v chromium
