#!/usr/bin/env bash
# Run the workbench (the TUI with no arguments, or any command: `scripts/run.sh doctor`),
# installing the package into .venv the first time.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -x "$repo/.venv/bin/workbench" ]; then
  python3 -c 'import venv, ensurepip' 2>/dev/null || {
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv
    else sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv; fi
  }
  python3 -m venv "$repo/.venv"
  "$repo/.venv/bin/python" -m pip install --quiet -e "$repo" >&2
fi
exec "$repo/.venv/bin/workbench" "$@"
