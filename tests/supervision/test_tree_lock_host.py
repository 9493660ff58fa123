"""One build per tree whatever the state directory (issue 29).

Before: the tree's lock lived in the state directory, so the same checkout built from two
state directories (two users, or one user's `--state-dir`) ran twice at once, with only the
generic "other build processes" warning. Now every tree is also locked in a host-wide folder
(lock.host_lock_directory), and the refusal names the build that holds it: its state
directory, or the other user.
"""

from __future__ import annotations

import os
from pathlib import Path

from cli_errors import one_error_line
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures
from supervised import Bench, build_id_from


def _checkout(root: Path) -> Path:
    checkout = root / "checkout"
    (checkout / ".git").mkdir(parents=True)
    return checkout


def test_the_same_tree_from_two_state_directories_is_refused(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    first, second = Bench(tmp_path / "one"), Bench(tmp_path / "two")
    try:
        started = first.run("run", "-d", "--name", "first", "--", "sleep", "60", cwd=checkout)
        assert started.returncode == 0, started.stderr
        build_id = build_id_from(started.stderr)
        refused = one_error_line(second.run("run", "--name", "second", "--", "true", cwd=checkout))
        assert (
            f"build #{build_id} (first) of the state directory {first.state} is already "
            f"building {checkout}"
        ) in refused, refused
        assert f"`workbench --state-dir {first.state} attach {build_id}`" in refused
        assert not (second.state / "builds" / "1").exists()  # nothing ran
        stop = first.run("stop", str(build_id), "--grace", "2", timeout=60)
        assert stop.returncode == 0, stop.stderr
        again = second.run("run", "--name", "second", "--", "true", cwd=checkout)
        assert again.returncode == 0, again.stderr
    finally:
        first.cleanup()
        second.cleanup()


def test_another_users_build_of_the_tree_is_named(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    checkout = _checkout(shared_tmp)
    checkout.chmod(0o777)
    theirs = shared_tmp / "their-state"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, other_user.uid, other_user.gid)
    started = other_user.workbench(
        "--state-dir",
        str(theirs),
        "run",
        "-d",
        "--name",
        "theirs",
        "--",
        "sleep",
        "60",
        cwd=checkout,
    )
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    mine = Bench(tmp_path / "state")
    try:
        refused = one_error_line(mine.run("run", "--", "true", cwd=checkout))
        assert (
            f"user {other_user.name}'s build #{build_id} (theirs) (state directory {theirs}) "
            f"is already building {checkout}"
        ) in refused, refused
    finally:
        other_user.workbench("--state-dir", str(theirs), "stop", str(build_id), "--grace", "1")
        mine.cleanup()
