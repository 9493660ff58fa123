"""`workbench config set` on files as users keep them: a symlinked settings.toml, a read-only
one, CRLF line endings, a folder the user may not write; and settings files no parser should
crash on (5000-digit numbers, 5000-deep nesting). Each failure is one `workbench: error:` line
with exit status 2, and the file is left byte for byte as it was."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

from cli_errors import one_error_line
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures

REPO = Path(__file__).resolve().parents[2]


def _workbench(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_a_symlinked_settings_file_is_edited_through_the_link(config_copy: Path) -> None:
    settings = config_copy / "settings.toml"
    target = config_copy.parent / "dotfiles" / "workbench-settings.toml"
    target.parent.mkdir()
    settings.rename(target)
    settings.symlink_to(target)
    result = _workbench(config_copy, "config", "set", "nvcc_threads", "7")
    assert result.returncode == 0, result.stderr
    assert settings.is_symlink() and settings.resolve() == target
    assert "nvcc_threads = 7" in target.read_text()
    assert not list(target.parent.glob(".*.tmp")) and not list(config_copy.glob(".*.tmp"))


def test_the_files_mode_is_kept(config_copy: Path) -> None:
    settings = config_copy / "settings.toml"
    settings.chmod(0o640)
    assert _workbench(config_copy, "config", "set", "nvcc_threads", "3").returncode == 0
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640


def test_a_read_only_file_is_refused_and_left_alone(config_copy: Path) -> None:
    settings = config_copy / "settings.toml"
    before = settings.read_bytes()
    settings.chmod(0o444)
    error = one_error_line(_workbench(config_copy, "config", "set", "nvcc_threads", "7"))
    assert "read-only (mode 0444): refused" in error and "chmod u+w" in error
    assert settings.read_bytes() == before
    assert stat.S_IMODE(settings.stat().st_mode) == 0o444


def test_crlf_line_endings_are_kept(config_copy: Path) -> None:
    settings = config_copy / "settings.toml"
    settings.write_bytes(settings.read_bytes().replace(b"\n", b"\r\n"))
    assert _workbench(config_copy, "config", "set", "nvcc_threads", "5").returncode == 0
    data = settings.read_bytes()
    assert b"nvcc_threads = 5\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")  # no bare LF was written
    shown = _workbench(config_copy, "config", "get", "nvcc_threads")
    assert shown.stdout == "5\n"


def test_an_unwritable_config_folder_isone_error_line(
    shared_tmp: Path,  # noqa: F811
    other_user: OtherUser,  # noqa: F811
) -> None:
    """The folder belongs to root (0755): the second user may read the settings, not edit."""
    config_copy = shared_tmp / "configs"
    shutil.copytree(REPO / "configs", config_copy)
    (shared_tmp / "patches").mkdir()
    for path in config_copy.iterdir():
        path.chmod(0o644)
    settings = config_copy / "settings.toml"
    before = settings.read_bytes()
    shown = other_user.workbench("--config", str(config_copy), "config", "get", "nvcc_threads")
    assert shown.returncode == 0, shown.stderr
    result = other_user.workbench(
        "--config", str(config_copy), "config", "set", "nvcc_threads", "9"
    )
    error = one_error_line(result)
    assert "cannot write there" in error or "read-only" in error
    assert "--config DIR" in error or "chmod u+w" in error
    assert settings.read_bytes() == before


def test_a_5000_digit_setting_is_refused(config_copy: Path) -> None:
    settings = config_copy / "settings.toml"
    before = settings.read_bytes()
    error = one_error_line(_workbench(config_copy, "config", "set", "ninja_jobs", "9" * 5000))
    assert "refused (out of range)" in error and len(error) < 400
    assert settings.read_bytes() == before
    text = before.decode().replace("max_jobs = ", "max_jobs = " + "9" * 5000 + "  # ", 1)
    settings.write_text(text)
    error = one_error_line(_workbench(config_copy, "config", "show"))
    line = 1 + text[: text.index("9" * 5000)].count("\n")
    assert f"settings.toml:{line}:" in error and "a number with 5000 digits" in error


def test_deeply_nested_toml_is_refused(config_copy: Path) -> None:
    settings = config_copy / "settings.toml"
    text = settings.read_text()
    nested = "[" * 5000 + "]" * 5000
    text = text.replace("cuda_architectures = ", f"cuda_architectures = {nested}  # ", 1)
    settings.write_text(text)
    for args in (("config", "show"), ("config", "set", "ninja_jobs", "4")):
        error = one_error_line(_workbench(config_copy, *args))
        assert "nested more than 100 levels deep" in error
    assert settings.read_text() == text
