"""A second Unix user for the permission tests: made with useradd, removed with userdel.

The suite runs as root, which no file mode stops, so "another user cannot read the log" can
only be shown by another user. Commands run as that user through `runuser -u USER --`. The
workbench itself runs as that user with an interpreter that user may execute: this one, or
the system's Python of the same version (the virtual environment's base interpreter may live
under a home directory no other user can enter), with the environment's packages on its path.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.supervision.lock import HOST_LOCK_ENV

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class OtherUser:
    """A user who is not the one running the tests."""

    name: str
    uid: int
    gid: int
    python: str | None
    """An interpreter this user can run the workbench with (None: the workbench cannot run
    as this user here; tests that need it skip)."""

    def run(
        self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run argv as this user (runuser), to its end."""
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/", **(env or {})}
        if HOST_LOCK_ENV in os.environ:  # the run's host-wide lock folder (tests/conftest.py)
            environment.setdefault(HOST_LOCK_ENV, os.environ[HOST_LOCK_ENV])
        return subprocess.run(
            ["runuser", "-u", self.name, "--", "env", "-i", *_pairs(environment), *argv],
            cwd=cwd or "/",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def workbench(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`workbench ARGS` as this user (`env`: more of its environment)."""
        if self.python is None:
            pytest.skip("no Python interpreter this second user may run the workbench with")
        paths = [str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
        return self.run(
            self.python,
            "-m",
            "workbench",
            *args,
            cwd=cwd,
            env={
                "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
                "PYTHONSAFEPATH": "1",
                **(env or {}),
            },
        )


def _pairs(environment: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in environment.items()]


def _python_for(name: str) -> str | None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    folders = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/local/bin", "/usr/bin"]
    found = [os.path.join(folder, f"python{version}") for folder in folders if folder]
    candidates = dict.fromkeys(
        os.path.realpath(path) for path in [sys.executable, *found] if os.path.exists(path)
    )
    for candidate in candidates:
        probe = subprocess.run(
            ["runuser", "-u", name, "--", candidate, "-c", "import sys; print(sys.version[:5])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.startswith(version):
            return candidate
    return None


@pytest.fixture(scope="session")
def other_user() -> Iterator[OtherUser]:
    """A fresh user (no home, no login shell), removed at the end of the session."""
    if os.geteuid() != 0:
        pytest.skip("making a second user needs root (the suite's CI runs as root)")
    if shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("needs useradd and runuser (Debian: passwd, util-linux)")
    name = f"wbt{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        entry = pwd.getpwnam(name)
        yield OtherUser(name, entry.pw_uid, entry.pw_gid, _python_for(name))
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder every user can reach (pytest's own are private to root), so that
    what stops the second user is the mode of the files under test, not the way to them."""
    folder = Path(tempfile.mkdtemp(prefix="workbench-shared-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
