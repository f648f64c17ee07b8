#!/usr/bin/env bash
# Create .venv with a Python 3.11+ and install the project's pinned packages. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  py=$(pick_python) || {
    echo "error: Python 3.11 or newer is needed (found: $(python3 --version 2>&1 || echo none))." >&2
    echo "Install it (Debian/Ubuntu: apt-get install python3; macOS: brew install python@3.12) or set PYTHON=/path/to/python3.11+." >&2
    exit 2
  }
  if ! "$py" -m venv .venv 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "Installing Debian's python3-venv ..." >&2
      apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null
      rm -rf .venv && "$py" -m venv .venv
    else
      echo "error: '$py -m venv' failed. Install the venv module (Debian/Ubuntu: apt-get install python3-venv)." >&2
      exit 2
    fi
  fi
fi
echo "Installing the pinned Python packages into .venv ..." >&2
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
