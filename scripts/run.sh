#!/usr/bin/env bash
# Run the workbench (the TUI with no arguments, or any command: `scripts/run.sh doctor`),
# installing the package into .venv the first time and again whenever pyproject.toml changed
# (a `git pull` that adds a dependency). $PYTHON chooses the interpreter (default: python3);
# it must be Python 3.10 or newer.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
minimum="3.10"
stamp="$repo/.venv/.run-installed-$(sha256sum "$repo/pyproject.toml" | cut -c1-16)"
# scripts/test.sh's stamp for this pyproject.toml counts too: it installed the same and more.
tested="$repo/.venv/.installed-$(sha256sum "$repo/pyproject.toml" | cut -c1-16)"
if [ ! -x "$repo/.venv/bin/workbench" ] || { [ ! -f "$stamp" ] && [ ! -f "$tested" ]; }; then
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "scripts/run.sh: error: $python not found; set PYTHON to a Python $minimum or newer" >&2
    exit 2
  fi
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    found=$("$python" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo "?")
    echo "scripts/run.sh: error: $python is Python $found; the workbench needs Python" \
      "$minimum or newer (set PYTHON, e.g. PYTHON=python3.12 scripts/run.sh)" >&2
    exit 2
  fi
  "$python" -c 'import venv, ensurepip' 2>/dev/null || {
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv
    else sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv; fi
  }
  if [ -x "$repo/.venv/bin/python" ] && ! "$repo/.venv/bin/python" -c \
    'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    rm -rf "$repo/.venv"  # made by an older Python before this check existed
  fi
  [ -x "$repo/.venv/bin/python" ] || "$python" -m venv "$repo/.venv"
  "$repo/.venv/bin/python" -m pip install --quiet -e "$repo" >&2
  rm -f "$repo"/.venv/.run-installed-*
  touch "$stamp"
fi
exec "$repo/.venv/bin/workbench" "$@"
