"""screenshots/regenerate.py runs its real builds in a state directory of its own: private
(0700), new for each run, removed afterwards, with its own per-user config directory. Before,
every run used the fixed $TMPDIR/workbench-screenshots (removed and refilled by each run: two
runs at once overwrote each other's builds) and read the user's own settings."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "screenshots"))

import regenerate  # noqa: E402

from workbench.configs.paths import USER_CONFIG_ENV  # noqa: E402


def _private(path: Path) -> bool:
    found = path.lstat()
    return (
        stat.S_ISDIR(found.st_mode)
        and stat.S_IMODE(found.st_mode) == 0o700
        and found.st_uid == os.getuid()
    )


def test_each_run_has_its_own_private_state_and_user_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    users = tmp_path / "the-users-own-config"
    monkeypatch.setenv(USER_CONFIG_ENV, str(users))
    with regenerate.private_state() as first, regenerate.private_state() as second:
        assert first != second  # two runs at once
        assert first.parent == second.parent == tmp_path
        assert _private(first) and _private(second)
        config = Path(os.environ[USER_CONFIG_ENV])
        assert config.parent == second and _private(config)  # not the user's settings
        assert (first / "user-config").is_dir()
    assert not first.exists() and not second.exists()
    assert os.environ[USER_CONFIG_ENV] == str(users)  # the user's again afterwards
    assert not hasattr(regenerate, "STATE")  # no fixed, shared place left
