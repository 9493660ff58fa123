"""Build states are an enum (BuildState, a str) and still the same strings everywhere they are
written: the history's rows, --json, the tables people read. A state written as
"BuildState.SUCCEEDED" (str() or format() of a plain mixed-in enum) fails these."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from recorded_builds import ended_build, new_build
from workbench_cli import run_workbench

from workbench.history.records import FINAL_STATES, SUCCEEDED, BuildState
from workbench.history.store import History


@pytest.mark.parametrize("state", list(BuildState))
def test_each_state_reads_as_its_value(state: BuildState) -> None:
    assert state == state.value
    assert json.dumps({"state": state}) == f'{{"state": "{state.value}"}}'
    assert str(state) == f"{state}" == state.value
    assert f"{state:>10}" == f"{state.value:>10}"
    assert BuildState(state.value) is state


def test_the_history_and_its_json_keep_the_state_strings(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with History(state) as history:
        record = ended_build(
            history, "states", cwd=str(tmp_path), ended=2.0, duration_s=1.0, lines=0
        )
        stored = history.get(record.id)
    assert stored.state is BuildState.SUCCEEDED
    assert SUCCEEDED in FINAL_STATES
    with sqlite3.connect(state / "history.sqlite3") as db:
        row = db.execute("SELECT state, typeof(state) FROM builds WHERE id = ?", (record.id,))
        assert row.fetchone() == ("succeeded", "text")

    listed = run_workbench("history", "--json", state=state)
    assert listed.returncode == 0, listed.stderr
    assert '"state": "succeeded"' in listed.stdout
    assert "BuildState" not in listed.stdout
    table = run_workbench("history", state=state)
    assert table.returncode == 0, table.stderr
    (line,) = [line for line in table.stdout.splitlines() if "states" in line]
    assert line.split()[:2] == [str(record.id), "succeeded"]
    assert "BuildState" not in table.stdout


def test_a_state_written_by_a_newer_version_is_listed_as_written(tmp_path: Path) -> None:
    """A row whose state this version does not know (a history a newer workbench wrote):
    read without a traceback, listed with its state as written, neither running nor ended, and
    left as it is (before: ValueError from every command that read the row)."""
    state = tmp_path / "state"
    with History(state) as history:
        record = history.create(new_build("newer", cwd=str(tmp_path)))
    with sqlite3.connect(state / "history.sqlite3") as db:
        db.execute("UPDATE builds SET state = 'paused' WHERE id = ?", (record.id,))
    with History(state) as history:
        stored = history.get(record.id)
        assert [r.id for r in history.builds()] == [record.id]
    assert stored.state == "paused" and not stored.state.known and not stored.active
    assert stored.state not in FINAL_STATES and BuildState.SUCCEEDED.known

    table = run_workbench("history", state=state)
    assert table.returncode == 0, table.stderr
    (line,) = [line for line in table.stdout.splitlines() if "newer" in line]
    assert line.split()[:2] == [str(record.id), "paused"]
    listed = run_workbench("history", "--json", state=state)
    assert listed.returncode == 0, listed.stderr
    assert [b["state"] for b in json.loads(listed.stdout)["builds"]] == ["paused"]
    shown = run_workbench("status", state=state)
    assert shown.returncode == 0 and "paused" in shown.stdout, shown.stderr
    attached = run_workbench("attach", str(record.id), state=state)
    assert attached.returncode == 1 and "Traceback" not in attached.stderr
    assert "paused: a state this workbench does not know" in attached.stderr
    with sqlite3.connect(state / "history.sqlite3") as db:
        row = db.execute("SELECT state FROM builds WHERE id = ?", (record.id,)).fetchone()
    assert row == ("paused",)  # nothing here rewrote it
