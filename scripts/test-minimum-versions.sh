#!/usr/bin/env bash
# Run the test suite against the OLDEST versions pyproject.toml allows: each runtime
# dependency's lower bound (`textual>=6.2.1` -> textual==6.2.1) installed exactly, in
# .venv-minimum. This is what proves the bounds, and the bounds are what nixpkgs' runtime
# dependency check holds the Nix-built app to (README: "Dependency bounds").
# Snapshot tests are left out: they compare pixels drawn by the newest Textual (tests/tui/test_snapshots.py,
# and every test marked `snapshot` elsewhere: tests/tui/test_snapshot_markers.py checks none is unmarked).
# Extra arguments go to pytest. The Debian packages the suite drives (nix-bin, gdb, ninja, ...)
# are scripts/test.sh's to install: run that once first on a fresh machine.
#
# `scripts/test-minimum-versions.sh --quick`: only Textual and Rich at their lower bounds (the two
# whose private insides the TUI reaches into), laid over scripts/test.sh's .venv (pip --target
# into .venv/minimum-overlay, first on PYTHONPATH; .venv's own packages are left as they are), and
# only the tests in QUICK below: they start the app and draw the build screen, its process table
# and the terminal model. Both failures the pin's Textual had (the app dying at its first frame,
# the process table's lines) fail here. About 40 s on the shared 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=(
  tests/tui/widgets/test_process_table_cells.py
  tests/tui/test_terminal_model_diff.py
  tests/tui/test_cropped_compositor.py
  tests/tui/test_terminal_bytes.py::test_idle_screen_writes_nothing
  tests/tui/screens/build/test_build_screen.py::test_leaving_keeps_the_build_running
  tests/tui/screens/build/test_build_screen.py::test_layout_fits_small_and_large_terminals
)

quick=
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi

venv=.venv-minimum
if [ -n "$quick" ]; then
  [ -x .venv/bin/python ] || { echo "$0: error: no .venv: run scripts/test.sh first" >&2; exit 2; }
  venv=.venv
  overlay=${MINIMUM_OVERLAY:-.venv/minimum-overlay}  # elsewhere where .venv is shared
  mkdir -p "$overlay"
  overlay=$(cd "$overlay" && pwd)
  constraints="$overlay/minimum-constraints.txt"
else
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  constraints="$venv/minimum-constraints.txt"
fi
python3 - "$constraints" <<'PY'
import re, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
pins = []
for dep in deps:
    if ";" in dep:  # markers (tomli on Python 3.10) do not apply here
        continue
    name, lower = re.match(r"^([A-Za-z0-9_.-]+)[^>]*>=([^,]+)", dep).groups()
    pins.append(f"{name}=={lower.strip()}")
open(sys.argv[1], "w").write("\n".join(pins) + "\n")
PY
if [ -n "$quick" ]; then
  grep -E '^(textual|rich)==' "$constraints" > "$constraints.quick"
  mv "$constraints.quick" "$constraints"
  "$venv/bin/python" -m pip install --quiet --no-deps --upgrade --target "$overlay" \
    -r "$constraints"
  export PYTHONPATH="$overlay:$PWD${PYTHONPATH:+:$PYTHONPATH}"
  set -- "${QUICK[@]}" "$@"
else
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -c "$constraints" -e '.[test]'
fi
# Proof that the run is on the minimum versions, not on whatever pip preferred.
"$venv/bin/python" - "$constraints" <<'PY'
import importlib.metadata as md, sys
for line in open(sys.argv[1]).read().split():
    name, version = line.split("==")
    have = md.version(name)
    assert have == version, f"{name} {have} installed, {version} wanted"
    print(f"minimum: {name} {have}")
PY
export PATH="$PWD/$venv/bin:$PATH"
exec "$venv/bin/python" -m pytest --ignore=tests/tui/test_snapshots.py -m "not snapshot" \
  -p no:cacheprovider "$@"
