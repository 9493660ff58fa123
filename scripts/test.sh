#!/usr/bin/env bash
# Run the whole test suite, installing what it needs first on a fresh Debian machine:
# Debian's nix-bin, gdb, ninja-build, g++, cmake and tmux, then this package with its test
# extra in .venv. Extra arguments go to pytest (e.g. `scripts/test.sh -k settings`).
# `scripts/test.sh --fast ...`: the fast lane, every test not marked `slow` (no real builds,
# daemons or end-to-end runs, nor a TUI test's second size: tests/conftest.py) nor `snapshot`
# (each draws a whole screen at two sizes), in two pytest-xdist workers that take tests from
# each other's queues when idle (worksteal: the TUI tests' lengths differ tenfold); CI (.ci/run)
# runs the whole suite in one process.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --fast ]; then
  shift
  set -- -m "not slow and not snapshot" -n 2 --dist worksteal "$@"
fi
# Python keeps compiled modules (and pytest its rewritten test modules) in __pycache__: with
# PYTHONDONTWRITEBYTECODE set, as some environments set it, every run and every `workbench`
# the tests start compiled the whole package again (10 of the 14 CPU-seconds of collecting the
# fast lane, measured on the 2-core machine).
unset PYTHONDONTWRITEBYTECODE

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for pair in nix-instantiate:nix-bin gdb:gdb ninja:ninja-build g++:g++ cmake:cmake tmux:tmux \
            make:make git:git ssh:openssh-client /usr/sbin/sshd:openssh-server; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
  echo "scripts/test.sh: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test]'
  rm -f .venv/.installed-*
  # What the venv holds as made here: .ci/run refuses a venv that differs from it later
  # (a package installed, removed or upgraded by hand is not what a fresh clone gets).
  .venv/bin/python scripts/venv_contents.py > .venv/.installed-contents
  touch "$stamp"
fi

export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/ruff check workbench tests benchmarks screenshots
# The type checker over the whole package (pyproject.toml's [tool.mypy]: strict flags).
.venv/bin/python -m mypy
# pytest exits 5 when it collects no test: with `set -e` that fails the run, as it should.
if (($#)); then
  exec .venv/bin/python -m pytest "$@"
fi
.venv/bin/python -m pytest
# The whole suite runs on the newest Textual and Rich; the app a user gets from the pin
# (`nix run .#workbench`) has their lower bounds, whose private insides the TUI reaches into:
# the tests that start the app and draw the build screen, on those (about 40 s).
exec bash scripts/test-minimum-versions.sh --quick -q
