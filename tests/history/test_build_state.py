"""Build states are an enum (BuildState, a str) and still the same strings everywhere they are
written: the history's rows, --json, the tables people read. A state written as
"BuildState.SUCCEEDED" (str() or format() of a plain mixed-in enum) fails these."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from workbench_cli import run_workbench

from workbench.history.records import FINAL_STATES, SUCCEEDED, BuildState, NewBuild
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
        record = history.create(
            NewBuild(
                name="states",
                backend="run",
                argv=("true",),
                cwd=str(tmp_path),
                checkout=str(tmp_path),
                settings={},
                eta_key="k",
                nix=False,
            )
        )
        history.mark_running(record.id, 1, 1, 1.0)
        history.finish(record.id, SUCCEEDED, 2.0, 1.0, 0, None, None, 0, {})
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
