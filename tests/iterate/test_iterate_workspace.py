"""The workspace's git history kept in line with the series, against the stand-in flake.

Each test makes the workspace as a first cycle does (the derivation's own phases: real Nix,
bash, git and cmake; tests/iterate/standin_flake is a STAND-IN for the builder flake's
onnxruntime-cpu) without building it, then changes the series or the working copy and runs a
cycle's first step (session.prepare) in-process, or the real CLI where what the user is told
matters.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools, stamps
from nix_testing import needs_nix
from patch_fixture import diff_of, edited

from workbench.iterate import dev_env
from workbench.iterate.session import prepare
from workbench.iterate.workspace import (
    AppliedPatch,
    Git,
    GitError,
    WantedPatch,
    WorkingCopy,
    WorkspaceError,
    first_difference,
)
from workbench.patches.series import set_enabled

SUBJECTS = [
    "nixpkgs: the derivation's postPatch",
    "tune-light-7: light_7 allocates seventy more",
    "tune-light-3: light_3 returns a constant",
    "nixpkgs: the derivation's own patches",
    "upstream source",
]


def _slow(test):
    """Real Nix, git and cmake make the workspace: marked slow, skipped without the tools."""
    for mark in (needs_tools, *needs_nix, pytest.mark.slow):
        test = mark(test)
    return test


def _quiet(_: str) -> None:
    pass


def _stale_patch(loop: Loop) -> Path:
    """tune-light-3 rewritten against a light_3.cc the source does not have."""
    patch_file = loop.series.directory / "tune-light-3.patch"
    _, stale = edited(loop.source, "light_3.cc", "std::to_string(x).size()", "0")
    patch_file.write_text(diff_of({"light_3.cc": (stale, stale.replace("+ digits;", "+ 1;"))}))
    return patch_file


def test_first_difference() -> None:
    def applied(name: str, sha: str) -> AppliedPatch:
        return AppliedPatch("c" + name, name, f"{name}.patch", sha)

    def wanted(name: str, sha: str) -> WantedPatch:
        return WantedPatch(name, f"{name}.patch", Path(f"{name}.patch"), sha, "fixes")

    a, b = applied("a", "1"), applied("b", "2")
    assert first_difference([a, b], [wanted("a", "1"), wanted("b", "2")]) is None
    assert first_difference([a, b], [wanted("a", "1"), wanted("b", "3")]) == 1  # edited
    assert first_difference([a, b], [wanted("b", "2"), wanted("a", "1")]) == 0  # reordered
    assert first_difference([a, b], [wanted("a", "1")]) == 1  # disabled
    assert first_difference([a], [wanted("a", "1"), wanted("b", "2")]) == 1  # enabled
    assert first_difference([], []) is None


@_slow
def test_the_working_copy_is_the_derivations_own_source(loop: Loop) -> None:
    loop.make_workspace()
    state = json.loads((loop.workspace / "workspace.json").read_text())
    src = Path(dev_env.load(loop.workspace / dev_env.ENV_JSON).value("src"))
    assert str(src).startswith("/nix/store/")
    assert (src / "main.cc").stat().st_mode & 0o222 == 0  # the store is read-only
    # The "upstream source" commit is unpackPhase's tree: exactly the derivation's src.
    pristine = state["pristine_commit"]
    committed = loop.git("ls-tree", "-r", "--name-only", pristine).split()
    assert committed == sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file())
    assert loop.git("show", f"{pristine}:main.cc") == (src / "main.cc").read_text()
    assert f"Workbench-Upstream: unpackPhase of {src}" in loop.git("log", "-1", pristine)
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    # Copied out of the read-only store, made writable (unpackPhase's chmod), nothing left
    # over from the unpacking, the build directory kept out of git.
    for path in loop.src.rglob("*"):
        if ".git" not in path.relative_to(loop.src).parts:
            assert path.stat().st_mode & stat.S_IWUSR, path
    left = {p.name for p in loop.workspace.iterdir()}
    assert not left & {"unpack", "src.partial", "unpack.sourceRoot", "configure.pwd"}
    assert (loop.build / "build.ninja").is_file()
    assert loop.git("status", "--porcelain") == ""

    # The same workspace under the flavour's attribute; --source only warns (the source is
    # the derivation's own); another flake is refused.
    again = prepare(loop.configs, loop.state, "onnxruntime-cpu", loop.source, _quiet)
    assert again.applied.created is False and again.applied.replaced_from is None
    assert again.fast, again.due
    assert [p.name for p in again.patches] == ["tune-light-3", "tune-light-7"]
    assert any(f"--source {loop.source} is not used" in w for w in again.warnings)
    other = loop.repo.parent / "other-flake"
    other.mkdir()
    (other / "flake.nix").write_text((loop.repo / "flake.nix").read_text())
    with pytest.raises(WorkspaceError, match="was made from"):
        prepare(loop.configs, loop.state, "cpu", None, _quiet, flake_directory=other)


@_slow
def test_disabling_a_patch_takes_its_commit_out(loop: Loop) -> None:
    loop.make_workspace()
    seven = (loop.src / "light_7.cc").stat().st_mtime_ns
    set_enabled(loop.configs, "tune-light-3", False)
    prepared = loop.prepare()
    assert prepared.applied.replaced_from == 0
    assert prepared.applied.reverted == ["tune-light-3", "tune-light-7"]
    assert prepared.applied.applied == ["tune-light-7"]
    assert loop.git("log", "--format=%s").splitlines() == [*SUBJECTS[:2], *SUBJECTS[3:]]
    assert (loop.src / "light_3.cc").read_text() == (loop.source / "light_3.cc").read_text()
    assert (loop.src / "light_7.cc").stat().st_mtime_ns == seven  # same content, same mtime
    # light_7.cc and postPatch's CMakeLists.txt, re-made with the same content.
    assert prepared.applied.kept_mtimes == 2 and prepared.applied.post_patch is True
    # The flake reads the series: its derivation changed, so the environment is due again.
    assert any("the derivation changed" in step for step in prepared.due), prepared.due


@_slow
def test_edits_that_clash_with_the_new_patch_roll_everything_back(loop: Loop) -> None:
    loop.make_workspace()
    three = loop.src / "light_3.cc"
    three.write_text(three.read_text().replace("+ 3;", "+ 4;"))  # the very line the patch writes
    head = loop.git("rev-parse", "HEAD")
    before = stamps(loop.src)
    (loop.series.directory / "tune-light-3.patch").write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
    )
    with pytest.raises(WorkspaceError) as failure:
        loop.prepare()
    message = str(failure.value)
    assert "your uncommitted edits (light_3.cc) do not fit on the new series" in message
    assert "Rolled back" in message
    assert loop.git("rev-parse", "HEAD") == head
    assert stamps(loop.src) == before
    assert loop.git("stash", "list") == ""
    assert loop.git("status", "--porcelain").split() == ["M", "light_3.cc"]


@_slow
def test_a_commit_of_the_users_own_is_not_thrown_away(loop: Loop) -> None:
    loop.make_workspace()
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
    assert loop.prepare().applied.replaced_from is None  # an unchanged series: fine
    set_enabled(loop.configs, "tune-light-3", False)
    with pytest.raises(WorkspaceError, match=r"not patches of the series .*'my own change'"):
        loop.prepare()
    assert loop.git("rev-parse", "HEAD") == head
    assert "return x;" in (loop.src / "light_9.cc").read_text()


@_slow
def test_a_patch_that_no_longer_applies_leaves_the_workspace_as_it_was(loop: Loop) -> None:
    loop.make_workspace()
    user = loop.src / "light_11.cc"
    user.write_text(user.read_text().replace("+ 11);", "+ 110);"))
    head = loop.git("rev-parse", "HEAD")
    before = stamps(loop.src)
    status = loop.git("status", "--porcelain")

    patch_file = _stale_patch(loop)
    result = loop.iterate()
    assert result.returncode == 2, result.stderr[-3000:]
    error = result.stderr
    assert error.count("workbench: error:") == 1 and "Traceback" not in error
    assert "patch tune-light-3" in error and str(patch_file) in error
    assert "context changed" in error and "light_3.cc:" in error  # the hunk and the line
    assert "Rolled back" in error and "your edits to light_11.cc kept" in error
    # HEAD, the working tree (content and mtimes), the edit and the stash list as they were.
    assert loop.git("rev-parse", "HEAD") == head
    assert stamps(loop.src) == before
    assert loop.git("status", "--porcelain") == status
    assert loop.git("stash", "list") == ""
    assert not (loop.state / "history.sqlite3").exists()  # no build was started

    # Enabling a patch whose context changed fails the same way, naming its hunks.
    patch_file.write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 3;")})
    )
    set_enabled(loop.configs, "stale-context", True)
    result = loop.iterate()
    assert result.returncode == 2
    assert "patch stale-context" in result.stderr
    assert "hunk #2 light_9.cc" in result.stderr and "context changed" in result.stderr
    assert loop.git("rev-parse", "HEAD") == head
    assert stamps(loop.src) == before


@_slow
def test_a_broken_series_on_the_first_run_keeps_the_patches_before_it(loop: Loop) -> None:
    set_enabled(loop.configs, "stale-context", True)
    result = loop.iterate()
    # The workspace is made inside the supervised build (the phases): the build fails there,
    # its log (stderr with --json) says why.
    assert result.returncode == 2, result.stderr[-3000:]
    assert "patch stale-context" in result.stderr and "Traceback" not in result.stderr
    assert "holds the derivation's patched source and the 2 series patches before it" in (
        result.stderr
    )
    document = json.loads(result.stdout)
    assert document["build"]["state"] == "failed"
    assert document["smoke_note"] == "not run: the build failed"
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS[1:]  # no postPatch yet
    assert loop.git("status", "--porcelain") == ""

    # Fixed, the next cycle goes on from there: the patch is applied on top, then postPatch,
    # then configure.
    fixed = edited(loop.source, "light_9.cc", "+ digits;", "- digits;")
    (loop.series.directory / "stale-context.patch").write_text(diff_of({"light_9.cc": fixed}))
    prepared = loop.prepare()
    assert prepared.applied.replaced_from == 2 and prepared.applied.applied == ["stale-context"]
    assert loop.git("log", "--format=%s").splitlines() == [
        SUBJECTS[0],
        "stale-context: light_9 subtracts its digits",
        *SUBJECTS[1:],
    ]
    assert "add_library(fixture SHARED" in (loop.src / "CMakeLists.txt").read_text()
    assert any("no build files" in step for step in prepared.due), prepared.due


@needs_tools
def test_unknown_names_and_a_stray_command_are_explained(loop: Loop) -> None:
    result = loop.iterate(target="onnxruntime-python313-cuda12_9-sm90-avx51")
    assert result.returncode == 2
    assert "did you mean onnxruntime-python313-cuda12_9-sm90-avx512" in result.stderr
    result = loop.iterate("./x")
    assert result.returncode == 2 and "put --smoke before it" in result.stderr
    assert result.stderr.count("workbench: error:") == 1


@needs_tools
def test_one_git_status_says_head_and_the_changed_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    git = Git(tree)
    with pytest.raises(GitError, match="git status"):
        git.read_status(git.start_status())  # not a working copy
    git.run("init", "-q")
    assert git.read_status(git.start_status()) == WorkingCopy(None, [])  # before a commit
    for name in ("a.cc", "b.cc", "c.cc", "d e.cc"):
        (tree / name).write_text(f"int {name[0]};\n")
    git.run("add", "-A")
    head = git.commit("first")
    (tree / "a.cc").write_text("int a2;\n")  # changed, not staged
    (tree / "b.cc").write_text("int b2;\n")
    git.run("add", "b.cc")  # changed and staged
    git.run("mv", "c.cc", "moved.cc")  # renamed: both names
    (tree / "d e.cc").write_text("int d2;\n")  # a space in the name
    (tree / "new.cc").write_text("int n;\n")  # untracked: not an edit
    found = git.read_status(git.start_status())
    assert found.head == head
    assert found.edits == git.dirty_files()
    assert sorted(found.edits) == ["a.cc", "b.cc", "c.cc", "d e.cc", "moved.cc"]
