"""scripts/test-minimum-versions.sh runs the suite on the oldest Textual the bounds allow, where
snapshots cannot match (the drawing differs across Textual versions): its own pytest selection
must leave out every test that uses `snap_compare`, wherever it lives. This collects the suite
with exactly the arguments the script passes to pytest and looks at each test's fixtures."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "test-minimum-versions.sh"

# A plugin for the collecting pytest: prints each selected test that uses snap_compare.
PLUGIN = """
def pytest_collection_finish(session):
    for item in session.items:
        if "snap_compare" in getattr(item, "fixturenames", ()):
            print("SNAPSHOT", item.nodeid)
"""


def script_pytest_arguments() -> list[str]:
    """The arguments the script gives pytest (its `-m pytest ... "$@"`, continuation lines
    joined), without "$@"."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    found = re.search(r'-m pytest (.*)"\$@"', text)
    assert found, f'{SCRIPT} no longer runs `python -m pytest ... "$@"`'
    return shlex.split(found.group(1))


def _collect(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`pytest ARGUMENTS --collect-only` with the finder plugin loaded."""
    (tmp_path / "snapshot_finder.py").write_text(PLUGIN)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *arguments,
            "--collect-only",
            "-q",
            "-p",
            "snapshot_finder",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_minimum_versions_run_leaves_out_every_snapshot_test(tmp_path: Path) -> None:
    arguments = script_pytest_arguments()
    assert "not snapshot" in arguments
    done = _collect(tmp_path, *arguments)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", done.stdout), done.stdout
    left_in = [line for line in done.stdout.splitlines() if line.startswith("SNAPSHOT")]
    assert left_in == []
    # The finder does find them when nothing is deselected (so the check above can fail).
    matrix = "tests/tui/screens/matrix/test_matrix_screen.py"
    everything = _collect(tmp_path, "-p", "no:cacheprovider", matrix)
    assert f"SNAPSHOT {matrix}::test_matrix_screen" in everything.stdout
