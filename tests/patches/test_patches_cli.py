"""`workbench patches ...` as users run it: a real process over a config copy and a git tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from patch_fixture import write_fixture_series, write_fixture_source

from workbench.configs.matrix import load_matrix
from workbench.patches.checking import check_patch_in_place
from workbench.patches.series import load_series, series_path

REPO = Path(__file__).resolve().parents[2]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def workbench(config: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "80"},
        timeout=60,
        check=False,
    )


@pytest.fixture
def fixture(config_copy: Path, tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "source"
    write_fixture_source(source, units=14)
    write_fixture_series(config_copy, source)
    return config_copy, source


def test_list_enable_disable(fixture: tuple[Path, Path]) -> None:
    config, _ = fixture
    listed = workbench(config, "patches", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].endswith("series.toml: 5 patches, applied in this order")
    assert lines[1].split() == ["1", "on", "tune-light-3", "local", "cpu,", "*"]
    assert all(len(line) <= 80 for line in lines[1:])
    assert workbench(config, "patches", "enable", "gone-file").returncode == 0
    document = json.loads(workbench(config, "patches", "list", "--json").stdout)
    assert [p["enabled"] for p in document["patches"]] == [True, True, False, False, True]
    assert workbench(config, "patches", "disable", "gone-file").returncode == 0
    refused = workbench(config, "patches", "enable", "nope")
    assert refused.returncode == 2
    assert "no patch named 'nope' (the series has: tune-light-3," in refused.stderr
    shown = workbench(config, "patches", "show", "tune-light-7")
    assert shown.returncode == 0 and "+++ b/light_7.cc" in shown.stdout


def test_check_reports_and_exits_one_when_a_patch_fails(fixture: tuple[Path, Path]) -> None:
    config, source = fixture
    clean = workbench(config, "patches", "check", "--source", str(source))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.splitlines()[-1] == "All patches apply."
    everything = workbench(config, "patches", "check", "--source", str(source), "--all")
    assert everything.returncode == 1
    assert "context changed: light_9.cc:8 reads" in everything.stdout
    assert "gone.cc does not exist in the source tree" in everything.stdout
    as_json = json.loads(
        workbench(config, "patches", "check", "--source", str(source), "--all", "--json").stdout
    )
    assert [p["status"] for p in as_json["patches"]] == [
        "applies",
        "applies",
        "fails",
        "already applied",
        "fails",
    ]
    for_cuda = workbench(config, "patches", "check", "--source", str(source), "--for", "cuda-dyn")
    assert for_cuda.stdout.startswith("Checking 0 patches")


def _git(tree: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=tree, check=True, env={**os.environ, **GIT_ENV}, capture_output=True
    )


def test_new_turns_a_working_copy_into_a_patch(fixture: tuple[Path, Path], tmp_path: Path) -> None:
    config, source = fixture
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "commit", "-q", "-m", "upstream")
    text = (source / "light_5.cc").read_text()
    (source / "light_5.cc").write_text(text.replace("+ digits;", "+ 5;"))
    (source / "extra.h").write_text("#pragma once\n")
    index_before = (source / ".git" / "index").read_bytes()
    made = workbench(
        config,
        "patches",
        "new",
        "light-five",
        "--from",
        str(source),
        "--fixes",
        "light_5 returns five more",
        "--flavour",
        "cpu",
    )
    assert made.returncode == 0, made.stderr
    assert "light-five is patch 6 of 6" in made.stdout
    series = load_series(config, load_matrix(config))
    patch = series.get("light-five")
    assert (patch.group, patch.flavours, patch.enabled) == ("local", ("cpu",), True)
    diff = series.file_of(patch).read_text()
    assert "+++ b/light_5.cc" in diff and "+++ b/extra.h" in diff
    # The working copy, its index included, is as it was; the patch reverses onto it.
    assert (source / ".git" / "index").read_bytes() == index_before
    assert check_patch_in_place(source, series.file_of(patch)).status == "already applied"

    before = series_path(config).read_text()
    for args, expected in [
        (["light-five", "--flavour", "cpu"], "already in the series"),
        (["Light Five", "--flavour", "cpu"], "is not a patch name"),
        (["other"], "would apply to nothing"),
        (["other", "--flavour", "gpu"], "not a flavour"),
    ]:
        refused = workbench(config, "patches", "new", *args, "--from", str(source), "--fixes", "x")
        assert refused.returncode == 2 and expected in refused.stderr, refused.stderr
    not_git = workbench(
        config,
        "patches",
        "new",
        "other",
        "--from",
        str(tmp_path),
        "--fixes",
        "x",
        "--flavour",
        "cpu",
    )
    assert "not a git working copy" in not_git.stderr
    _git(source, "stash", "-u")
    unchanged = workbench(
        config,
        "patches",
        "new",
        "other",
        "--from",
        str(source),
        "--fixes",
        "x",
        "--flavour",
        "cpu",
    )
    assert "no changes since the last commit" in unchanged.stderr
    assert series_path(config).read_text() == before
    assert sorted(p.name for p in series.directory.glob("*.patch")) == sorted(
        f"{name}.patch" for name in [p.name for p in series.patches]
    )
