"""Sizes and push_to through a real nix-daemon, by a user who is not root and whom the daemon
does not trust: the build's outputs and closure are measured through the daemon (nix path-info
answers from its store), and hosts.toml's push_to copies them, with their closure, into a
file:// binary cache this user owns, pushed by the build's supervisor and recorded once.

The daemon is tests/nix_daemon_testing.py's (own nix.conf and socket, nixbld* builders), the
user tests/second_user.py's, the flake the plan and push tests' stand-in (tests/cache_flake.py:
a top whose output names its dependency, so the closure is two paths).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cache_flake import DEP, DEP_BYTES, TOP, make_cache_flake
from needed_tools import needs
from nix_daemon_testing import (
    RunningDaemon,
    untrusting_daemon,  # noqa: F401 - the fixture `daemon`
)
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures
from supervised import build_id_from

from workbench.planning.launch import host_platform

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix-daemon", debian="nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]


def test_an_untrusted_users_daemon_build_is_sized_and_pushed_with_its_closure(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    daemon: RunningDaemon,
) -> None:
    flake = make_cache_flake(shared_tmp / "flake", host_platform())
    cache_dir = shared_tmp / "cache"
    cache = f"file://{cache_dir}"
    hosts = flake / "configs" / "hosts.toml"
    asked = f'local_builds = true\npush_to = "{cache}"'
    hosts.write_text(hosts.read_text().replace("local_builds = true", asked))
    for name in ("state", "xdg", "cache"):
        (shared_tmp / name).mkdir()
    for path in [flake, *flake.rglob("*"), *(shared_tmp / n for n in ("state", "xdg", "cache"))]:
        os.chown(path, other_user.uid, other_user.gid)

    def as_user(*args: str):
        return other_user.workbench(
            "--config", str(flake / "configs"), "--state-dir", str(shared_tmp / "state"), *args,
            cwd=flake, env=daemon.client_env(shared_tmp / "xdg"),
        )  # fmt: skip

    doctor = json.loads(as_user("doctor", "--json").stdout)["nix_store"]
    assert doctor["via_daemon"] and doctor["trusted"] is False, doctor
    built = as_user("build", "cpu", "-C", str(flake), "--jobs", "1")
    # The build succeeds; the stand-in's output is not a whole cpu flavour (no lib/, include/),
    # which the layout check after it says: exit 1 for that alone.
    assert "is not a whole cpu build" in built.stderr, built.stderr[-3000:]
    build_id = build_id_from(built.stderr)
    # The daemon built it as nixbld*, for this user (its log names the user, untrusted).
    assert f"user {other_user.name}" in daemon.log.read_text()
    history = json.loads(as_user("history", "--json").stdout)["builds"]
    (record,) = [b for b in history if b["id"] == build_id]
    assert record["state"] == "succeeded"
    (output,) = record["artefacts"]["outputs"]
    top = output["path"]
    assert top.endswith(TOP) and output["link"] == "result-onnxruntime-cpu"
    # Measured through the daemon's store: the top is a line, its closure holds the dependency.
    assert 0 < output["nar_size"] < 4096
    assert output["closure_size"] > DEP_BYTES + output["nar_size"]
    # Pushed by the build's supervisor (the command followed it), recorded once.
    assert f"workbench: pushed {top} to {cache}" in built.stderr, built.stderr[-3000:]
    pushes = json.loads(as_user("push", str(build_id), "--list", "--json").stdout)["pushes"]
    assert [(p["output"], p["store"]) for p in pushes] == [(top, cache)]
    dep = (Path(top).read_text()).strip()
    assert dep.endswith(DEP)
    for path in (top, dep):
        narinfo = cache_dir / f"{Path(path).name.split('-', 1)[0]}.narinfo"
        assert narinfo.is_file(), path
        assert narinfo.stat().st_uid == other_user.uid  # written by this user's nix copy
