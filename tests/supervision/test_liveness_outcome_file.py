"""The outcome a supervisor keeps beside the log (workbench/supervision/outcome.py) is read as
the typed `Outcome` it must be. One edited by hand (or by another program) is not believed: the
build whose supervisor is gone is `lost`, and its note names the file, the field, its value and
what is allowed; one cut short is ignored. `status` and `history` go on, never a traceback.

Before, liveness passed the file's fields on as an untyped dict: a wrong type went into the
history's row (a state that is no state, text for a time) and the readers of that row failed
on it, and mypy could not see a field used as the wrong type (02436d9 fixed one such)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from supervised import Bench, build_id_from, lose_supervision

pytestmark = pytest.mark.slow  # each: a supervised build, then six CLIs (~9 s when loaded)

# What a supervisor writes for a build that exited 3 (supervisor.py, `final`).
GOOD: dict[str, Any] = {
    "state": "failed",
    "duration_s": 1.5,
    "exit_status": 3,
    "signal": None,
    "note": "exit 3",
    "lines": 2,
    "progress": {},
}

# name -> (the fields changed from GOOD, or the file's whole text; what the note must say)
EDITS: dict[str, tuple[dict[str, Any] | str, str | None]] = {
    "state-not-a-state": (
        {"state": 5},
        '\'state\' is 5: allowed: one of "succeeded", "failed", "killed", "stopped", "lost"',
    ),
    "state-running": ({"state": "running"}, "'state' is \"running\": allowed: one of"),
    "ended-text": ({"ended": "yesterday"}, "'ended' is \"yesterday\": allowed: a number"),
    "lines-missing": ({"lines": ...}, "'lines' is missing: allowed: a count of lines"),
    "progress-list": ({"progress": [1, 2]}, "'progress' is [1, 2]: allowed: an object"),
    "exit-status-text": ({"exit_status": "3"}, "'exit_status' is \"3\": allowed: null or"),
    "cut-short": ('{"build_id": 1, "created": 17', None),
}


def _lost_build(bench: Bench, tmp_path: Path) -> tuple[int, Path, dict[str, Any]]:
    """A build whose supervisor and keeper were killed: (its id, its outcome file, the fields
    that tie an outcome to it)."""
    started = bench.run("run", "-d", "--name", "edited", "--", "sleep", "60", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    bench.wait_for("the build to run", lambda: bench.record(build_id).build_pid, 60)
    record = lose_supervision(bench, build_id)
    ties = {"build_id": build_id, "created": record.created, "ended": time.time()}
    return build_id, Path(record.log_path).parent / "outcome.json", ties


def _shown(bench: Bench, build_id: int, text: bool = True) -> dict[str, Any]:
    """The build as `status --json` shows it, after checking that `status` and `history` (and
    with `text`, their text forms) ran cleanly."""
    for command in (["status"], ["history"], ["history", "--json"]) if text else ():
        shown = bench.run(*command, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "Traceback" not in shown.stderr, shown.stderr
    status = bench.run("status", "--json", timeout=60)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    return next(b for b in json.loads(status.stdout)["recent"] if b["id"] == build_id)


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_outcome_file_gives_a_lost_build_that_says_why(
    bench: Bench, tmp_path: Path, edit: str
) -> None:
    build_id, path, ties = _lost_build(bench, tmp_path)
    change, said = EDITS[edit]
    if isinstance(change, str):
        path.write_text(change)
    else:
        fields = {**GOOD, **ties, **change}
        path.write_text(json.dumps({k: v for k, v in fields.items() if v is not ...}))
    build = _shown(bench, build_id)
    assert build["state"] == "lost", build
    assert "supervisor (pid" in build["note"] and "is gone" in build["note"], build["note"]
    if said is None:
        assert "outcome file" not in build["note"], build["note"]  # cut short: ignored
    else:
        assert f"its outcome file was not used: {path}: {said}" in build["note"], build["note"]
    # Judged once: shown again, the row says the same (nothing half written).
    assert _shown(bench, build_id, text=False)["note"] == build["note"]


def test_the_outcome_file_as_a_supervisor_writes_it_ends_the_build(
    bench: Bench, tmp_path: Path
) -> None:
    """The control: the same file unedited is believed (state, exit status, duration, note)."""
    build_id, path, ties = _lost_build(bench, tmp_path)
    path.write_text(json.dumps({**GOOD, **ties}))
    build = _shown(bench, build_id)
    assert (build["state"], build["exit_status"], build["note"]) == ("failed", 3, "exit 3")
    assert build["duration_s"] == 1.5
