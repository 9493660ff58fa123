"""`workbench iterate cpu --ort 1.24.2`: a full cycle (the derivation's phases, CMake's
configure, the build under the supervisor) of another ONNX Runtime release of the stand-in
flake's package (tests/iterate/standin_flake/flake.nix: onnxruntime-cpu-ort1_24_2, layered as
nix/ort-release.nix layers a release), in its own workspace beside the pin's release's, with
that release's series entries only and its history row saying which release it built.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix

pytestmark = [pytest.mark.slow, needs_tools, *needs_nix]


def cache_value(build: Path, variable: str) -> str:
    """A variable's value in the build directory's CMakeCache.txt (CMake configured it)."""
    text = (build / "CMakeCache.txt").read_text()
    found = re.search(rf"^{re.escape(variable)}:[A-Z]+=(.*)$", text, re.MULTILINE)
    assert found, f"{variable} is not in {build / 'CMakeCache.txt'}"
    return found.group(1)


def test_a_release_goes_through_a_full_cycle_in_its_own_workspace(loop: Loop) -> None:
    # tune-light-7 is for the pin's release only: 1.24.2 goes without it.
    series = loop.series.directory / "series.toml"
    text = re.sub(r'(name = "tune-light-7"\n)', r'\1releases = ["1.23.2"]\n', series.read_text())
    assert 'releases = ["1.23.2"]' in text, text
    series.write_text(text)

    first = loop.iterate_json("--no-smoke", "--ort", "1.24.2")
    build = first["build"]
    assert build["state"] == "succeeded", first
    assert build["name"] == "iterate cpu-ort1_24_2"
    workspace = loop.state / "workspaces" / "cpu-ort1_24_2"
    src, build_dir = workspace / "src", workspace / "src" / "build"
    assert not (loop.state / "workspaces" / "cpu").exists()  # the pin's release untouched
    # Configured as the release's derivation says: its flags and its bundled dependencies.
    assert cache_value(build_dir, "STANDIN_ORT_RELEASE") == "1.24.2"
    onnx = Path(cache_value(build_dir, "FETCHCONTENT_SOURCE_DIR_ONNX"))
    assert (onnx / "STANDIN").read_text().strip() == "onnx/onnx v1.20.1"
    assert "FETCHCONTENT_SOURCE_DIR_CUTLASS" not in (build_dir / "CMakeCache.txt").read_text()
    # Its series: tune-light-3 applied, tune-light-7 (1.23.2 only) not; built and linked.
    assert "+ 3;" in (src / "light_3.cc").read_text()
    assert "+ 70);" not in (src / "light_7.cc").read_text()
    assert "Linking CXX shared library libfixture.so" in first["ninja"]["linked"]
    # The history says which release the cycle built.
    rows = json.loads(loop.bench.run("history", "--json").stdout)["builds"]
    [row] = [r for r in rows if r["id"] == build["id"]]
    assert row["settings"]["ort_version"] == "1.24.2"
    assert row["settings"]["iterate"] == "cpu-ort1_24_2"

    # The pin's release: its own workspace, with both patches; the release's stays as it was.
    pin = loop.iterate_json("--no-smoke")
    assert pin["build"]["state"] == "succeeded" and pin["build"]["name"] == "iterate cpu"
    assert "+ 70);" in (loop.src / "light_7.cc").read_text()
    assert "STANDIN_ORT_RELEASE" not in (loop.build / "CMakeCache.txt").read_text()
    assert cache_value(build_dir, "STANDIN_ORT_RELEASE") == "1.24.2"
    # Again on the release: nothing changed, the build tool alone.
    again = loop.iterate_json("--no-smoke", "--ort", "1.24.2")
    assert again["steps"] == [] and again["ninja"]["no_work"] is True
