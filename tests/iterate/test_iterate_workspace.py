"""The workspace's git history kept in line with the series, in-process (no build needed)."""

from __future__ import annotations

import os
import subprocess

import pytest
from iterate_loop import Loop, needs_tools, stamps
from patch_fixture import diff_of, edited

from workbench.iterate.session import prepare
from workbench.iterate.workspace import (
    AppliedPatch,
    WantedPatch,
    WorkspaceError,
    first_difference,
)
from workbench.patches.series import set_enabled

pytestmark = needs_tools


def _quiet(_: str) -> None:
    pass


def _prepare(loop: Loop):
    return prepare(loop.configs, loop.state, "cpu", loop.source, _quiet)


def test_first_difference() -> None:
    def applied(name: str, sha: str) -> AppliedPatch:
        return AppliedPatch("c" + name, name, f"{name}.patch", sha)

    def wanted(name: str, sha: str) -> WantedPatch:
        return WantedPatch(name, f"{name}.patch", None, sha, "fixes")  # type: ignore[arg-type]

    a, b = applied("a", "1"), applied("b", "2")
    assert first_difference([a, b], [wanted("a", "1"), wanted("b", "2")]) is None
    assert first_difference([a, b], [wanted("a", "1"), wanted("b", "3")]) == 1  # edited
    assert first_difference([a, b], [wanted("b", "2"), wanted("a", "1")]) == 0  # reordered
    assert first_difference([a, b], [wanted("a", "1")]) == 1  # disabled
    assert first_difference([a], [wanted("a", "1"), wanted("b", "2")]) == 1  # enabled
    assert first_difference([], []) is None


def test_disabling_a_patch_takes_its_commit_out(loop: Loop) -> None:
    _prepare(loop)
    seven = (loop.src / "light_7.cc").stat().st_mtime_ns
    set_enabled(loop.configs, "tune-light-3", False)
    prepared = _prepare(loop)
    assert prepared.applied.replaced_from == 0
    assert prepared.applied.reverted == ["tune-light-3", "tune-light-7"]
    assert prepared.applied.applied == ["tune-light-7"]
    assert loop.git("log", "--format=%s").splitlines() == [
        "tune-light-7: light_7 allocates seventy more",
        "upstream source",
    ]
    assert (loop.src / "light_3.cc").read_text() == (loop.source / "light_3.cc").read_text()
    assert (loop.src / "light_7.cc").stat().st_mtime_ns == seven  # same content, same mtime
    assert prepared.applied.kept_mtimes == 1


def test_edits_that_clash_with_the_new_patch_roll_everything_back(loop: Loop) -> None:
    _prepare(loop)
    three = loop.src / "light_3.cc"
    three.write_text(three.read_text().replace("+ 3;", "+ 4;"))  # the very line the patch writes
    head = loop.git("rev-parse", "HEAD")
    before = stamps(loop.src)
    (loop.series.directory / "tune-light-3.patch").write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
    )
    with pytest.raises(WorkspaceError) as failure:
        _prepare(loop)
    message = str(failure.value)
    assert "your uncommitted edits (light_3.cc) do not fit on the new series" in message
    assert "Rolled back" in message
    assert loop.git("rev-parse", "HEAD") == head
    assert stamps(loop.src) == before
    assert loop.git("stash", "list") == ""
    assert loop.git("status", "--porcelain").split() == ["M", "light_3.cc"]


def test_a_commit_of_the_users_own_is_not_thrown_away(loop: Loop) -> None:
    _prepare(loop)
    (loop.src / "light_9.cc").write_text("int light_9(int x) { return x; }\n")
    env = {"GIT_AUTHOR_NAME": "me", "GIT_AUTHOR_EMAIL": "me@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "me", "GIT_COMMITTER_EMAIL": "me@example.invalid"}
    subprocess.run(
        ["git", "commit", "-qam", "my own change"],
        cwd=loop.src,
        env={**os.environ, **env},
        check=True,
    )
    head = loop.git("rev-parse", "HEAD")
    assert _prepare(loop).applied.replaced_from is None  # unchanged series: fine
    set_enabled(loop.configs, "tune-light-3", False)
    with pytest.raises(WorkspaceError, match=r"not patches of the series .*'my own change'"):
        _prepare(loop)
    assert loop.git("rev-parse", "HEAD") == head
