"""workbench.atomic_file: the one way files are replaced whole (readers never see half)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from workbench.atomic_file import replace_file


def test_the_new_file_has_the_mode_asked_for_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "settings.toml"
    target.write_text("old\n")
    old_umask = os.umask(0o077)
    try:
        replace_file(target, "shared = true\n", mode=0o644)
    finally:
        os.umask(old_umask)
    assert target.read_text() == "shared = true\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.toml"]


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    target = tmp_path / "state.json"
    (tmp_path / f".state.json.{os.getpid()}.tmp").symlink_to(victim)
    replace_file(target, b"{}\n")
    assert victim.read_text() == "keep me\n"
    assert target.read_text() == "{}\n"
    assert not target.is_symlink()


def test_a_link_in_the_targets_place_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    target = tmp_path / "keeper.json"
    target.symlink_to(victim)
    replace_file(target, b'{"pid": 1}', durable=False)
    assert victim.read_text() == "keep me\n"
    assert target.read_text() == '{"pid": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_full_disk_leaves_the_old_file_whole_and_no_temporary(small_disk: Path) -> None:
    target = small_disk / "workspace.json"
    target.write_text("old and whole\n")
    with pytest.raises(OSError) as raised:
        replace_file(target, b"x" * (8 * 1024 * 1024))
    assert raised.value.errno == 28  # ENOSPC
    assert target.read_text() == "old and whole\n"
    assert [p.name for p in small_disk.iterdir()] == ["workspace.json"]
