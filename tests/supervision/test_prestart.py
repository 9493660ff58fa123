"""The supervisor a command forks as it begins (supervision.prestart) gets the build, leaves
when unused, is never forked beside an open database, and a dead one is replaced."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]

# A command that prestarts, says the waiting supervisor's pid, then runs `workbench run`.
RUN_AFTER_PRESTART = """
import json, os, sys
from workbench.supervision import prestart
prestart.prestart()
waiting = [w.pid for w in prestart._waiting]
if sys.argv[1] == "kill" and waiting:
    os.kill(waiting[0], 9)
print(json.dumps(waiting), file=sys.stderr, flush=True)
from workbench.cli.main import main
sys.exit(main(["--state-dir", sys.argv[2], "run", "--name", "t", "--", "sh", "-c", "echo built"]))
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _row(state: Path) -> tuple[int, float, float, str]:
    with sqlite3.connect(state / "history.sqlite3") as db:
        return db.execute(
            "SELECT supervisor_pid, supervisor_started, started, state FROM builds"
        ).fetchone()


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _first_line_json(stderr: str) -> list[int]:
    return json.loads(stderr.splitlines()[0])


def test_the_build_goes_to_the_supervisor_forked_as_the_command_began(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = _run(RUN_AFTER_PRESTART, "use", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "built"
    (waiting,) = _first_line_json(done.stderr)
    supervisor_pid, supervisor_started, started, outcome = _row(state)
    assert outcome == "succeeded"
    # The waiting process kept the build (keeper.py); its child supervised it.
    keeper = json.loads((state / "builds" / "1" / "keeper.json").read_text())
    assert keeper["pid"] == waiting and supervisor_pid != waiting
    assert keeper["started"] <= started  # it was there before the build was asked for
    assert supervisor_started <= started
    assert "build #1" in (state / "builds" / "1" / "supervisor.log").read_text()


def test_a_dead_prestarted_supervisor_is_replaced_by_a_new_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = _run(RUN_AFTER_PRESTART, "kill", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "built"
    (killed,) = _first_line_json(done.stderr)
    supervisor_pid, _, _, outcome = _row(state)
    assert outcome == "succeeded"
    assert supervisor_pid != killed


def test_an_unused_prestarted_supervisor_leaves_with_its_command() -> None:
    script = (
        "import json, sys\n"
        "from workbench.supervision import prestart\n"
        "prestart.prestart()\n"
        "print(json.dumps([w.pid for w in prestart._waiting]))\n"
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    (waiting,) = json.loads(done.stdout)
    assert _gone(waiting)


def test_nothing_is_forked_while_a_database_is_open(tmp_path: Path) -> None:
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from workbench.history.store import History\n"
        "from workbench.supervision import prestart\n"
        "history = History(Path(sys.argv[1]))\n"
        "prestart.prestart()\n"
        "print(json.dumps([w.pid for w in prestart._waiting]))\n"
    )
    done = _run(script, str(tmp_path / "state"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
