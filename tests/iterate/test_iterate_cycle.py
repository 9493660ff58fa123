"""`workbench iterate` cycles end to end against the stand-in flake (tests/iterate/standin_flake:
a STAND-IN for the builder flake's onnxruntime-cpu, built by real Nix): real git, bash, cmake,
ninja and g++ under the real supervisor."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix
from patch_fixture import diff_of, edited
from supervision.supervised import ninja_steps

from workbench.iterate import ninja_output

UNITS = 16


def _trailers(loop: Loop) -> list[dict[str, str]]:
    """The Workbench-* trailers of each commit, newest first."""
    out = loop.git("log", "--format=%B%x1e")
    found = []
    for body in out.split("\x1e"):
        if body.strip():
            found.append(dict(re.findall(r"^(Workbench-[\w-]+): (.*)$", body, re.MULTILINE)))
    return found


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
    assert not run.no_work
    assert ninja_output.parse(["ninja: no work to do."]).no_work
    # A builder's prefix (`name> `, as `nix build -L` shows it) is read past.
    prefixed = ninja_output.parse(
        ["onnxruntime> [1/1] Building CXX object CMakeFiles/t.dir/a.cc.o"]
    )
    assert prefixed.sources == ["a.cc"]


def test_a_missing_log_ran_nothing(tmp_path: Path) -> None:
    assert ninja_output.parse_log(tmp_path / "none.log").to_json()["edges"] == 0


@pytest.mark.slow
@needs_tools
@needs_nix[0]
@needs_nix[1]
def test_patches_are_commits_with_trailers_and_cycles_rebuild_only_what_changed(
    loop: Loop,
) -> None:
    first = loop.iterate_json("--no-smoke")
    # git log reads as the series; each patch commit says which version of its file it holds.
    trailers = _trailers(loop)
    assert trailers[0]["Workbench-Upstream"] == "nixpkgs postPatch"  # after the series
    for commit, name in zip(trailers[1:], ["tune-light-7", "tune-light-3"], strict=False):
        file = loop.series.directory / f"{name}.patch"
        assert commit["Workbench-Patch"] == name
        assert commit["Workbench-Patch-File"] == f"{name}.patch"
        assert commit["Workbench-Patch-Sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert trailers[3]["Workbench-Upstream"] == "nixpkgs patchPhase"
    assert trailers[4]["Workbench-Upstream"].startswith("unpackPhase of /nix/store/")
    assert "+ 3;" in (loop.src / "light_3.cc").read_text()
    assert "+ 70);" in (loop.src / "light_7.cc").read_text()
    assert "+ 10;" not in (loop.src / "light_10.cc").read_text()  # stale-context: disabled
    # Everything compiled under the supervisor, as a build of the workspace (its lock).
    assert sorted(first["ninja"]["sources"]) == sorted(
        [f"{'heavy' if n == 0 else 'light'}_{n}.cc" for n in range(UNITS)] + ["main.cc"]
    )
    build = first["build"]
    assert build["state"] == "succeeded" and build["name"] == "iterate cpu"
    record = loop.bench.record(build["id"])
    assert record.checkout == str(loop.src)
    steps = ninja_steps(Path(record.log_path).read_text())
    assert steps[-1][0] == steps[-1][1] == UNITS + 3  # units, main, the library, the program

    # Nothing changed: the fast path (the build tool alone), nothing rebuilt, no configure.
    again = loop.iterate_json("--no-smoke")
    assert again["steps"] == [] and again["configured"] is False
    assert again["series_change"]["replaced_from"] is None
    assert again["ninja"]["compiled"] == [] and again["ninja"]["edges"] == 0
    assert again["ninja"]["no_work"] is True

    # The user's edit, built once; the summary in words says what happened.
    user = loop.src / "light_11.cc"
    user.write_text(user.read_text().replace("+ 11);", "+ 110);"))
    assert loop.iterate_json("--no-smoke")["ninja"]["sources"] == ["light_11.cc"]
    text = loop.iterate(json=False)
    assert text.returncode == 0, text.stderr[-3000:]
    assert "build:     #" in text.stdout and "nothing to do" in text.stdout
    assert "your edits (uncommitted): light_11.cc" in text.stdout
    assert "smoke:     none set; set one with" in text.stdout
    assert "iterate cpu --smoke -- CMD ARGS..." in text.stdout
    assert "series unchanged: 2 patches (tune-light-3, tune-light-7)" in text.stderr

    # A new version of tune-light-3: the old one reverted, the new one applied as its own
    # commit again; the user's edit and every unchanged file keep content and mtime, so only
    # the patch's own unit is compiled again.
    user_stamp = user.stat().st_mtime_ns
    seven_stamp = (loop.src / "light_7.cc").stat().st_mtime_ns
    patch_file = loop.series.directory / "tune-light-3.patch"
    patch_file.write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
    )
    document = loop.iterate_json("--no-smoke")
    change = document["series_change"]
    assert change["replaced_from"] == 0
    assert change["reverted"] == ["tune-light-3", "tune-light-7"]
    assert change["applied"] == ["tune-light-3", "tune-light-7"]
    assert change["edits_kept"] == ["light_11.cc"]
    three = (loop.src / "light_3.cc").read_text()
    assert "+ 33;" in three and "+ 3;" not in three
    new_sha = hashlib.sha256(patch_file.read_bytes()).hexdigest()
    assert _trailers(loop)[2]["Workbench-Patch-Sha256"] == new_sha
    assert loop.git("diff", "--name-only").split() == ["light_11.cc"]
    assert user.stat().st_mtime_ns == user_stamp and "+ 110);" in user.read_text()
    assert (loop.src / "light_7.cc").stat().st_mtime_ns == seven_stamp
    assert document["ninja"]["sources"] == ["light_3.cc"]
    assert len(document["ninja"]["linked"]) == 2


@pytest.mark.slow
@needs_tools
@needs_nix[0]
@needs_nix[1]
def test_a_workspace_that_is_building_is_not_touched(loop: Loop) -> None:
    loop.make_workspace()  # made and configured: the next cycle is the whole ninja build
    # The build is held (an edge that waits while `hold` exists, as the supervision tests'
    # hold edges do) until the second cycle has been refused: on a loaded machine the whole
    # build could otherwise end before that cycle starts.
    hold, held = loop.state.parent / "hold", loop.state.parent / "held"
    hold.touch()
    cmake_lists = loop.src / "CMakeLists.txt"
    cmake_lists.write_text(
        cmake_lists.read_text() + f'add_custom_target(hold ALL COMMAND sh -c "touch {held}; '
        f'while [ -e {hold} ]; do sleep 0.05; done" VERBATIM)\n'
    )
    first = loop.bench.start(
        "--config", str(loop.configs), "iterate", "cpu", "-j", "1", "--no-smoke"
    )
    try:
        loop.bench.wait_for("the first cycle's build to reach its held edge", held.exists, 120)
        assert loop.bench.record(1).state == "running"
        head = loop.git("rev-parse", "HEAD")
        three = (loop.src / "light_3.cc").read_text()
        (loop.series.directory / "tune-light-3.patch").write_text(
            diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
        )
        result = loop.iterate()
        assert result.returncode == 2, result.stderr[-3000:]
        assert "build #1 of this workspace is still running" in result.stderr
        assert "attach 1" in result.stderr and "stop 1" in result.stderr
        assert result.stderr.count("workbench: error:") == 1
        assert loop.git("rev-parse", "HEAD") == head
        assert (loop.src / "light_3.cc").read_text() == three
        assert loop.bench.record(1).state == "running"  # held all along
    finally:
        hold.unlink(missing_ok=True)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-3000:]
    assert loop.bench.record(1).state == "succeeded"


@pytest.mark.slow
@needs_tools
@needs_nix[0]
@needs_nix[1]
def test_a_flake_that_does_not_evaluate_fails_the_first_cycle_in_nixs_words(loop: Loop) -> None:
    flake = loop.repo / "flake.nix"
    flake.write_text(flake.read_text().replace("cmakeFlags = [", "cmakeFlags = [ undefinedThing"))
    result = loop.iterate(json=False)
    # The phases run under the supervisor: Nix's words are in the build's log, the summary
    # says there is no working copy yet, and nothing ends in a traceback.
    assert result.returncode == 2, result.stderr[-3000:]
    assert "undefined variable 'undefinedThing'" in result.stdout
    assert "`nix print-dev-env .#onnxruntime-cpu` failed" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert "patches:   no working copy yet" in result.stdout
    assert "configure: not run this cycle" in result.stdout
    assert "smoke:     not run: the build failed" in result.stdout
    assert not loop.src.exists()
