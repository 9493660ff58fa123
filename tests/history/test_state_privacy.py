"""Private state: 0700 directories and 0600 files whatever the umask, no links followed, a state
directory of another user (or one others can write) refused; build ids never reuse a log folder.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from recorded_builds import new_build
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures

from workbench.history.private_state import StateError
from workbench.history.store import History, build_directory

REPO = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask there is: nothing the workbench creates may depend on it."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _cli(state: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "WORKBENCH_STATE_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", os.fsdecode(state), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or REPO,
        env=environment,
        check=False,
    )


def test_state_is_private_whatever_the_umask(tmp_path: Path, open_umask: None) -> None:
    state = tmp_path / "state"
    with History(state) as history:
        record = history.create(new_build())
    assert _mode(state) == 0o700
    assert _mode(state / "builds") == 0o700
    assert _mode(build_directory(state, record.id)) == 0o700
    assert _mode(state / "history.sqlite3") == 0o600
    for suffix in ("-wal", "-shm"):
        sidecar = state / f"history.sqlite3{suffix}"
        if sidecar.exists():
            assert _mode(sidecar) == 0o600, suffix


def test_a_real_build_leaves_only_private_files(tmp_path: Path, open_umask: None) -> None:
    """A whole `workbench run`: logs, lock and database are 0600 in 0700 folders."""
    state = tmp_path / "state"
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    result = _cli(state, "run", "--", "sh", "-c", "echo secret-token", cwd=checkout)
    assert result.returncode == 0, result.stderr
    for root, directories, files in os.walk(state):
        for name in directories:
            assert _mode(Path(root) / name) == 0o700, Path(root) / name
        for name in files:
            assert _mode(Path(root) / name) == 0o600, Path(root) / name
    assert _mode(state) == 0o700


def test_another_user_reads_no_log_and_takes_no_lock(
    shared_tmp: Path,  # noqa: F811
    other_user: OtherUser,  # noqa: F811
) -> None:
    state = shared_tmp / "state"
    checkout = shared_tmp / "checkout"
    # The way there is open: what stops the other user below is the state's own modes.
    assert other_user.run("ls", str(shared_tmp)).returncode == 0
    (checkout / ".git").mkdir(parents=True)
    result = _cli(state, "run", "--", "sh", "-c", "echo secret-token", cwd=checkout)
    assert result.returncode == 0, result.stderr
    log = next(state.glob("builds/*/build.log"))
    assert "secret-token" in log.read_text()
    assert other_user.run("cat", str(log)).returncode != 0
    lock = next(state.glob("locks/*.lock"))
    # flock(1) needs only to open the file: with 0644 in a 0755 folder another user could
    # take a shared lock and block the checkout's builds.
    taken = other_user.run("flock", "--nonblock", "--shared", str(lock), "true")
    assert taken.returncode != 0
    assert "Permission denied" in taken.stderr


def test_a_state_directory_of_another_user_is_refused(
    tmp_path: Path,
    other_user: OtherUser,  # noqa: F811
) -> None:
    state = tmp_path / "theirs"
    state.mkdir(mode=0o700)
    os.chown(state, other_user.uid, other_user.gid)
    result = _cli(state, "status")
    assert result.returncode == 2
    assert result.stderr.startswith("workbench: error: ")
    assert f"owned by {other_user.name}, not by you" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert sorted(os.listdir(state)) == []  # nothing written into it


def test_a_state_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "shared"
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(StateError, match=r"writable by others \(mode 0777\)"):
        History(state)
    result = _cli(state, "history")
    assert result.returncode == 2 and "writable by others" in result.stderr
    assert os.listdir(state) == []


def test_a_loose_state_directory_of_ones_own_is_tightened(tmp_path: Path) -> None:
    state = tmp_path / "mine"
    state.mkdir()
    state.chmod(0o755)
    History(state).close()
    assert _mode(state) == 0o700


def test_a_planted_link_is_never_written_through(tmp_path: Path) -> None:
    """A link where a build's log goes, or where the database is, is refused: the file it
    points at is left as it was."""
    state = tmp_path / "state"
    elsewhere = tmp_path / "victim.txt"
    elsewhere.write_text("precious\n")
    with History(state) as history:
        record = history.create(new_build())
    directory = build_directory(state, record.id)
    os.symlink(elsewhere, directory / "build.log")
    from workbench.history.private_state import open_private

    with pytest.raises(StateError, match="is a symbolic link"):
        open_private(directory / "build.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    assert elsewhere.read_text() == "precious\n"

    other = tmp_path / "other-state"
    other.mkdir(mode=0o700)
    os.symlink(elsewhere, other / "history.sqlite3")
    with pytest.raises(StateError, match="symbolic link"):
        History(other)
    assert elsewhere.read_text() == "precious\n"


def test_a_planted_build_log_link_fails_the_build_not_the_target(tmp_path: Path) -> None:
    """The supervisor itself refuses to open a planted link (the next build's folder is made
    fresh, so the link is planted in the build's own folder right after creation)."""
    state = tmp_path / "state"
    elsewhere = tmp_path / "victim.txt"
    elsewhere.write_text("precious\n")
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    with History(state) as history:
        history.create(new_build())
    # The next build gets id 2: plant the link in its folder-to-be's place first. The
    # history must skip the taken folder rather than write through it.
    (state / "builds" / "2").mkdir(mode=0o700)
    os.symlink(elsewhere, state / "builds" / "2" / "build.log")
    result = _cli(state, "run", "--", "sh", "-c", "echo from-the-build", cwd=checkout)
    assert result.returncode == 0, result.stderr
    assert "build #3" in result.stderr
    assert elsewhere.read_text() == "precious\n"
    assert "from-the-build" in (state / "builds" / "3" / "build.log").read_text()


def test_build_ids_never_reuse_a_log_folder(tmp_path: Path) -> None:
    """The history moved aside (as its own error message advises): ids go on after the logs."""
    state = tmp_path / "state"
    with History(state) as history:
        first = history.create(new_build())
        second = history.create(new_build())
    assert (first.id, second.id) == (1, 2)
    (build_directory(state, 2) / "build.log").write_text("the old build's log\n")
    for path in state.glob("history.sqlite3*"):
        path.rename(path.with_name(path.name + ".aside"))
    with History(state) as history:
        third = history.create(new_build())
    assert third.id == 3
    assert third.log_path == str(build_directory(state, 3) / "build.log")
    assert (build_directory(state, 2) / "build.log").read_text() == "the old build's log\n"
    # A folder left without a row (a crash between the two) is skipped too.
    (state / "builds" / "4").mkdir()
    with History(state) as history:
        assert history.create(new_build()).id == 5


def test_a_non_utf8_state_path_is_one_error_line(tmp_path: Path) -> None:
    state = Path(os.fsdecode(os.fsencode(tmp_path) + b"/st\xffate"))
    result = _cli(state, "status")
    assert result.returncode == 2
    assert result.stderr.startswith("workbench: error: ") and "not UTF-8" in result.stderr
    assert result.stderr.count("\n") == 1
    assert "st\\xffate" in result.stderr


def test_opening_a_second_history_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    """The TUI keeps one History open (the build screen's poll) and opens others beside it
    (the History screen, a launch from `t`). Checking the state files by opening and closing
    them dropped every POSIX lock the process held on them, the kept connection's included
    (SQLite's "How To Corrupt", 2.2): the next process to close its own connection took the
    database for unused and deleted its -wal and -shm, and the kept connection went on with
    the deleted ones. A TUI open since the start of a build then listed no build started after
    (seen: a History screen of 2 builds while `status` listed 4), and what it wrote was lost."""
    state = tmp_path / "state"
    kept = History(state)
    kept.create(new_build("first"))
    History(state).close()  # another in this process: a screen's load, a launch
    written = _cli(state, "run", "--name", "second", "--", "true")  # another process writes
    assert written.returncode == 0, written.stderr
    assert [build.name for build in kept.builds()] == ["second", "first"]
    assert Path(f"{state}/history.sqlite3-wal").exists()  # still in use: not deleted
    kept.create(new_build("third"))
    listed = _cli(state, "history", "--json")
    assert listed.returncode == 0, listed.stderr
    names = [build["name"] for build in json.loads(listed.stdout)["builds"]]
    assert names == ["third", "second", "first"]  # what the kept connection wrote is there
    kept.close()
