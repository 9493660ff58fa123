"""`.ci/run` runs the suite only from a tree that is a fresh clone's: the real script, in a real
git repository holding a copy of it and a test script that says it ran."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from needed_tools import needs

REPOSITORY = Path(__file__).resolve().parents[2]

pytestmark = needs("git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


# The stand-in for scripts/test.sh: it says it ran, and where Hypothesis would keep its example
# database in this environment (asked of the real Hypothesis, with this suite's interpreter).
STAND_IN_SUITE = f"""\
echo the suite ran
{sys.executable} -c 'from hypothesis.configuration import storage_directory as s; \\
import os; p = s().path; print("database", p, os.path.exists(p) and os.listdir(p))'
"""


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A committed repository with the real .ci/run and venv lister, the real .gitignore, and
    a scripts/test.sh that only reports."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy2(REPOSITORY / ".ci" / "run", repo / ".ci" / "run")
    shutil.copy2(REPOSITORY / "scripts" / "venv_contents.py", repo / "scripts")
    shutil.copy2(REPOSITORY / ".gitignore", repo / ".gitignore")
    (repo / "scripts" / "test.sh").write_text(STAND_IN_SUITE)
    (repo / "pyproject.toml").write_text('[project]\nname = "stand-in"\n')
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
    (clone / ".venv").mkdir()  # an empty venv folder: scripts/test.sh makes the venv in it
    result = _ci(clone)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("the suite ran\n")


def test_caches_rebuilt_from_the_sources_are_no_difference(clone: Path) -> None:
    (clone / "scripts" / "__pycache__").mkdir()
    (clone / "scripts" / "__pycache__" / "venv_contents.cpython-311.pyc").write_bytes(b"x")
    (clone / ".pytest_cache").mkdir()
    (clone / ".ruff_cache").mkdir()
    result = _ci(clone)
    assert result.returncode == 0, result.stderr


def test_other_ignored_files_stop_it(clone: Path) -> None:
    """build/, dist/ and result links are ignored by git, and a fresh clone has none of them."""
    (clone / "build").mkdir()
    (clone / "build" / "stale.py").write_text("x = 1\n")
    (clone / "result-cpu").symlink_to(clone)
    result = _ci(clone)
    assert result.returncode == 2
    assert "the suite ran" not in result.stdout
    assert "ignored files that a fresh clone" in result.stderr
    assert "\nbuild/\n" in result.stderr and "\nresult-cpu\n" in result.stderr


def test_hypothesis_saved_examples_are_neither_read_nor_written(clone: Path) -> None:
    """A fresh clone has no example database: the suite gets an empty one of its own, and the
    tree's .hypothesis/ is left as it was."""
    saved = clone / ".hypothesis" / "examples" / "0123abcd"
    saved.mkdir(parents=True)
    (saved / "example").write_bytes(b"a saved failing example")
    result = _ci(clone)
    assert result.returncode == 0, result.stderr
    database = result.stdout.splitlines()[1].split()
    assert database[0] == "database" and database[2] == "[]", result.stdout
    assert not Path(database[1]).is_relative_to(clone)
    assert not Path(database[1]).exists()  # removed after the run
    assert [p.name for p in (clone / ".hypothesis").rglob("*")] == [
        "examples",
        "0123abcd",
        "example",
    ]


def _venv_as_test_sh_makes_it(repo: Path) -> Path:
    """A venv (without pip: quick) with the record scripts/test.sh keeps beside the ones it
    makes: the same lister, the same file, the same pyproject stamp."""
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    listing = subprocess.run(
        [str(venv / "bin" / "python"), "scripts/venv_contents.py"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (venv / ".installed-contents").write_text(listing)
    digest = hashlib.sha256((repo / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (venv / f".installed-{digest}").touch()
    return venv


def _wheel(directory: Path, name: str, version: str) -> Path:
    """A real wheel of one module (what `pip wheel` makes of a one-file project)."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": b"VALUE = 1\n",
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        ),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [f"{path},," for path in files] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def test_a_venv_as_made_is_accepted_and_one_installed_into_by_hand_is_not(
    clone: Path, tmp_path: Path
) -> None:
    venv = _venv_as_test_sh_makes_it(clone)
    accepted = _ci(clone)
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.startswith("the suite ran\n")

    wheel = _wheel(tmp_path, "handmade", "1.0")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    refused = _ci(clone)
    assert refused.returncode == 2
    assert "the suite ran" not in refused.stdout
    assert ".venv differs from what scripts/test.sh installed" in refused.stderr
    assert "> handmade==1.0" in refused.stderr
    assert "rm -rf .venv" in refused.stderr


def test_a_venv_without_a_record_or_for_another_pyproject_is_refused(clone: Path) -> None:
    venv = _venv_as_test_sh_makes_it(clone)
    (clone / "pyproject.toml").write_text('[project]\nname = "stand-in"\nversion = "2"\n')
    _git(clone, "commit", "-q", "-am", "a new dependency set")
    refused = _ci(clone)
    assert refused.returncode == 2 and "for another pyproject.toml" in refused.stderr
    (venv / ".installed-contents").unlink()
    refused = _ci(clone)
    assert refused.returncode == 2
    assert ".venv was not made by scripts/test.sh" in refused.stderr
    assert "rm -rf .venv" in refused.stderr


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
