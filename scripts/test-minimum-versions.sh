#!/usr/bin/env bash
# Run the test suite against the OLDEST versions pyproject.toml allows: each runtime
# dependency's lower bound (`textual>=6.2.1` -> textual==6.2.1) installed exactly, in
# .venv-minimum. This is what proves the bounds, and the bounds are what nixpkgs' runtime
# dependency check holds the Nix-built app to (README: "Dependency bounds").
# Snapshot tests are left out: they compare pixels drawn by the newest Textual (tests/tui/test_snapshots.py,
# and every test marked `snapshot` elsewhere: tests/tui/test_snapshot_markers.py checks none is unmarked).
# Extra arguments go to pytest. The Debian packages the suite drives (nix-bin, gdb, ninja, ...)
# are scripts/test.sh's to install: run that once first on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-minimum
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
constraints="$venv/minimum-constraints.txt"
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
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -c "$constraints" -e '.[test]'
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
