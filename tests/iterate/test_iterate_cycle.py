"""`workbench iterate` end to end: real git, cmake, ninja and g++ under the real supervisor."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools, stamps
from patch_fixture import diff_of, edited
from supervision.supervised import ninja_steps

from workbench.iterate.session import prepare
from workbench.patches.series import set_enabled

pytestmark = [needs_tools, pytest.mark.slow]

UNITS = 36
SUBJECTS = [
    "tune-light-7: light_7 allocates seventy more",
    "tune-light-3: light_3 returns a constant",
    "upstream source",
]


def _trailers(loop: Loop) -> list[dict[str, str]]:
    """The Workbench-* trailers of each commit, newest first."""
    out = loop.git("log", "--format=%B%x1e")
    found = []
    for body in out.split("\x1e"):
        if body.strip():
            found.append(dict(re.findall(r"^(Workbench-[\w-]+): (.*)$", body, re.MULTILINE)))
    return found


def test_first_iterate_builds_everything_with_one_commit_per_patch(loop: Loop) -> None:
    document = loop.iterate_json()
    assert document["schema"] == "workbench-iterate/1"
    assert document["series_change"]["created"] is True
    assert [p["name"] for p in document["patches"]] == ["tune-light-3", "tune-light-7"]
    # git log reads as the series: upstream first, then each enabled patch in series order.
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    trailers = _trailers(loop)
    for commit, name in zip(trailers, ["tune-light-7", "tune-light-3"], strict=False):
        file = loop.series.directory / f"{name}.patch"
        assert commit["Workbench-Patch"] == name
        assert commit["Workbench-Patch-File"] == f"{name}.patch"
        assert commit["Workbench-Patch-Sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert trailers[2]["Workbench-Upstream"] == str(loop.source)
    # The series' changes are in the tree, the disabled patches' are not.
    assert "+ 3;" in (loop.src / "light_3.cc").read_text()
    assert "+ 70);" in (loop.src / "light_7.cc").read_text()
    assert "+ 10;" not in (loop.src / "light_10.cc").read_text()
    assert loop.git("status", "--porcelain") == ""
    # Everything was compiled, under the supervisor, as a build the history knows.
    assert document["configured"] is True
    assert sorted(document["ninja"]["sources"]) == sorted(
        [f"{'heavy' if n == 0 else 'light'}_{n}.cc" for n in range(UNITS)] + ["main.cc"]
    )
    build = document["build"]
    assert build["state"] == "succeeded" and build["name"] == "iterate cpu"
    record = loop.bench.record(build["id"])
    assert record.argv[:3] == ("ninja", "-C", str(loop.build))
    assert record.checkout == str(loop.src)  # the lock `workbench run` takes there too
    assert ninja_steps(Path(record.log_path).read_text())[-1] == (UNITS + 3, UNITS + 3)
    # The flake's flags reached CMake (the cpu flavour: static, no CUDA).
    cache = (loop.build / "CMakeCache.txt").read_text()
    assert "BUILD_SHARED_LIBS:BOOL=FALSE" in cache
    assert "CMAKE_CXX_FLAGS:STRING=-O0" in cache
    assert "smoke" in document["smoke_note"] and "none set" in document["smoke_note"]
    state = json.loads((loop.workspace / "workspace.json").read_text())
    assert state["configured"]["argv"] == document["configure_argv"]

    # Nothing changed: nothing is rebuilt, cmake is not run again.
    again = loop.iterate_json()
    assert again["configured"] is False
    assert again["series_change"]["replaced_from"] is None
    assert again["ninja"]["compiled"] == [] and again["ninja"]["edges"] == 0


def test_one_edited_file_rebuilds_one_unit_and_the_link(loop: Loop) -> None:
    loop.target = "onnxruntime-python313-cpu-avx2"  # a variant: its ISA flags, every patch
    first = loop.iterate_json(target=loop.target)
    assert first["flags"]["compile_flags"] == ["-mavx2", "-mfma", "-O0"]
    assert [p["name"] for p in first["patches"]] == ["tune-light-3", "tune-light-7"]
    light = loop.src / "light_5.cc"
    light.write_text(light.read_text().replace("+ 5);", "+ 55);"))

    result = loop.iterate(target=loop.target, source=False)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    assert document["ninja"]["sources"] == ["light_5.cc"]
    assert document["ninja"]["linked"] == [
        "Linking CXX static library libfixture.a",
        "Linking CXX executable fixture_main",
    ]
    assert document["configured"] is False
    assert document["workspace"]["edits"] == ["light_5.cc"]  # kept uncommitted
    # The supervisor's log says the same: three edges, one of them a compile.
    log = Path(loop.bench.record(document["build"]["id"]).log_path).read_text()
    assert ninja_steps(log) == [(1, 3), (2, 3), (3, 3)]
    assert len(re.findall(r"Building CXX object", log)) == 1
    # The human summary says it in words (stderr has the log, stdout the summary).
    text = loop.bench.run("--config", str(loop.configs), "iterate", loop.target, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "build:     #" in text.stdout and "nothing to do" in text.stdout
    assert "your edits (uncommitted): light_5.cc" in text.stdout
    assert "smoke:     none set; set one with" in text.stdout
    assert f"iterate {loop.target} --smoke -- CMD ARGS..." in text.stdout


def test_a_changed_patch_is_reapplied_rebuilding_only_what_it_touches(loop: Loop) -> None:
    loop.iterate_json()
    # The user's own edit, built once: it must survive the re-application untouched.
    user = loop.src / "light_20.cc"
    user.write_text(user.read_text().replace("+ 20);", "+ 200);"))
    assert loop.iterate_json(source=False)["ninja"]["sources"] == ["light_20.cc"]
    user_stamp = user.stat().st_mtime_ns
    seven_stamp = (loop.src / "light_7.cc").stat().st_mtime_ns

    # A new version of tune-light-3: "+ 33;" where the old one wrote "+ 3;".
    patch_file = loop.series.directory / "tune-light-3.patch"
    patch_file.write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
    )
    document = loop.iterate_json(source=False)
    change = document["series_change"]
    assert change["replaced_from"] == 0
    assert change["reverted"] == ["tune-light-3", "tune-light-7"]
    assert change["applied"] == ["tune-light-3", "tune-light-7"]
    assert change["edits_kept"] == ["light_20.cc"]
    # Old version reverted, new one applied, as one commit per patch again.
    three = (loop.src / "light_3.cc").read_text()
    assert "+ 33;" in three and "+ 3;" not in three
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    new_sha = hashlib.sha256(patch_file.read_bytes()).hexdigest()
    assert _trailers(loop)[1]["Workbench-Patch-Sha256"] == new_sha
    # The user's edit is still there, still uncommitted, with its old mtime.
    assert "+ 200);" in user.read_text()
    assert loop.git("diff", "--name-only").split() == ["light_20.cc"]
    assert user.stat().st_mtime_ns == user_stamp
    assert (loop.src / "light_7.cc").stat().st_mtime_ns == seven_stamp
    # Only the patch's own translation unit was compiled again (plus the link).
    assert document["ninja"]["sources"] == ["light_3.cc"]
    assert len(document["ninja"]["linked"]) == 2


def test_a_patch_that_no_longer_applies_leaves_the_workspace_as_it_was(loop: Loop) -> None:
    # The workspace as a first iterate leaves it, without its build (not needed here).
    prepare(loop.configs, loop.state, "cpu", loop.source, lambda _: None)
    user = loop.src / "light_20.cc"
    user.write_text(user.read_text().replace("+ 20);", "+ 200);"))
    head = loop.git("rev-parse", "HEAD")
    before = stamps(loop.src)
    status = loop.git("status", "--porcelain")

    # tune-light-3 rewritten against a light_3.cc the source does not have.
    patch_file = loop.series.directory / "tune-light-3.patch"
    _, stale = edited(loop.source, "light_3.cc", "std::to_string(x).size()", "0")
    patch_file.write_text(diff_of({"light_3.cc": (stale, stale.replace("+ digits;", "+ 1;"))}))
    result = loop.iterate(source=False)
    assert result.returncode == 2
    error = result.stderr
    assert "patch tune-light-3" in error and str(patch_file) in error
    assert "context changed" in error and "light_3.cc:" in error  # the hunk and the line
    assert "Rolled back" in error and "your edits to light_20.cc kept" in error
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
    result = loop.iterate(source=False)
    assert result.returncode == 2
    assert "patch stale-context" in result.stderr
    assert "hunk #2 light_9.cc" in result.stderr and "context changed" in result.stderr
    assert loop.git("rev-parse", "HEAD") == head
    assert stamps(loop.src) == before


def test_a_broken_series_on_the_first_iterate_keeps_the_patches_before_it(loop: Loop) -> None:
    series = loop.series.directory / "series.toml"
    series.write_text(series.read_text().replace("enabled = false", "enabled = true"))
    result = loop.iterate()
    assert result.returncode == 2
    assert "patch stale-context" in result.stderr
    assert "holds the upstream source and the 2 patches before it" in result.stderr
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert loop.git("status", "--porcelain") == ""


def test_unknown_names_and_missing_sources_are_explained(loop: Loop) -> None:
    result = loop.iterate(target="onnxruntime-python313-cuda12_9-sm90-avx51")
    assert result.returncode == 2
    assert "did you mean onnxruntime-python313-cuda12_9-sm90-avx512" in result.stderr
    result = loop.bench.run(
        "--config", str(loop.configs), "iterate", "cpu", "--source", str(loop.source / "nope")
    )
    assert result.returncode == 2
    assert "--source" in result.stderr and "not a directory" in result.stderr
    result = loop.bench.run("--config", str(loop.configs), "iterate", "cpu", "./x")
    assert result.returncode == 2 and "put --smoke before it" in result.stderr


def test_a_workspace_that_is_building_is_not_touched(loop: Loop) -> None:
    first = loop.bench.start(
        "--config", str(loop.configs), "iterate", "cpu", "--source", str(loop.source)
    )

    def running() -> bool:
        try:
            return loop.bench.record(1).state == "running"
        except Exception:  # no history yet
            return False

    loop.bench.wait_for("the first iterate's build to run", running, timeout=120)
    head = loop.git("rev-parse", "HEAD")
    patch_file = loop.series.directory / "tune-light-3.patch"
    patch_file.write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
    )
    result = loop.iterate(source=False)
    assert result.returncode == 2
    assert "build #1 of this workspace is still running" in result.stderr
    assert "attach 1" in result.stderr
    assert loop.git("rev-parse", "HEAD") == head
    _, err = first.communicate(timeout=240)
    assert first.returncode == 0, err[-3000:]
