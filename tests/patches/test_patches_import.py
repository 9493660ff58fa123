"""`workbench patches import DIR`: another checkout's patch files into the series, checked
against the source tree first, files and entries written together or not at all."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from patch_fixture import diff_of, edited, run_workbench, write_fixture_source

from workbench.configs.matrix import load_matrix
from workbench.patches.series import load_series

REPO = Path(__file__).resolve().parents[2]


def workbench(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_workbench(config, *args, columns=100)


@pytest.fixture
def setup(config_copy: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The repository's series (the static flavour's eight listed, without their files), a
    source tree, and an empty folder of patches to import."""
    shutil.copy(REPO / "patches" / "series.toml", config_copy.parent / "patches" / "series.toml")
    source = tmp_path / "source"
    write_fixture_source(source, units=14)
    incoming = tmp_path / "builder-patches"
    incoming.mkdir()
    return config_copy, source, incoming


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_good_patches_fill_their_entries_and_new_ones_are_added(setup) -> None:
    config, source, incoming = setup
    (incoming / "static-init-bridge.patch").write_text(
        diff_of({"light_3.cc": edited(source, "light_3.cc", "+ digits;", "+ 3;")})
    )
    (incoming / "Extra-Guard.patch").write_text(
        diff_of({"light_7.cc": edited(source, "light_7.cc", "x) + 7);", "x) + 70);")})
    )
    result = workbench(config, "patches", "import", str(incoming), "--source", str(source))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "static-init-bridge  applies (fills its entry)" in result.stdout
    assert "extra-guard" in result.stdout and "(new entry)" in result.stdout
    patches = config.parent / "patches"
    assert (patches / "static-init-bridge.patch").is_file()
    assert (patches / "Extra-Guard.patch").is_file()
    series = load_series(config, load_matrix(config))
    added = series.get("extra-guard")
    assert added.flavours == ("cuda-static",) and added.file == "Extra-Guard.patch"
    assert [p.name for p in series.patches][-1] == "extra-guard"  # after the existing ones
    # The comments of series.toml are kept.
    assert (patches / "series.toml").read_text().startswith("# The patch series")


@pytest.mark.parametrize("case", ["stale", "already-upstream", "conflicting-file"])
def test_one_bad_patch_means_nothing_is_written(setup, case) -> None:
    config, source, incoming = setup
    patches = config.parent / "patches"
    (incoming / "static-init-bridge.patch").write_text(
        diff_of({"light_3.cc": edited(source, "light_3.cc", "+ digits;", "+ 3;")})
    )
    if case == "stale":
        # Written against an older light_9.cc: its context is not in the tree.
        _, older = edited(source, "light_9.cc", "std::to_string(x).size()", "1")
        bad = diff_of({"light_9.cc": (older, older.replace("+ digits;", "- digits;"))})
        (incoming / "static-init-cpu.patch").write_text(bad)
    elif case == "already-upstream":
        before, after = edited(source, "light_12.cc", "+ digits;", "* 2;")
        (incoming / "static-init-cpu.patch").write_text(diff_of({"light_12.cc": (before, after)}))
        (source / "light_12.cc").write_text(after)
    else:
        # patches/ already holds a different file of that name.
        (patches / "static-init-cpu.patch").write_text("something else\n")
        (incoming / "static-init-cpu.patch").write_text(
            diff_of({"light_5.cc": edited(source, "light_5.cc", "+ digits;", "+ 5;")})
        )
    before = snapshot(patches)
    result = workbench(
        config, "patches", "import", str(incoming), "--source", str(source), "--json"
    )
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["written"] is False
    statuses = {p["name"]: p["status"] for p in document["patches"]}
    assert statuses["static-init-bridge"] == "applies"
    assert statuses["static-init-cpu"] != "applies"
    if case == "conflicting-file":
        assert statuses["static-init-cpu"] == "conflict"
    assert snapshot(patches) == before  # neither a file nor an entry


def test_refusals_are_one_error_line(setup, tmp_path) -> None:
    config, source, _ = setup
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv, words in (
        ([str(empty)], "no *.patch files to import"),
        ([str(tmp_path / "nope")], "no such directory"),
    ):
        result = workbench(config, "patches", "import", *argv, "--source", str(source))
        assert result.returncode == 2
        assert result.stderr.startswith("workbench: error:") and words in result.stderr
