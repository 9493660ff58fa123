"""Patches know their ONNX Runtime releases: `patches check --ort V` checks the series entries
for V against V's own source tree (its VERSION_NUMBER), and names the entries V goes without;
`build --ort V --dry-run` names them before anything starts. Real git apply, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs

REPO = Path(__file__).resolve().parents[2]

pytestmark = needs("git")

SERIES = """\
[[patches]]
name = "old-only"
file = "old-only.patch"
group = "local"
fixes = "A fix the pin's release needs"
flavours = ["cpu"]
variants = []
enabled = true
releases = ["1.23.2"]

[[patches]]
name = "everywhere"
file = "everywhere.patch"
group = "local"
fixes = "A fix every release gets"
flavours = ["cpu"]
variants = []
enabled = true
"""

# Both patches change core.cc of the 1.23.2 tree; in 1.24.2 the line `everywhere` edits moved on.
TREE = {
    "1.23.2": "int threads = 1;\nint spin = 0;\n",
    "1.24.2": "int threads = 2;\nint spin = 0;\n",
}
HEADER = "--- a/core.cc\n+++ b/core.cc\n@@ -1,2 +1,2 @@\n"
PATCHES = {
    "old-only": HEADER + " int threads = 1;\n-int spin = 0;\n+int spin = 1;\n",
    "everywhere": HEADER + "-int threads = 1;\n+int threads = 4;\n int spin = 1;\n",
}


def workbench(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


@pytest.fixture
def setup(config_copy: Path, tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    patches = config_copy.parent / "patches"
    (patches / "series.toml").write_text(SERIES)
    for name, text in PATCHES.items():
        (patches / f"{name}.patch").write_text(text)
    trees = {}
    for version, text in TREE.items():
        tree = tmp_path / f"onnxruntime-{version}"
        tree.mkdir()
        (tree / "core.cc").write_text(text)
        (tree / "VERSION_NUMBER").write_text(version + "\n")
        trees[version] = tree
    return config_copy, trees


def test_check_against_each_release_checks_its_entries_on_its_tree(setup) -> None:
    config, trees = setup
    pin = workbench(config, "patches", "check", "--ort", "1.23.2", "--source", str(trees["1.23.2"]))
    assert pin.returncode == 0, pin.stdout + pin.stderr
    newer = workbench(
        config, "patches", "check", "--ort", "1.24.2", "--source", str(trees["1.24.2"]), "--json"
    )
    assert newer.returncode == 1, newer.stderr
    document = json.loads(newer.stdout)
    assert [p["name"] for p in document["patches"]] == ["everywhere"]
    assert document["patches"][0]["status"] == "fails"
    assert document["not_for_release"] == [{"name": "old-only", "releases": ["1.23.2"]}]
    text = workbench(
        config, "patches", "check", "--ort", "1.24.2", "--source", str(trees["1.24.2"])
    )
    assert "old-only: not for ONNX Runtime 1.24.2" in text.stdout


def test_a_tree_of_another_release_is_refused_naming_both(setup) -> None:
    config, trees = setup
    wrong = workbench(
        config, "patches", "check", "--ort", "1.23.2", "--source", str(trees["1.24.2"])
    )
    assert wrong.returncode == 2
    assert "the tree is ONNX Runtime 1.24.2, not 1.23.2" in wrong.stderr
    unknown = workbench(
        config, "patches", "check", "--ort", "1.21.0", "--source", str(trees["1.24.2"])
    )
    assert unknown.returncode == 2
    assert "no ONNX Runtime release '1.21.0'" in unknown.stderr


def test_build_names_the_patches_a_release_goes_without_before_it_starts(setup) -> None:
    config, _ = setup
    dry = workbench(config, "build", "cpu", "--ort", "1.24.2", "--dry-run", "-C", str(REPO))
    assert "onnxruntime-cpu-ort1_24_2" in dry.stdout
    assert "warning: patch old-only is written for ONNX Runtime 1.23.2, not 1.24.2" in dry.stderr
    assert (
        "FETCHCONTENT_SOURCE_DIR_*: ONNX=onnx/onnx v1.20.1, ABSEIL_CPP=abseil/abseil-cpp"
        in dry.stderr
    )
    pin = workbench(config, "build", "cpu", "--dry-run", "-C", str(REPO))
    assert "old-only" not in pin.stderr and "'.#onnxruntime-cpu'" in pin.stdout
