#!/usr/bin/env bash
# bt_end_to_end.py on a host where the workbench is not installed (a lent GPU host): this
# lays it out as an install has it, then runs the benchmark there, so that the figures do not
# carry `python -m`'s runpy or an import from a wheel's zip, which a user's run does not pay:
#   - a console script `workbench` beside a python (pip's own template for [project.scripts]);
#   - pygdbmi, the only dependency `bt` imports, unpacked from its wheel into a directory on
#     PYTHONPATH; the checkout itself on PYTHONPATH (the benchmark puts it there);
# Usage: benchmarks/bt_end_to_end_installed.sh WHEEL_DIR [bt_end_to_end.py options...]
#   WHEEL_DIR holds pygdbmi-*.whl (`pip download --no-deps pygdbmi -d WHEEL_DIR`).
set -euo pipefail
shopt -s nullglob  # no wheel: pygdbmi comes from PYTHONPATH (the test suite runs it so)
wheels=$(cd "$1" && pwd)
shift
python=${PYTHON:-/usr/bin/python3}
install=$(mktemp -d)
trap 'rm -rf "$install"' EXIT
mkdir -p "$install/bin" "$install/site"
ln -s "$python" "$install/bin/python3"
for wheel in "$wheels"/pygdbmi-*.whl; do
  (cd "$install/site" && "$python" -m zipfile -e "$wheel" .)
done
cat > "$install/bin/workbench" <<SCRIPT
#!$install/bin/python3
import sys
from workbench.cli.main import main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(main())
SCRIPT
chmod +x "$install/bin/workbench"
export PYTHONPATH="$install/site${PYTHONPATH:+:$PYTHONPATH}"
cd "$(dirname "$0")/.."
"$install/bin/python3" benchmarks/bt_end_to_end.py "$@"
