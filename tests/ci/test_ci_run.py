"""`.ci/run` runs the suite only from a tree that is a fresh clone's: the real script, in a real
git repository holding a copy of it and a test script that says it ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A committed repository with the real .ci/run and a scripts/test.sh that only reports."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy2(REPOSITORY / ".ci" / "run", repo / ".ci" / "run")
    (repo / "scripts" / "test.sh").write_text("echo the suite ran\n")
    (repo / ".gitignore").write_text(".venv/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "start")
    return repo


def _ci(repo: Path) -> subprocess.CompletedProcess[str]:
    # The ceiling keeps git from finding a repository above the temporary directory.
    environment = {**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent)}
    return subprocess.run(
        [str(repo / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environment,
    )


def test_a_clean_tree_runs_the_suite(clone: Path) -> None:
    (clone / ".venv").mkdir()  # ignored files (the venv the suite installs) are no difference
    result = _ci(clone)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the suite ran\n"


def test_an_untracked_file_stops_it_before_the_suite(clone: Path) -> None:
    (clone / "tests").mkdir()
    (clone / "tests" / "forgotten.py").write_text("x = 1\n")
    result = _ci(clone)
    assert result.returncode == 2
    assert "the suite ran" not in result.stdout
    assert "differs from a fresh clone" in result.stderr
    assert "?? tests/forgotten.py" in result.stderr


def test_a_modified_or_staged_file_stops_it(clone: Path) -> None:
    (clone / "scripts" / "test.sh").write_text("echo edited\n")
    result = _ci(clone)
    assert result.returncode == 2 and " M scripts/test.sh" in result.stderr
    _git(clone, "add", "scripts/test.sh")
    result = _ci(clone)
    assert result.returncode == 2 and "M  scripts/test.sh" in result.stderr


def test_outside_a_checkout_it_refuses(tmp_path: Path) -> None:
    copy = tmp_path / "export"
    (copy / ".ci").mkdir(parents=True)
    shutil.copy2(REPOSITORY / ".ci" / "run", copy / ".ci" / "run")
    result = _ci(copy)
    assert result.returncode == 2 and "not a git checkout" in result.stderr
