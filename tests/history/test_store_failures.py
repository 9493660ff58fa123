"""The history database failing as real files fail: damaged pages, a read-only file, a full
disk. Each ends in one `workbench: error:` line that says what to do, exit status 2."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from cli_errors import one_error_line
from recorded_builds import new_build
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures

from workbench.history.records import NewBuild
from workbench.history.store import History

REPO = Path(__file__).resolve().parents[2]


def _new() -> NewBuild:
    return new_build(settings={"padding": "x" * 2000})


def _cli(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


def _history_with_builds(state: Path, count: int) -> None:
    with History(state) as history:
        for _ in range(count):
            history.create(_new())
    # Fold the WAL into the main file, so that damage to it is damage to the data.
    connection = sqlite3.connect(state / "history.sqlite3")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def test_a_partly_damaged_history_isone_error_line(tmp_path: Path) -> None:
    """The header is intact (the database opens) but the pages of `builds` are overwritten:
    SQLite fails only when a query reaches them."""
    state = tmp_path / "state"
    _history_with_builds(state, 40)
    database = state / "history.sqlite3"
    with open(database, "r+b") as handle:
        page = 4096
        size = database.stat().st_size
        for offset in range(2 * page, size, page):
            handle.seek(offset)
            handle.write(b"\xa5" * 64)
    error = one_error_line(_cli(state, "history"))
    assert "the build history is damaged" in error
    assert f"mv {database} {database}.damaged" in error


def test_a_read_only_history_isone_error_line(
    shared_tmp: Path,  # noqa: F811
    other_user: OtherUser,  # noqa: F811
) -> None:
    state = shared_tmp / "state"
    _history_with_builds(state, 2)
    for path in [state, *state.iterdir()]:
        os.chown(path, other_user.uid, other_user.gid)
    (state / "history.sqlite3").chmod(0o400)
    checkout = shared_tmp / "checkout"
    (checkout / ".git").mkdir(parents=True)
    os.chown(checkout, other_user.uid, other_user.gid)
    listed = other_user.workbench("--state-dir", str(state), "history", "--json")
    assert listed.returncode == 0, listed.stderr  # reading still works
    result = other_user.workbench("--state-dir", str(state), "run", "--", "true", cwd=checkout)
    error = one_error_line(result)
    assert "the build history is read-only" in error and "chmod u+w" in error


def test_database_or_disk_is_full_isone_error_line(small_disk: Path, tmp_path: Path) -> None:
    state = small_disk / "state"
    _history_with_builds(state, 1)
    filler = small_disk / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", str(state), "run", "--", "true"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=checkout,
        check=False,
    )
    error = one_error_line(result)
    assert "full" in error and ("free space" in error or "df -h" in error)
    filler.unlink()
    again = subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", str(state), "run", "--", "true"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=checkout,
        check=False,
    )
    assert again.returncode == 0, again.stderr  # space returned: it works again


def test_logs_stay_reachable_by_id_after_the_damaged_history_is_moved_aside(
    tmp_path: Path,
) -> None:
    """Issue 29: after `mv history.sqlite3 history.sqlite3.damaged` (the advice above), `logs 1`
    said "no build #1" although builds/1/build.log was there. The log folders are the record of
    what ran: the log is shown, with a line saying the history has no row for it."""
    state = tmp_path / "state"
    for word in ("first", "second"):
        ran = _cli(state, "run", "--name", word, "--", "echo", f"output of the {word} build")
        assert ran.returncode == 0, ran.stderr
    database = state / "history.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{database}{suffix}").exists():
            os.rename(f"{database}{suffix}", f"{database}{suffix}.damaged")
    third = _cli(state, "run", "--name", "third", "--", "echo", "output of the third build")
    assert third.returncode == 0, third.stderr
    assert "build #3 (third)" in third.stderr  # ids continue after the folders
    for build_id, word in ((1, "first"), (2, "second"), (3, "third")):
        shown = _cli(state, "logs", str(build_id))
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == f"output of the {word} build\n"
        raw = _cli(state, "logs", str(build_id), "--raw")
        assert raw.stdout == f"output of the {word} build\n"
        if build_id < 3:
            assert f"build #{build_id} is not in {database}" in shown.stderr, shown.stderr
    assert "no build #4" in one_error_line(_cli(state, "logs", "4"))
