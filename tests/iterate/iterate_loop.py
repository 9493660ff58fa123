"""What the iterate tests share: the set-up of one loop (configs, source, series, CLI)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from needed_tools import needs
from patch_fixture import FixtureSeries
from supervision.supervised import Bench

from workbench.iterate import session

needs_tools = needs("git", "cmake", "ninja", "g++", "nix", "nm")


@dataclass
class Loop:
    """One test's iterate set-up: configs, the pristine source, the series, the CLI."""

    configs: Path
    source: Path
    series: FixtureSeries
    bench: Bench
    repo: Path | None = None
    """The stand-in flake's directory (configs/ and patches/ are in it)."""
    target: str = "cpu"

    @property
    def state(self) -> Path:
        return self.bench.state

    @property
    def workspace(self) -> Path:
        return self.state / "workspaces" / self.target

    @property
    def src(self) -> Path:
        return self.workspace / "src"

    @property
    def build(self) -> Path:
        return self.src / "build"

    def iterate(
        self, *extra: str, target: str | None = None, timeout: float = 240, json: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`workbench iterate TARGET --json -j 2 ...` to its end."""
        argv = ["--config", str(self.configs), "iterate", target or self.target, "-j", "2"]
        return self.bench.run(*argv, *(["--json"] if json else []), *extra, timeout=timeout)

    def iterate_json(self, *extra: str, **options) -> dict:
        result = self.iterate(*extra, **options)
        assert result.returncode == 0, result.stderr[-4000:]
        return json.loads(result.stdout)

    def prepare(self, **options) -> session.Prepared:
        """session.prepare in this process, as a cycle's first step (no build)."""
        return session.prepare(self.configs, self.state, self.target, None, _quiet, **options)

    def make_workspace(self) -> None:
        """The workspace as a first iterate leaves it, without its build: the derivation's
        phases (`python -m workbench.iterate.phases ... --no-build`, the program a first
        cycle runs under the supervisor) run to configure, then stop."""
        argv = list(session.plan(self.prepare(), 2, "--jobs").argv)
        assert argv[1:3] == ["-m", "workbench.iterate.phases"], argv
        done = subprocess.run(
            [*argv, "--no-build"], env=self.bench.env(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.src, capture_output=True, text=True, check=True
        ).stdout


def _quiet(_: str) -> None:
    pass


def stamps(tree: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a tree (outside .git) with its mtime and content."""
    found = {}
    for path in sorted(tree.rglob("*")):
        if ".git" in path.relative_to(tree).parts or not path.is_file():
            continue
        found[str(path.relative_to(tree))] = (path.stat().st_mtime_ns, path.read_bytes())
    return found
