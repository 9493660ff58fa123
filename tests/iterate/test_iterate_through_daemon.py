"""`workbench iterate` through a real nix-daemon by a user who is not root and whom the daemon
does not trust: the derivation and its source come from the daemon's store (the stand-in flake
of tests/iterate/standin_flake, built by the daemon's nixbld* users), the phases run in the
user's own workspace, and a second cycle after an edit rebuilds only what changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from iterate_loop import needs_tools
from needed_tools import needs
from nix_daemon_testing import (
    RunningDaemon,
    untrusting_daemon,  # noqa: F401 - the fixture `daemon`
)
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures
from standin_repo import write_standin_repo

pytestmark = [
    needs_tools,
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix-daemon", debian="nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]


def test_an_untrusted_user_iterates_through_the_daemon(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    daemon: RunningDaemon,
) -> None:
    repo = write_standin_repo(shared_tmp / "repo")
    for name in ("state", "xdg"):
        (shared_tmp / name).mkdir()
    owned = [repo.root, *repo.root.rglob("*"), shared_tmp / "state", shared_tmp / "xdg"]
    for path in owned:
        os.chown(path, other_user.uid, other_user.gid, follow_symlinks=False)
    env = {
        **daemon.client_env(shared_tmp / "xdg"),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }  # fmt: skip

    def iterate() -> dict:
        done = other_user.workbench(
            "--config", str(repo.configs), "--state-dir", str(shared_tmp / "state"),
            "iterate", "cpu", "-j", "2", "--json", "--no-smoke", env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout)

    first = iterate()
    # The derivation came from the daemon's store, asked for by this (untrusted) user.
    assert first["workspace"]["drv_path"].startswith("/nix/store/")
    assert f"user {other_user.name}" in daemon.log.read_text()
    assert f"user {other_user.name} (trusted)" not in daemon.log.read_text()
    assert first["build"]["state"] == "succeeded"
    assert len(first["ninja"]["sources"]) == 17  # 16 units and main.cc, in the user's workspace
    src = Path(first["workspace"]["build"]).parent
    assert src.stat().st_uid == other_user.uid
    # The user's edit: the next cycle compiles that unit alone.
    unit = src / "light_11.cc"
    unit.write_text(unit.read_text().replace("+ 11);", "+ 110);"))
    again = iterate()
    assert again["ninja"]["sources"] == ["light_11.cc"] and again["steps"] == []
