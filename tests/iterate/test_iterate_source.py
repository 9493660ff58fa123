"""Where a workspace's source comes from (a directory, a git tree, the flake), and ccache."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix, nix_env

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import set_setting
from workbench.iterate import cmake_flags, ninja_output, source
from workbench.iterate.session import prepare
from workbench.supervision.launch import resolve_target


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@needs_tools
def test_a_git_source_gives_its_files_not_its_history_or_ignored_files(tmp_path: Path) -> None:
    tree = tmp_path / "ort"
    (tree / "cmake").mkdir(parents=True)
    (tree / "cmake" / "CMakeLists.txt").write_text("project(x)\n")
    (tree / ".gitignore").write_text("build/\n")
    (tree / "gone.cc").write_text("int gone;\n")
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "theirs")
    (tree / "gone.cc").unlink()  # deleted in the working tree: not copied
    (tree / "new.cc").write_text("int fresh;\n")  # untracked, not ignored: copied
    (tree / "build").mkdir()
    (tree / "build" / "junk.o").write_text("x")  # ignored: not copied
    (tree / "cmake" / "CMakeLists.txt").write_text("project(edited)\n")
    copied = tmp_path / "copy"
    count = source.copy_source(source.from_directory(tree), copied)
    files = sorted(str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file())
    assert files == [".gitignore", "cmake/CMakeLists.txt", "new.cc"]
    assert count == 3
    assert (copied / "cmake" / "CMakeLists.txt").read_text() == "project(edited)\n"


def test_a_read_only_tree_is_copied_writable_without_git(tmp_path: Path) -> None:
    tree = tmp_path / "store-like"
    (tree / "sub" / ".git").mkdir(parents=True)
    (tree / "sub" / ".git" / "HEAD").write_text("ref\n")
    (tree / "sub" / "a.cc").write_text("int a;\n")
    for path in [tree / "sub" / "a.cc", tree / "sub", tree]:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
    try:
        copied = tmp_path / "copy"
        assert source.copy_source(source.from_directory(tree), copied) == 1
        assert not (copied / "sub" / ".git").exists()
        assert os.access(copied / "sub" / "a.cc", os.W_OK)
        assert os.access(copied / "sub", os.W_OK)
    finally:
        for path in [tree, tree / "sub", tree / "sub" / "a.cc"]:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def test_without_source_or_nix_the_error_says_to_pass_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(source.SourceError, match="pass the ONNX Runtime source tree"):
        source.from_flake(tmp_path, "onnxruntime-cpu.src", lambda _: None)


def test_the_source_attribute_of_variants_and_flavours(matrix) -> None:
    variant = resolve_target("onnxruntime-python313-cpu-avx2", matrix)
    assert source.source_attr(variant) == "onnxruntime-python313-cpu-avx2.cpp.src"
    assert source.source_attr(resolve_target("cuda-static", matrix)) == "onnxruntime.src"


@needs_nix[0]
@needs_nix[1]
def test_the_flakes_src_is_built_and_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local flake whose package has a `src` (as nixpkgs' onnxruntime has): real Nix."""
    flake = tmp_path / "flake"
    (flake / "tree").mkdir(parents=True)
    (flake / "tree" / "CMakeLists.txt").write_text("project(fromnix CXX)\n")
    system = subprocess.run(
        ["nix-instantiate", "--eval", "--expr", "builtins.currentSystem", "--json"],
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (flake / "flake.nix").write_text(
        textwrap.dedent(
            """\
            {
              outputs = { self }: {
                packages.SYSTEM.onnxruntime-cpu = {
                  type = "derivation";
                  name = "stand-in-package";
                  src = derivation {
                    name = "source";
                    system = SYSTEM;
                    builder = "/bin/sh";
                    args = [ "-c" "/bin/cp -r ${./tree} $out" ];
                  };
                };
              };
            }
            """
        ).replace("SYSTEM", system)
    )
    for key, value in nix_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    said: list[str] = []
    tree = source.from_flake(flake, "onnxruntime-cpu.src", said.append)
    assert tree.kind == "nix" and str(tree.path).startswith("/nix/store/")
    assert tree.description == f"{flake}#onnxruntime-cpu.src"
    assert "nix" in said[0] and ".#onnxruntime-cpu.src" in said[0]
    copied = tmp_path / "copy"
    source.copy_source(tree, copied)
    assert (copied / "CMakeLists.txt").read_text() == "project(fromnix CXX)\n"
    assert os.access(copied / "CMakeLists.txt", os.W_OK)
    with pytest.raises(source.SourceError, match=r"nix build \.#onnxruntime-cuda-dyn\.src"):
        source.from_flake(flake, "onnxruntime-cuda-dyn.src", said.append)


def test_ccache_is_used_only_when_set_and_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cmake_flags.ccache_launcher(False) == (None, None)
    monkeypatch.setenv("PATH", str(tmp_path))
    launcher, warning = cmake_flags.ccache_launcher(True)
    assert launcher is None and warning and "apt install ccache" in warning
    fake = tmp_path / "ccache"
    fake.write_text('#!/bin/sh\nexec "$@"\n')
    fake.chmod(0o755)
    assert cmake_flags.ccache_launcher(True) == (str(fake), None)


@needs_tools
@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_the_workspace_compiles_through_ccache_when_enabled(loop: Loop, tmp_path: Path) -> None:
    set_setting(loop.configs, load_matrix(loop.configs), "ccache", "true")
    loop.bench.extra_env["CCACHE_DIR"] = str(tmp_path / "ccache")
    ccache = shutil.which("ccache")
    document = loop.iterate_json()
    assert f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}" in document["configure_argv"]
    assert document["warnings"] == []
    rules = (loop.build / "CMakeFiles" / "rules.ninja").read_text()
    assert re.search(rf"command = {re.escape(str(ccache))} \S*c\+\+", rules)
    assert (tmp_path / "ccache").is_dir()  # the compiles went through it


@needs_tools
def test_prepare_alone_makes_the_workspace_without_building(loop: Loop) -> None:
    said: list[str] = []
    prepared = prepare(loop.configs, loop.state, "cpu", loop.source, said.append)
    assert [p.name for p in prepared.patches] == ["tune-light-3", "tune-light-7"]
    assert prepared.needs_configure
    assert prepared.paths.src == loop.src and not loop.build.exists()
    again = prepare(loop.configs, loop.state, "onnxruntime-cpu", None, said.append)
    assert again.applied.created is False and again.applied.replaced_from is None
    with pytest.raises(Exception, match="was made from"):
        prepare(loop.configs, loop.state, "cpu", loop.source.parent, said.append)


def test_ninja_output_is_sorted_into_compiles_and_links() -> None:
    run = ninja_output.parse(
        [
            "ninja: Entering directory `build'",
            "[1/4] Re-running CMake...",
            "[2/4] Building CXX object CMakeFiles/fixture.dir/light_3.cc.o",
            "[3/4] Building CUDA object CMakeFiles/p.dir/onnxruntime/x/gemm.cu.o",
            "warning: something",
            "[4/4] Linking CXX executable fixture_main",
        ]
    )
    assert run.edges == 4 and run.total == 4
    assert run.sources == ["light_3.cc", "gemm.cu"]
    assert run.linked == ["Linking CXX executable fixture_main"]
    assert run.other == ["Re-running CMake..."]
    assert ninja_output.parse(["ninja: no work to do."]).no_work
