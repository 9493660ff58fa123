"""`workbench smoke NAME` on a variant a user who is not root built through a real nix-daemon
that does not trust them: the output is the daemon's (built by nixbld*), the smoke runs its
bin/python as that user.

The variant's output is a STAND-IN: bin/python runs the second user's interpreter with the
STAND-IN tests/standins/standin-onnxruntime-python (no ONNX Runtime can be built or installed
here), which reports its release from STANDIN_ORT_VERSION; the daemon (tests/nix_daemon_testing
.py), the user (tests/second_user.py), the link, the probe and its child process are real.
"""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from pathlib import Path

import pytest
from needed_tools import needs
from nix_daemon_testing import (
    RunningDaemon,
    untrusting_daemon,  # noqa: F401 - the fixture `daemon`
)
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures

from workbench.planning.launch import host_platform

REPO = Path(__file__).resolve().parents[2]
STANDIN_MODULE = REPO / "tests" / "standins" / "standin-onnxruntime-python"
CPU = "onnxruntime-python313-cpu-avx2"

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix-daemon", debian="nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]

FLAKE = """{{
  outputs = {{ self }}: {{
    packages.{system}.{name} = derivation {{
      name = "standin-{name}"; system = "{system}"; builder = "/bin/sh"; args = [ ./build.sh ];
      PATH = "/usr/bin:/bin"; wrapper = builtins.readFile ./python.sh;
    }};
  }};
}}
"""
BUILD = 'mkdir -p $out/bin\nprintf "%s" "$wrapper" > $out/bin/python\nchmod +x $out/bin/python\n'


def test_a_variant_an_untrusted_user_built_through_the_daemon_is_smoked(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    daemon: RunningDaemon,
) -> None:
    if other_user.python is None:
        pytest.skip("no Python interpreter the second user may run")
    flake = shared_tmp / "flake"
    flake.mkdir()
    # The stand-in module first; the probe's numpy from this suite's environment.
    path = os.pathsep.join([str(STANDIN_MODULE), sysconfig.get_paths()["purelib"]])
    (flake / "python.sh").write_text(
        f'#!/bin/sh\nPYTHONPATH="{path}" STANDIN_ORT_VERSION=1.23.2 '
        f'exec "{other_user.python}" "$@"\n'
    )
    (flake / "build.sh").write_text(BUILD)
    (flake / "flake.nix").write_text(FLAKE.format(system=host_platform(), name=CPU))
    shutil.copytree(REPO / "configs", flake / "configs")
    (flake / "patches").mkdir()
    model = flake / "model.onnx"
    model.write_bytes(b"the stand-in module runs no model")
    for name in ("state", "xdg"):
        (shared_tmp / name).mkdir()
    for path in [flake, *flake.rglob("*"), shared_tmp / "state", shared_tmp / "xdg"]:
        os.chown(path, other_user.uid, other_user.gid)
    env = {**daemon.client_env(shared_tmp / "xdg"), "ONNX_TEST_MODEL": str(model)}

    def as_user(*args: str):
        return other_user.workbench(
            "--config", str(flake / "configs"), "--state-dir", str(shared_tmp / "state"), *args,
            cwd=flake, env=env,
        )  # fmt: skip

    # --force: a Nix target's lock is the host's, whichever user or state directory builds it,
    # and other tests build this variant too.
    built = as_user("build", CPU, "-C", str(flake), "--jobs", "1", "--force")
    assert f"build #1 ({CPU}) succeeded" in built.stderr, built.stderr[-3000:]
    assert f"user {other_user.name}" in daemon.log.read_text()
    assert f"user {other_user.name} (trusted)" not in daemon.log.read_text()
    link = flake / f"result-{CPU}"
    output = os.readlink(link)
    assert output.startswith("/nix/store/") and os.stat(output).st_uid == 0  # the daemon's
    smoke = as_user("smoke", "--json", CPU)
    assert smoke.stdout.startswith("{"), smoke.stderr[-3000:]
    result = json.loads(smoke.stdout)
    assert smoke.returncode == 0, result["output_tail"]
    assert result["status"] == "passed"
    # It ran the daemon-built output's bin/python (through this user's link), as this user.
    assert result["target"] == f"{link}/bin/python"
    check = result["check"]
    assert check["onnxruntime"] == "1.23.2" and check["executable"] == other_user.python
    assert [run["ok"] for run in check["runs"]] == [True]
