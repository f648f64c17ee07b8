#!/usr/bin/env bash
# Install Debian's Chromium and its matching chromedriver for the docs browser test. Safe to rerun.
# Both come from the distribution so the driver always matches the browser and nothing downloads a browser build.
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  echo "usage: scripts/setup_browser.sh   install chromium + chromium-driver (Debian packages) when missing"
  exit 0
fi

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium and chromium-driver for the docs browser test (about a minute) ..." >&2
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
else
  echo "error: chromium and chromedriver are needed by tests/docs/test_browser.py." >&2
  echo "Install them as root: apt-get install chromium chromium-driver (Debian/Ubuntu), or set CHROMIUM/CHROMEDRIVER." >&2
  exit 2
fi
