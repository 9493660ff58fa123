"""Exact edges of a sandboxed Nix build (Nix's Linux default, `sandbox = true`): the builder's
ninja works in `/build`, which exists only in its own mount namespace, and the supervisor still
reads its `.ninja_log` and graph (through the process's own view, `workbench.analysis.recorder`).

No nixpkgs here: the derivation's builder is `/bin/sh` with the machine's `/usr` and `/bin`
bind-mounted into the sandbox (`sandbox-paths`), running the machine's ninja on a manifest whose
longest chain is known (tests/analysis/test_edges_real_ninja.py's MANIFEST)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from analysis.test_edges_real_ninja import MANIFEST
from needed_tools import needs
from nix_testing import NIX_CONFIG_BUILD_USERS, ensure_build_users
from supervision.supervised import Bench

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix-build", "ninja"),
    pytest.mark.skipif(os.geteuid() != 0, reason="single-user Nix writes /nix/store as root"),
]

EXPRESSION = """{ salt, manifest }:
derivation {
  name = "wb-sandboxed-ninja";
  inherit salt manifest;
  system = builtins.currentSystem;
  PATH = "/usr/bin:/bin";
  builder = "/bin/sh";
  args = [ "-c" ''
    set -e
    mkdir build
    printf '%s' "$manifest" > build/build.ninja
    TERM=dumb ninja -C build -j3
    pwd > $out
  '' ];
}
"""

SANDBOXED = (
    NIX_CONFIG_BUILD_USERS.replace("sandbox = false", "sandbox = true")
    + "\nsandbox-paths = /bin /usr /lib /lib64"
)


def test_a_sandboxed_nix_builds_ninja_edges_are_recorded(bench: Bench, tmp_path: Path) -> None:
    ensure_build_users()
    expression = tmp_path / "sandboxed.nix"
    expression.write_text(EXPRESSION)
    bench.extra_env.update({"NIX_CONFIG": SANDBOXED})
    bench.extra_env.pop("NIX_REMOTE", None)
    argv = ["nix-build", str(expression), "--no-out-link"]
    argv += ["--argstr", "salt", uuid.uuid4().hex, "--argstr", "manifest", MANIFEST]
    built = bench.run("run", "--", *argv, cwd=tmp_path, timeout=240)
    assert built.returncode == 0, built.stderr[-3000:]
    store_path = built.stdout.strip().splitlines()[-1]
    # The builder ran in the sandbox's /build: a directory the supervisor cannot name.
    assert Path(store_path).read_text().strip() == "/build"
    assert not Path("/build/build/.ninja_log").exists()
    build_id = bench.latest_id()
    with bench.history() as history:
        rows = {row.outputs[0]: row for row in history.edges(build_id)}
    assert sorted(rows) == sorted(
        ["chain_1", "chain_2", "chain_3", "wide_1", "wide_2", "short_1", "short_2", "final"]
    )
    assert rows["chain_2"].deps == ("chain_1",)  # the graph, read through the sandbox
    report = bench.json("report", str(build_id), "--format", "json")
    edges = report["builds"][0]["edges"]
    assert edges["ninja_log"] == "/build/build/.ninja_log"  # ninja's own name for it
    chain = [edge["output"] for edge in edges["critical_path"]["edges"]]
    assert chain == ["chain_1", "chain_2", "chain_3", "final"]
