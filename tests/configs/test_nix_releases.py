"""ONNX Runtime releases (configs/releases.toml) through nix/ort-release.nix, evaluated by real
Nix against the STAND-IN for nixpkgs (tests/nix/standin-nixpkgs.nix: its fetchFromGitHub
records what it is asked for, as nixpkgs cannot be fetched here).

Each expectation below is read from the TOML file with Python's own parser, not from Nix, so a
release whose Nix override drops a dependency, a fix or a flag fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from nix_testing import needs_nix, nix_env

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from workbench.configs.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
RELEASES = tomllib.loads((CONFIGS / "releases.toml").read_text())

pytestmark = needs_nix

GPU = "onnxruntime-python313-cuda12_9-sm90-avx512"
CPU = "onnxruntime-python313-cpu-avx2"
NIXPKGS_OWN_PATCH = "nixpkgs/pkgs/by-name/on/onnxruntime/musl-cstdint.patch"


def release_table(version: str) -> dict:
    return next(r for r in RELEASES["releases"] if r["version"] == version)


def probe(tmp_path: Path, attr: str, configs: Path = CONFIGS, patches: Path = REPO / "patches"):
    result = subprocess.run(
        [
            "nix-instantiate",
            "--eval",
            "--strict",
            "--json",
            "tests/nix/probe.nix",
            "--argstr",
            "configDir",
            str(configs),
            "--argstr",
            "patchDir",
            str(patches),
            "-A",
            attr,
        ],
        cwd=REPO,
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    return result


def probe_json(tmp_path: Path, attr: str, **kwargs):
    result = probe(tmp_path, attr, **kwargs)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def cmake(flags: list[str], name: str) -> list[str]:
    return [m.group(2) for f in flags if (m := re.match(rf"-D{name}(:[A-Z]+)?=(.*)$", f))]


def check_release(attrs: dict, version: str, cuda: bool) -> None:
    """Everything releases.toml says about `version`, in the C++ package's final attributes."""
    table = release_table(version)
    assert attrs["version"] == version
    src = attrs["src"]
    assert src["standin"] == "fetchFromGitHub"
    assert src["args"] == {
        "owner": "microsoft",
        "repo": "onnxruntime",
        "tag": table["tag"],
        "hash": table["hash"],
        "fetchSubmodules": True,
    }
    flags = attrs["cmakeFlags"]
    expected_deps = [d for d in table["deps"] if cuda or not d["cuda_only"]]
    assert expected_deps, "every release here bundles something"
    for dep in expected_deps:
        [value] = cmake(flags, f"FETCHCONTENT_SOURCE_DIR_{dep['fetchcontent']}")
        ref = dep.get("tag") or dep["rev"]
        assert value.endswith(f"-{dep['owner']}-{dep['repo']}-{ref}"), value
    for dep in table["deps"]:
        if dep["cuda_only"] and not cuda:
            assert cmake(flags, f"FETCHCONTENT_SOURCE_DIR_{dep['fetchcontent']}") == []
    # The fetches themselves, with their hashes, as recorded by the stand-in's fetchFromGitHub.
    fetched = {(d["fetchcontent"]): d for d in attrs["passthru"]["workbench"]["release"]["deps"]}
    assert set(fetched) == {d["fetchcontent"] for d in expected_deps}
    for dep in expected_deps:
        assert fetched[dep["fetchcontent"]]["hash"] == dep["hash"]
    for flag in table["cmake_flags"]:
        name, value = re.match(r"([A-Za-z0-9_]+)(?::[A-Z]+)?=(.*)", flag).groups()
        assert cmake(flags, name) == [value], (name, cmake(flags, name))
    # The fixes, in order, each with its reason; CUDA-only ones only in CUDA builds.
    fixes = [f for f in table["fixes"] if cuda or not RELEASES["fixes"][f]["cuda_only"]]
    said = re.findall(r"# workbench: ([a-z0-9-]+) \(ONNX Runtime ([0-9.]+)\): ", attrs["postPatch"])
    assert said == [(f, version) for f in fixes]
    for fix in fixes:
        assert RELEASES["fixes"][fix]["script"].strip() in attrs["postPatch"]
        assert RELEASES["fixes"][fix]["why"].split()[0] in attrs["postPatch"]
    # nixpkgs' own patches are for 1.23.2: none of them.
    assert NIXPKGS_OWN_PATCH not in attrs["patches"]
    for word in table["cxxflags"]:
        assert word in attrs["env"]["CXXFLAGS"].split()
    info = attrs["passthru"]["workbench"]
    assert info["ortVersion"] == version
    assert [f["name"] for f in info["release"]["fixes"]] == fixes


@pytest.mark.parametrize("version", ["1.24.2", "1.22.2"])
def test_a_gpu_variant_of_a_release_has_its_source_pins_fixes_and_flags(tmp_path, version):
    suffix = "-ort" + version.replace(".", "_")
    record = probe_json(tmp_path, f"releaseVariants.{GPU}{suffix}")
    check_release(record["cpp"]["attrs"], version, cuda=True)
    # The workbench's own layer is still on top: the variant's SM and ISA flags.
    attrs = record["cpp"]["attrs"]
    assert cmake(attrs["cmakeFlags"], "CMAKE_CUDA_ARCHITECTURES") == ["90"]
    assert "-mavx512f" in attrs["env"]["CXXFLAGS"].split()
    python = record["python"]["attrs"]
    assert python["pname"] == GPU + suffix
    assert python["name"] == f"{GPU}{suffix}-{version}"
    assert record["spec"]["description"].startswith(f"ONNX Runtime {version} for NVIDIA Hopper")


@pytest.mark.parametrize("version", ["1.24.2", "1.22.2"])
def test_a_cpu_variant_of_a_release_gets_no_cuda_only_pins_or_fixes(tmp_path, version):
    suffix = "-ort" + version.replace(".", "_")
    record = probe_json(tmp_path, f"releaseVariants.{CPU}{suffix}")
    check_release(record["cpp"]["attrs"], version, cuda=False)


@pytest.mark.parametrize(
    ("version", "flavour"),
    [
        ("1.24.2", "onnxruntime-cuda-dyn"),
        ("1.22.2", "onnxruntime-cuda-hybrid"),
        ("1.22.2", "onnxruntime-cpu"),
    ],
)
def test_a_flavour_takes_the_release_the_same_way(tmp_path, version, flavour):
    suffix = "-ort" + version.replace(".", "_")
    record = probe_json(tmp_path, f"flavours.{flavour}{suffix}")
    attrs = record["attrs"]
    check_release(attrs, version, cuda=flavour != "onnxruntime-cpu")
    assert attrs["pname"] == flavour + suffix
    # The flavour's own install steps still run after the release's fixes.
    assert attrs["passthru"]["workbench"]["linkage"] in ("static", "hybrid", "shared")


def test_the_legacy_releases_turn_unit_tests_off_and_so_the_check_phase(tmp_path):
    attrs = probe_json(tmp_path, "flavours.onnxruntime-cpu-ort1_20_1")["attrs"]
    check_release(attrs, "1.20.1", cuda=False)
    assert attrs["doCheck"] is False
    assert cmake(attrs["cmakeFlags"], "onnxruntime_BUILD_UNIT_TESTS") == ["FALSE"]
    assert cmake(attrs["cmakeFlags"], "CMAKE_POLICY_VERSION_MINIMUM") == ["3.5"]


def fetchcontent(flags: list[str]) -> dict[str, str]:
    found = (
        re.match(r"-DFETCHCONTENT_SOURCE_DIR_([A-Z0-9_]+)(?::[A-Z]+)?=(.*)$", f) for f in flags
    )
    return {m.group(1): m.group(2) for m in found if m}


def test_the_pins_own_release_is_nixpkgs_recipe_untouched_and_others_change_only_their_pins(
    tmp_path,
):
    pin = probe_json(tmp_path, f"variants.{GPU}.cpp")["attrs"]
    assert pin["version"] == "1.23.2"
    assert "# workbench: " not in pin.get("postPatch", "")
    assert NIXPKGS_OWN_PATCH in pin["patches"]
    assert pin["passthru"]["workbench"]["release"]["nixpkgsOwn"] is True
    other = probe_json(tmp_path, f"releaseVariants.{GPU}-ort1_24_2.cpp")["attrs"]
    assert other["src"] != pin["src"]
    # Every FETCHCONTENT_SOURCE_DIR_* the release does not pin stays nixpkgs' own.
    mine = {d["fetchcontent"] for d in release_table("1.24.2")["deps"]}
    pinned, overridden = fetchcontent(pin["cmakeFlags"]), fetchcontent(other["cmakeFlags"])
    assert {k: v for k, v in overridden.items() if k not in mine} == {
        k: v for k, v in pinned.items() if k not in mine
    }
    assert all(overridden[k] != pinned.get(k) for k in mine)


def test_what_a_release_cannot_build_is_not_offered_and_says_why(tmp_path):
    blackwell = probe_json(
        tmp_path, "releaseVariants.onnxruntime-python313-cuda12_9-sm120-avx512-ort1_22_2"
    )
    assert "cpp" not in blackwell
    assert "CUTLASS 3.5.1" in blackwell["unavailable"]
    hybrid = probe_json(tmp_path, "flavours.onnxruntime-cuda-hybrid-ort1_24_2")
    assert "GetRuntimePath" in hybrid["unavailable"]
    # Blackwell of 1.24.2 is offered (CUTLASS 4.2.1).
    assert "cpp" in probe_json(
        tmp_path, "releaseVariants.onnxruntime-python313-cuda12_9-sm120-avx512-ort1_24_2"
    )


def test_python_and_nix_agree_on_every_release(tmp_path):
    matrix = load_matrix(CONFIGS)
    names = probe_json(tmp_path, "releaseNames")
    from workbench.configs.variants import expand
    from workbench.planning.availability import unavailable_reason

    python = sorted(
        v.name
        for release in matrix.releases.offered
        if not release.nixpkgs_own
        for v in expand(matrix, release.version)
        if unavailable_reason(v, matrix) is None
    )
    assert sorted(names) == python


SERIES = """\
[[patches]]
name = "only-1-22"
file = "only-1-22.patch"
group = "local"
fixes = "Something 1.22.2 alone needs"
flavours = ["cpu"]
variants = []
enabled = true
releases = ["1.22.2"]

[[patches]]
name = "every-release"
file = "every-release.patch"
group = "local"
fixes = "Something every release needs"
flavours = ["cpu"]
variants = ["onnxruntime-python313-cpu-*"]
enabled = true
"""


def test_a_patch_entry_with_releases_is_applied_to_those_only(tmp_path):
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "series.toml").write_text(SERIES)
    for name in ("only-1-22", "every-release"):
        (patches / f"{name}.patch").write_text(f"--- a/{name}\n+++ b/{name}\n")

    def names(attr: str) -> list[str]:
        record = probe_json(tmp_path, attr, patches=patches)
        return record["attrs"]["passthru"]["workbench"]["patchNames"]

    assert names("flavours.onnxruntime-cpu") == ["every-release"]
    assert names("flavours.onnxruntime-cpu-ort1_22_2") == ["only-1-22", "every-release"]
    assert names("flavours.onnxruntime-cpu-ort1_24_2") == ["every-release"]
    assert names(f"releaseVariants.{CPU}-ort1_22_2.cpp") == ["every-release"]
    # The files follow the names: the release's package has both, after no nixpkgs patch.
    attrs = probe_json(tmp_path, "flavours.onnxruntime-cpu-ort1_22_2", patches=patches)["attrs"]
    assert [Path(p).name.split("-", 1)[1] for p in attrs["patches"]] == [
        "only-1-22.patch",
        "every-release.patch",
    ]


def test_an_unknown_release_in_the_series_is_refused_by_name(tmp_path):
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches)
    text = (
        (patches / "series.toml")
        .read_text()
        .replace('releases = ["1.23.2"]', 'releases = ["1.21.0"]', 1)
    )
    (patches / "series.toml").write_text(text)
    result = probe(tmp_path, f"variants.{CPU}.cpp", patches=patches)
    assert result.returncode != 0
    assert '"1.21.0" is not a release of configs/releases.toml' in result.stderr
