"""Fixtures of the iterate tests: the stand-in flake's repository, a state directory, the CLI.

tests/iterate/standin_repo.py copies the stand-in flake (a STAND-IN for the builder flake's
onnxruntime-cpu, built by real Nix) beside configs/, the fixture series and the fixture source.
The tests run the real `workbench` CLI (tests/supervision/supervised.py's Bench: every process
it starts is killed at the end), which runs real Nix, bash, git, cmake, ninja and g++ under the
real supervisor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from iterate_loop import Loop
from nix_testing import nix_env
from standin_repo import write_standin_repo
from supervision.supervised import Bench


@pytest.fixture
def loop(bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Loop:
    """The stand-in repository (16 units, -O0 for quick builds), a state directory, the CLI
    (tests/conftest.py's `bench`, with Nix's environment)."""
    repo = write_standin_repo(tmp_path / "repo")
    environment = nix_env(tmp_path)
    # Nix's configuration here too: tests call session.prepare in-process, which may ask Nix
    # for the derivation.
    for name in ("NIX_CONFIG", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, environment[name])
    bench.extra_env.update(environment)
    return Loop(repo.configs, repo.source, repo.series, bench, repo=repo.root)
