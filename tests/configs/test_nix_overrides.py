"""nix/overrides.nix, nix/flake-outputs.nix and flake.nix, evaluated against a stand-in for nixpkgs.

nixpkgs cannot be fetched here (no network), so tests/nix/standin-nixpkgs.nix stands in for it:
its onnxruntime packages RECORD what `.override` and `.overrideAttrs` are given, and
tests/nix/probe.nix exposes those records as JSON. Everything else is the real nix/ code run by
real Nix.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from needed_tools import needs

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from nix_testing import (
    SAMPLE_APPLIED,
    SAMPLE_FILES,
    SAMPLE_SERIES,
    needs_nix,
    nix_env,
    patch_text,
    repo_copy,
)

from workbench.configs.matrix import load_matrix
from workbench.configs.variants import expand

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
STANDIN = REPO / "tests" / "nix" / "standin-nixpkgs.nix"
PIN = "ed142ab1b3a092c4d149245d0c4126a5d7ea00b0"

H100_AVX512 = "onnxruntime-python313-cuda12_9-sm90-avx512"
H100_AVX512_CUDA12_4 = "onnxruntime-python312-cuda12_4-sm90-avx512"
GRACE_ARMV9 = "onnxruntime-python313-cuda12_9-sm90-armv9"
T4_AVX2 = "onnxruntime-python313-cuda12_9-sm75-avx2"
CPU_AVX2 = "onnxruntime-python313-cpu-avx2"
# The static flavour's series in patches/series.toml (names; each file is NAME.patch).
STATIC_SERIES = [
    "static-init-bridge",
    "static-init-cpu",
    "static-init-provider",
    "static-init-common",
    "static-datatype-loop",
    "static-tensorshape-loop",
    "cuda-static-provider",
    "providers-shared-static",
]
# nixpkgs' own patches of onnxruntime 1.23.2 at the pin, in its order (package.nix: two
# fetchpatch commits of ORT, two musl patches in the tree, Alpine's MATH_NO_EXCEPT patch by
# fetchurl), each as its file name; the stand-in records them as URLs or in-tree paths.
NIXPKGS_OWN_PATCHES = [
    "d6e712c5b7b6260a61e54d1fe40107cf5366ee77.patch",
    "8ebd0bf1cf02414584d15d7244b07fa97d65ba02.patch",
    "musl-execinfo.patch",
    "musl-cstdint.patch",
    "0001-Remove-MATH_NO_EXCEPT-macro.patch",
]


def own_patches(entries: list[str]) -> list[str]:
    """The file names of nixpkgs' own patches at the head of a package's `patches`."""
    head = entries[: len(NIXPKGS_OWN_PATCHES)]
    return [re.split(r"[/-]standin-(?:patch|url)-|/", entry)[-1] for entry in head]


pytestmark = needs_nix


def run_nix(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=REPO,
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def nix_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # --read-write-mode: the stand-in's Python build reads pyproject.toml from the app's source in
    # the store, as nixpkgs' runtime-deps hook reads the wheel built from it.
    return run_nix(
        tmp_path, ["nix-instantiate", "--read-write-mode", "--eval", "--strict", "--json", *args]
    )


def nix_json(tmp_path: Path, *args: str):
    result = nix_eval(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def probe(
    tmp_path: Path, attr: str, configs: Path = CONFIGS, patches: Path = REPO / "patches"
) -> subprocess.CompletedProcess[str]:
    return nix_eval(
        tmp_path,
        "tests/nix/probe.nix",
        "--argstr",
        "configDir",
        str(configs),
        "--argstr",
        "patchDir",
        str(patches),
        "-A",
        attr,
    )


def probe_json(tmp_path: Path, attr: str, configs: Path = CONFIGS, patches: Path | None = None):
    result = probe(tmp_path, attr, configs, patches or REPO / "patches")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def cpp(tmp_path: Path, name: str, configs: Path = CONFIGS):
    return probe_json(tmp_path, f"variants.{name}.cpp", configs)


def configs_with(tmp_path: Path, **settings) -> Path:
    """A copy of configs/ whose settings.toml has `settings` replaced (TOML values)."""
    target = tmp_path / "repo" / "configs"
    shutil.copytree(CONFIGS, target)
    settings_file = target / "settings.toml"
    text = settings_file.read_text()
    for key, value in settings.items():
        text, count = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
        assert count == 1, f"settings.toml has no line for {key}"
    settings_file.write_text(text)
    return target


def cmake_values(flags: list[str], variable: str) -> list[str]:
    found = []
    for flag in flags:
        match = re.match(rf"^-D{variable}(?::[A-Z]+)?=(.*)$", flag)
        if match:
            found.append(match.group(1))
    return found


# --- CUDA architectures -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arch"),
    [(H100_AVX512, "90"), (T4_AVX2, "75"), (GRACE_ARMV9, "90")],
)
def test_cmake_cuda_architectures_come_from_the_variants_sm(tmp_path, name, arch):
    record = cpp(tmp_path, name)
    # nixpkgs' own value (the stand-in's "52;standin-default") is replaced, not shadowed.
    assert cmake_values(record["attrs"]["cmakeFlags"], "CMAKE_CUDA_ARCHITECTURES") == [arch]
    assert record["attrs"]["passthru"]["workbench"]["cmakeCudaArchitectures"] == arch


@pytest.mark.parametrize(
    ("setting", "expected"),
    [('["90", "120"]', "90;120"), ('["sm_90", "12.0", "compute_90"]', "90;120")],
)
def test_settings_cuda_architectures_override_every_cuda_build(tmp_path, setting, expected):
    configs = configs_with(tmp_path, cuda_architectures=setting)
    for name in (T4_AVX2, GRACE_ARMV9):
        flags = cpp(tmp_path, name, configs)["attrs"]["cmakeFlags"]
        assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == [expected]
    flavour = probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn", configs)
    assert cmake_values(flavour["attrs"]["cmakeFlags"], "CMAKE_CUDA_ARCHITECTURES") == [expected]


def test_cuda_flavours_build_their_configured_architectures_never_nixpkgs_default(tmp_path):
    # Without the setting: the flavour's own list (configs/flavours.toml), not nixpkgs'
    # every-architecture default (the stand-in's "52;standin-default"), which takes hours.
    for attr in ("onnxruntime-cuda-dyn", "onnxruntime-cuda-hybrid"):
        flags = probe_json(tmp_path, f"flavours.{attr}")["attrs"]["cmakeFlags"]
        assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == ["90;120"]


def test_an_unknown_cuda_architecture_in_settings_is_refused_by_name(tmp_path):
    configs = configs_with(tmp_path, cuda_architectures='["90", "sm_42"]')
    result = probe(tmp_path, f"variants.{T4_AVX2}.cpp", configs)
    assert result.returncode != 0
    assert 'unknown CUDA architecture "sm_42"' in result.stderr
    assert "configs/settings.toml" in result.stderr


def test_cpu_variants_have_no_cuda_at_all(tmp_path):
    record = cpp(tmp_path, CPU_AVX2)
    assert record["overrideArgs"]["cudaSupport"] is False
    assert record["overrideArgs"]["cudaPackages"] == "<cudaPackages>"  # nixpkgs' default, untouched
    flags = record["attrs"]["cmakeFlags"]
    assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == []
    assert cmake_values(flags, "onnxruntime_NVCC_THREADS") == []
    assert "CUDAFLAGS" not in record["attrs"]["env"]


# --- compiler flags -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        (H100_AVX512, "-mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma"),
        (T4_AVX2, "-mavx2 -mfma"),
        (GRACE_ARMV9, "-march=armv9-a+sve2"),
        ("onnxruntime-python313-cpu-armv8_2", "-march=armv8.2-a+fp16+dotprod"),
        (
            "onnxruntime-python313-cpu-avx512vnni",
            "-mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni",
        ),
    ],
)
def test_isa_flags_reach_c_and_cxx_compiles_only_and_cmake_keeps_o3(tmp_path, name, flags):
    record = cpp(tmp_path, name)
    env = record["attrs"]["env"]
    assert env["CFLAGS"] == flags and env["CXXFLAGS"] == flags
    # Not through the cc-wrapper's NIX_CFLAGS_COMPILE, which lands after every command line.
    assert "NIX_CFLAGS_COMPILE" not in env
    lines = record["derived"]["compileLines"]
    for kind in ("c", "cxx"):
        assert lines[kind] == [*flags.split(), "-O3", "-DNDEBUG"]
    if lines["cudaHost"] is not None:
        assert not set(flags.split()) & set(lines["cudaHost"]), lines["cudaHost"]
        assert lines["cudaHost"][-1] == "-O3"
    platform = "aarch64-linux" if "arm" in name else "x86_64-linux"
    assert record["attrs"]["meta"]["platforms"] == [platform]


def test_an_optimisation_level_in_settings_replaces_cmakes_and_nothing_overrides_it(tmp_path):
    configs = configs_with(tmp_path, optimization_flags='["-O2", "-g1"]')
    record = cpp(tmp_path, T4_AVX2, configs)
    assert record["attrs"]["env"]["CXXFLAGS"] == "-mavx2 -mfma -O2 -g1"
    lines = record["derived"]["compileLines"]
    assert lines["cxx"] == ["-mavx2", "-mfma", "-O2", "-g1", "-DNDEBUG"]
    assert [flag for flag in lines["c"] if flag.startswith("-O")] == ["-O2"]
    # Flags without a level leave CMake's -O3 in place, last.
    configs = configs_with(tmp_path / "other", optimization_flags='["-g1"]')
    lines = cpp(tmp_path, T4_AVX2, configs)["derived"]["compileLines"]
    assert lines["cxx"] == ["-mavx2", "-mfma", "-g1", "-O3", "-DNDEBUG"]


def test_isa_flags_reach_nvccs_host_compiler_only_when_asked(tmp_path):
    assert cpp(tmp_path, H100_AVX512)["derived"]["compileLines"]["cudaHost"] == ["-O3"]
    configs = configs_with(tmp_path, nvcc_host_isa_flags="true")
    record = cpp(tmp_path, H100_AVX512, configs)
    isa = "-mavx512f,-mavx512dq,-mavx512vl,-mavx512bw,-mfma"
    assert record["attrs"]["env"]["CUDAFLAGS"] == f"-Xcompiler={isa}"
    assert record["derived"]["compileLines"]["cudaHost"] == [*isa.split(","), "-O3"]
    # CPU builds have no nvcc to pass them to.
    assert cpp(tmp_path, CPU_AVX2, configs)["derived"]["compileLines"]["cudaHost"] is None


@pytest.mark.parametrize("threads", [1, 3])
def test_nvcc_threads_come_from_settings(tmp_path, threads):
    configs = configs_with(tmp_path, nvcc_threads=str(threads))
    for name in (H100_AVX512, GRACE_ARMV9):
        flags = cpp(tmp_path, name, configs)["attrs"]["cmakeFlags"]
        assert cmake_values(flags, "onnxruntime_NVCC_THREADS") == [str(threads)]


# --- ninja, ccache and what must stay out of the derivation -------------------------------------


def test_ninja_is_used_and_no_job_count_is_baked_in(tmp_path):
    records = [cpp(tmp_path, H100_AVX512), cpp(tmp_path, CPU_AVX2)]
    records += [probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn")]
    records += [probe_json(tmp_path, "flavours.onnxruntime-cpu")]
    for record in records:
        attrs = record["attrs"]
        assert "ninja" in attrs["nativeBuildInputs"]
        assert attrs["enableParallelBuilding"] is True
        assert not any(flag.startswith("-j") for flag in attrs.get("ninjaFlags", []))
        assert not re.search(r'"-j\s*\d*"|\s-j\s*\d', json.dumps(attrs))


def test_ninja_jobs_and_max_jobs_do_not_change_the_packages(tmp_path):
    configs = configs_with(tmp_path, ninja_jobs="7", max_jobs="3")
    for attr in (f"variants.{H100_AVX512}.python", "flavours.onnxruntime-cuda-dyn"):
        assert probe_json(tmp_path, attr, configs) == probe_json(tmp_path, attr)
    # ...while a setting that does belong in the derivation does change it.
    threads = configs_with(tmp_path / "other", nvcc_threads="2")
    assert cpp(tmp_path, H100_AVX512, threads) != cpp(tmp_path, H100_AVX512)


def test_ccache_only_when_settings_ask_for_it(tmp_path):
    plain = cpp(tmp_path, H100_AVX512)
    assert "ccache" not in plain["attrs"]["nativeBuildInputs"]
    assert "preConfigure" not in plain["attrs"]

    configs = configs_with(tmp_path, ccache="true")
    cached = cpp(tmp_path, H100_AVX512, configs)
    assert cached["attrs"]["nativeBuildInputs"][-2:] == ["ninja", "ccache"]
    hook = cached["attrs"]["preConfigure"]
    for launcher in ("C", "CXX", "CUDA"):
        assert f"-DCMAKE_{launcher}_COMPILER_LAUNCHER=ccache" in hook
    assert "extra-sandbox-paths = /var/cache/ccache" in hook


# --- toolkits and Python --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cuda_set", "python_set"),
    [
        (H100_AVX512, "cudaPackages_12_9", "python313Packages"),
        (GRACE_ARMV9, "cudaPackages_12_9", "python313Packages"),
        (CPU_AVX2, None, "python313Packages"),
    ],
)
def test_cuda_packages_and_python_follow_the_toolkit(tmp_path, name, cuda_set, python_set):
    record = probe_json(tmp_path, f"variants.{name}")
    cpp_record, python = record["cpp"], record["python"]
    if cuda_set:
        assert cpp_record["overrideArgs"]["cudaSupport"] is True
        assert cpp_record["overrideArgs"]["cudaPackages"] == f"<{cuda_set}>"
        assert f"{cuda_set}.cuda_nvcc" in cpp_record["attrs"]["nativeBuildInputs"]
    # The wheel inside the C++ build and the Python package use the toolkit's Python.
    assert cpp_record["overrideArgs"]["python3Packages"] == f"<{python_set}>"
    assert cpp_record["overrideArgs"]["pythonSupport"] is True
    assert python["standin"] == f"{python_set}.onnxruntime"
    assert python["overrideArgs"]["onnxruntime"] == cpp_record


def test_python_packages_carry_the_variant_name_and_description(tmp_path):
    for variant in expand(load_matrix(CONFIGS)):
        if variant.name not in (H100_AVX512, CPU_AVX2, GRACE_ARMV9):
            continue
        attrs = probe_json(tmp_path, f"variants.{variant.name}.python")["attrs"]
        assert attrs["pname"] == variant.name
        assert attrs["name"] == f"{variant.name}-1.23.2"
        assert attrs["meta"]["description"] == variant.description
        assert attrs["meta"]["platforms"] == [variant.platform]
        assert attrs["meta"]["broken"] is False
        assert attrs["passthru"]["workbench"]["python"] == variant.python


def test_the_cuda_12_4_variants_are_never_looked_up_and_say_why_and_what_instead(tmp_path):
    from workbench.planning.availability import of_variant

    matrix = load_matrix(CONFIGS)
    variants = [v for v in expand(matrix) if v.toolkit and v.toolkit.name == "cuda12_4"]
    assert len(variants) == 30
    for variant in variants:
        record = probe_json(tmp_path, f"variants.{variant.name}")
        assert set(record) == {"spec", "unavailable"}  # no cpp/python: never evaluated
        said = of_variant(variant, matrix)
        assert said.evaluates is False
        # Both sides say the same sentence.
        assert record["unavailable"] == said.reason
        assert "cudaPackages_12_4" in said.reason and "aliases.nix" in said.reason
        assert said.instead.startswith(
            variant.name.replace("python312-cuda12_4", "python313-cuda12_9")
        )
        assert "575.51.03" in said.instead
    # The caveat (nvcc 12.4 cannot target Blackwell) stays as well.
    assert {v.name for v in variants if v.caveat} == {
        v.name for v in variants if v.sm.name in ("sm100", "sm120")
    }


def test_the_standin_throws_for_cuda_12_4_as_nixpkgs_does_and_or_does_not_catch_it(tmp_path):
    expr = (
        "let pkgs = import ./tests/nix/standin-nixpkgs.nix { }; in "
        "(pkgs.cudaPackages_12_4 or pkgs.cudaPackages_12_9).cudaVersion"
    )
    result = nix_eval(tmp_path, "-E", expr)
    assert result.returncode != 0
    assert "CUDA 12.4 has been removed from Nixpkgs" in result.stderr
    sets = nix_json(
        tmp_path,
        "-E",
        "let pkgs = import ./tests/nix/standin-nixpkgs.nix { }; in "
        'map (v: pkgs."cudaPackages_${v}".cudaVersion) [ "12_6" "12_8" "12_9" "13_0" ]',
    )
    assert sets == ["12.6", "12.8", "12.9", "13.0"]
    pin = load_matrix(CONFIGS)
    assert pin.pin_cuda_sets == tuple(f"cudaPackages_{v}" for v in ("12_6", "12_8", "12_9", "13_0"))


def test_every_package_the_flake_offers_evaluates_against_the_standin(tmp_path):
    expr = """
    { repo }:
    let
      out = (import (repo + "/flake.nix")).outputs {
        self = { outPath = repo; };
        nixpkgs = { outPath = repo + "/tests/nix/standin-nixpkgs.nix"; };
      };
      each = system: builtins.mapAttrs (_: p: builtins.seq (p.standinRecord or p) true)
        out.packages.${system};
    in { x86 = each "x86_64-linux"; arm = each "aarch64-linux"; }
    """
    result = nix_eval(tmp_path, "-E", expr, "--argstr", "repo", str(REPO))
    assert result.returncode == 0, result.stderr
    offered = json.loads(result.stdout)
    matrix = load_matrix(CONFIGS)
    available = {v.name for v in expand(matrix) if v.toolkit is None or v.toolkit.at_pin}
    assert len(available) == 36
    assert available <= set(offered["x86"]) | set(offered["arm"])
    assert not any("cuda12_4" in name for name in [*offered["x86"], *offered["arm"]])


def test_isa_variants_run_no_tests_and_no_import_check_where_they_are_built(tmp_path):
    for name in (CPU_AVX2, "onnxruntime-python313-cpu-avx512vnni", H100_AVX512):
        record = probe_json(tmp_path, f"variants.{name}")
        assert record["cpp"]["derived"]["runsTestsAtBuild"] is False
        flags = record["cpp"]["attrs"]["cmakeFlags"]
        assert cmake_values(flags, "onnxruntime_BUILD_UNIT_TESTS") == ["FALSE"]
        assert record["python"]["derived"]["runsImportCheckAtBuild"] is False
        assert record["cpp"]["attrs"]["passthru"]["workbench"]["skipsBuildTimeChecks"] is True
    # The CPU flavour has no ISA flags, so nothing warns about skipped checks; it still runs
    # no unit tests, because it is a flavour (the builder flake's library, not nixpkgs' package).
    cpu = probe_json(tmp_path, "flavours.onnxruntime-cpu")
    assert cpu["attrs"]["passthru"]["workbench"]["skipsBuildTimeChecks"] is False
    assert cpu["attrs"]["doCheck"] is False and cpu["derived"]["runsTestsAtBuild"] is False


def test_static_builds_turn_nixpkgs_lto_off_and_keep_nvcc_out_of_the_closure(tmp_path):
    series = (REPO / "patches" / "series.toml").read_text()
    configs, patches = repo_copy(
        tmp_path, series, {name: f"{name}.patch" for name in STATIC_SERIES}
    )
    for attr in ("flavours.onnxruntime-cpu", "flavours.onnxruntime"):
        record = probe_json(tmp_path, attr, configs, patches)
        flags = record["attrs"]["cmakeFlags"]
        assert cmake_values(flags, "onnxruntime_ENABLE_LTO") == ["FALSE"]
        assert record["derived"]["violatesDisallowedRequisites"] is False
    static = probe_json(tmp_path, "flavours.onnxruntime", configs, patches)["attrs"]
    assert static["disallowedRequisites"] == ["cudaPackages_12_9.cuda_nvcc.bin"]  # kept
    # Every file of the output scrubbed of nvcc, archives included.
    assert static["postFixup"].startswith('find "$out" -type f')
    assert "remove-references-to" in static["postFixup"]
    # The shared builds keep nixpkgs' value and scrub.
    dyn = probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn")
    assert cmake_values(dyn["attrs"]["cmakeFlags"], "onnxruntime_ENABLE_LTO") == ["FALSE"]
    assert dyn["derived"]["violatesDisallowedRequisites"] is False


def test_the_standin_refuses_an_env_name_that_is_also_an_attribute(tmp_path):
    expr = """
    let pkgs = import ./tests/nix/standin-nixpkgs.nix { };
        p = pkgs.onnxruntime.overrideAttrs (old: { CXXFLAGS = "-x"; env = { CXXFLAGS = "-y"; }; });
    in p.standinRecord.derived
    """
    result = nix_eval(tmp_path, "-E", expr)
    assert result.returncode != 0
    assert "The following attributes are overlapping: CXXFLAGS" in result.stderr
    # With __structuredAttrs only `env` reaches the environment: our flags must be in it.
    expr = """
    let pkgs = import ./tests/nix/standin-nixpkgs.nix { };
        p = pkgs.onnxruntime.overrideAttrs (old: { __structuredAttrs = true; CXXFLAGS = "-lost"; });
    in p.standinRecord.derived.compileLines.cxx
    """
    assert nix_json(tmp_path, "-E", expr) == ["-O3", "-DNDEBUG"]


def test_the_app_passes_nixpkgs_runtime_dependency_check_at_the_pin(tmp_path):
    result = flake_outputs(tmp_path)
    assert result.returncode == 0, result.stderr
    # ...and the check is real: the bounds the app had before are refused with nixpkgs' words.
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("flake.nix", "README.md"):
        shutil.copy(REPO / name, repo / name)
    for name in ("nix", "configs", "patches", "workbench", "tests"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    text = (REPO / "pyproject.toml").read_text()
    old = re.sub(r'"textual>=[^"]*"', '"textual>=8.2,<9"', text)
    (repo / "pyproject.toml").write_text(old)
    result = nix_eval(
        tmp_path, "-E", OUTPUTS_SUMMARY, "--argstr", "repo", str(repo), "--argstr", "rev", ""
    )
    assert result.returncode != 0
    assert "textual>=8.2,<9 not satisfied by version 6.2.1" in result.stderr


# --- linkage flavours and the patch series -----------------------------------------------------

# Flavour name -> its package in probe.nix.
FLAVOUR_ATTRS = {
    "cpu": "onnxruntime-cpu",
    "cuda-hybrid": "onnxruntime-cuda-hybrid",
    "cuda-dyn": "onnxruntime-cuda-dyn",
    "cuda-static": "onnxruntime",
}


def package(tmp_path: Path, target: str, configs: Path, patches: Path):
    """The C++ package's record of a flavour (by flavour name) or a variant."""
    attr = (
        f"flavours.{FLAVOUR_ATTRS[target]}" if target in FLAVOUR_ATTRS else f"variants.{target}.cpp"
    )
    return probe_json(tmp_path, attr, configs, patches)


def applied(tmp_path: Path, target: str, configs: Path, patches: Path) -> list[str]:
    """passthru.workbench.patchNames of a flavour's or variant's C++ package."""
    return package(tmp_path, target, configs, patches)["attrs"]["passthru"]["workbench"][
        "patchNames"
    ]


def store_path_of(tmp_path: Path, file: Path) -> str:
    """Where Nix puts `file` under its own name, computed from its contents by Nix's own tools."""
    nar_hash = run_nix(tmp_path, ["nix-hash", "--type", "sha256", "--base32", str(file)])
    assert nar_hash.returncode == 0, nar_hash.stderr
    argv = ["nix-store", "--print-fixed-path", "--recursive", "sha256", nar_hash.stdout.strip()]
    fixed = run_nix(tmp_path, [*argv, file.name])
    assert fixed.returncode == 0, fixed.stderr
    return fixed.stdout.strip()


def store_basename(path: str) -> str:
    assert re.match(r"^/nix/store/[0-9a-z]{32}-", path), path
    return re.sub(r"^/nix/store/[0-9a-z]{32}-", "", path)


def set_enabled(patches: Path, name: str, enabled: bool) -> None:
    """Flip `enabled` of one [[patches]] table in series.toml, as `workbench patches` would."""
    series = patches / "series.toml"
    text = series.read_text()
    block = re.compile(rf'(name = "{re.escape(name)}"\n(?:(?!\[\[patches\]\]).*\n)*?)enabled = \w+')
    text, count = block.subn(rf"\g<1>enabled = {str(enabled).lower()}", text)
    assert count == 1, f"no [[patches]] table named {name}"
    series.write_text(text)


@pytest.mark.parametrize("target", sorted(SAMPLE_APPLIED))
def test_each_package_applies_exactly_its_enabled_patches_in_series_order(tmp_path, target):
    configs, patches = repo_copy(tmp_path)
    attrs = package(tmp_path, target, configs, patches)["attrs"]
    expected = SAMPLE_APPLIED[target]
    assert attrs["passthru"]["workbench"]["patchNames"] == expected
    # nixpkgs' own patch first, then the series' files, each its own store path named after
    # the file and holding exactly that file's contents.
    assert own_patches(attrs["patches"]) == NIXPKGS_OWN_PATCHES
    paths = attrs["patches"][len(NIXPKGS_OWN_PATCHES) :]
    assert [store_basename(path) for path in paths] == [SAMPLE_FILES[name] for name in expected]
    # The store path is the one of that file's contents (nix-instantiate --eval computes paths
    # without copying, so the contents are compared through the hash Nix names them by).
    files = [patches / SAMPLE_FILES[name] for name in expected]
    assert [file.read_text() for file in files] == [patch_text(name) for name in expected]
    assert paths == [store_path_of(tmp_path, file) for file in files]


def test_a_variants_python_package_carries_its_cpp_packages_patches(tmp_path):
    configs, patches = repo_copy(tmp_path)
    record = probe_json(tmp_path, f"variants.{H100_AVX512}.python", configs, patches)
    assert record["attrs"]["passthru"]["workbench"]["patchNames"] == SAMPLE_APPLIED[H100_AVX512]
    assert record["overrideArgs"]["onnxruntime"] == package(tmp_path, H100_AVX512, configs, patches)


def test_every_flavour_and_variant_selection_from_the_probe(tmp_path):
    configs, patches = repo_copy(tmp_path)
    series = probe_json(tmp_path, "series", configs, patches)
    assert series["names"] == [
        "zeta-static-init",
        "alpha-bridge",
        "mid-disabled",
        "beta-all-variants",
        "gamma-sm90",
        "delta-cpu",
        "epsilon.exact_name",
    ]
    selection = series["applied"]
    assert {k: selection[k] for k in SAMPLE_APPLIED} == SAMPLE_APPLIED
    # "*" is every variant (66), and never a flavour: flavours get only what names them.
    variants = [v.name for v in expand(load_matrix(configs))]
    assert set(selection) == set(variants) | set(FLAVOUR_ATTRS)
    assert all("beta-all-variants" in selection[name] for name in variants)
    assert not any("beta-all-variants" in selection[name] for name in FLAVOUR_ATTRS)
    assert not any("mid-disabled" in names for names in selection.values())
    assert sum("alpha-bridge" in selection[name] for name in variants) == 30  # 15 SM x ISA pairs


def test_disabling_or_enabling_a_patch_in_the_toml_changes_exactly_that(tmp_path):
    configs, patches = repo_copy(tmp_path)
    set_enabled(patches, "alpha-bridge", False)
    assert applied(tmp_path, "cuda-static", configs, patches) == ["zeta-static-init"]
    assert applied(tmp_path, "cuda-dyn", configs, patches) == []
    assert applied(tmp_path, H100_AVX512, configs, patches) == ["beta-all-variants", "gamma-sm90"]

    # Enabled, the patch without a file is selected, in its place, and its file is asked for.
    set_enabled(patches, "alpha-bridge", True)
    set_enabled(patches, "mid-disabled", True)
    (patches / "mid-disabled.patch").write_text(patch_text("mid-disabled"))
    assert applied(tmp_path, "cpu", configs, patches) == ["mid-disabled", "gamma-sm90", "delta-cpu"]
    assert applied(tmp_path, H100_AVX512, configs, patches) == [
        "alpha-bridge",
        "mid-disabled",
        "beta-all-variants",
        "gamma-sm90",
    ]


def test_the_repositorys_series_gives_the_static_flavour_its_series_and_nothing_else(tmp_path):
    series = probe_json(tmp_path, "series")
    assert series["names"] == STATIC_SERIES
    assert series["applied"]["cuda-static"] == STATIC_SERIES
    assert all(
        names == [] for target, names in series["applied"].items() if target != "cuda-static"
    )


def test_the_static_flavour_gets_its_series_ort_static_providers_and_static_libraries(tmp_path):
    series = (REPO / "patches" / "series.toml").read_text()
    configs, patches = repo_copy(
        tmp_path, series, {name: f"{name}.patch" for name in STATIC_SERIES}
    )
    record = probe_json(tmp_path, "flavours.onnxruntime", configs, patches)
    attrs = record["attrs"]
    assert own_patches(attrs["patches"]) == NIXPKGS_OWN_PATCHES
    assert [store_basename(path) for path in attrs["patches"][len(NIXPKGS_OWN_PATCHES) :]] == [
        f"{n}.patch" for n in STATIC_SERIES
    ]
    assert attrs["passthru"]["workbench"]["patchNames"] == STATIC_SERIES

    # ORT_STATIC_PROVIDERS for C++ and CUDA, static libraries, no scrub of a .so that is not built.
    assert attrs["env"]["CXXFLAGS"] == "-DORT_STATIC_PROVIDERS"
    assert attrs["env"]["CUDAFLAGS"] == "-DORT_STATIC_PROVIDERS"
    flags = attrs["cmakeFlags"]
    assert cmake_values(flags, "onnxruntime_BUILD_SHARED_LIB") == ["FALSE"]
    assert cmake_values(flags, "BUILD_SHARED_LIBS") == ["FALSE"]
    assert "remove-references-to" in attrs["postFixup"]  # every archive scrubbed of nvcc
    assert attrs["pname"] == "onnxruntime"
    assert record["overrideArgs"]["cudaSupport"] is True
    assert record["overrideArgs"]["cudaPackages"] == "<cudaPackages_12_9>"
    assert record["overrideArgs"]["pythonSupport"] is False


def test_a_missing_patch_file_throws_naming_the_series_the_patch_and_where_to_get_it(tmp_path):
    files = {name: file for name, file in SAMPLE_FILES.items() if name != "gamma-sm90"}
    configs, patches = repo_copy(tmp_path, files=files)
    result = probe(tmp_path, "flavours.onnxruntime-cpu.attrs.patches", configs, patches)
    assert result.returncode != 0
    assert (
        "patch gamma-sm90 (file gamma-sm90.patch, in patches/series.toml) is missing"
        in result.stderr
    )
    assert f"{patches}/gamma-sm90.patch does not exist" in result.stderr
    assert "workbench patches import DIR --source ORT_SOURCE" in result.stderr
    assert "workbench patches disable gamma-sm90" in result.stderr
    # Packages that do not select it never look for it.
    assert applied(tmp_path, "cuda-static", configs, patches) == SAMPLE_APPLIED["cuda-static"]
    assert applied(tmp_path, CPU_AVX2, configs, patches) == SAMPLE_APPLIED[CPU_AVX2]


def test_the_repositorys_static_series_without_its_files_says_which_is_missing(tmp_path):
    result = probe(tmp_path, "flavours.onnxruntime.attrs.patches")
    assert result.returncode != 0
    assert (
        "patch static-init-bridge (file static-init-bridge.patch, in patches/series.toml)"
        in result.stderr
    )
    assert "git add" in result.stderr


def _replace(old: str, new: str):
    def change(text: str) -> str:
        assert text.count(old) == 1, f"the test's edit does not apply: {old!r}"
        return text.replace(old, new)

    return change


BAD_SERIES = {
    "unknown-flavour": (
        _replace('flavours = ["cuda-static", "cuda-dyn"]', 'flavours = ["cuda-static", "gpu"]'),
        ['patch "alpha-bridge"', "flavours:", '"gpu" is not a flavour of configs/flavours.toml'],
    ),
    "bad-name": (
        _replace('name = "delta-cpu"', 'name = "Delta CPU"'),
        ["[[patches]] table 6", "name:", '"Delta CPU" is not allowed'],
    ),
    "duplicate-name": (
        _replace('name = "gamma-sm90"', 'name = "alpha-bridge"'),
        ['patch "alpha-bridge"', "name:", "names must be unique"],
    ),
    "file-with-a-directory": (
        _replace('file = "delta-cpu.patch"', 'file = "../delta-cpu.patch"'),
        ['patch "delta-cpu"', "file:", "no directories"],
    ),
    "bad-variant-pattern": (
        _replace('variants = ["*-sm90-*"]', 'variants = ["*.sm90.*"]'),
        ['patch "gamma-sm90"', "variants:", '"*.sm90.*" is not a variant name or pattern'],
    ),
    "pattern-matching-nothing": (
        _replace('variants = ["*-sm90-*"]', 'variants = ["*-sm91-*"]'),
        ['patch "gamma-sm90"', "variants:", '"*-sm91-*" matches no variant'],
    ),
    "bad-group": (
        _replace('group = "portability"', 'group = "Portability fixes"'),
        ['patch "beta-all-variants"', "group:", '"Portability fixes" is not allowed'],
    ),
    "blank-fixes": (
        _replace('fixes = "Static initialisation order"', 'fixes = "  "'),
        ['patch "zeta-static-init"', "fixes:", "a sentence saying what the patch fixes"],
    ),
    "enabled-not-a-bool": (
        _replace("enabled = false", 'enabled = "no"'),
        ['patch "mid-disabled"', "enabled:", "not true or false"],
    ),
    "unknown-key": (
        _replace('fixes = "Every variant, no flavour"', 'fixes = "Every variant"\nfix = "typo"'),
        ['patch "beta-all-variants"', "fix: unknown key"],
    ),
    "missing-key": (
        _replace('group = "static-init"\n', ""),
        ['patch "zeta-static-init"', 'key "group" is missing'],
    ),
    "unknown-top-level-key": (
        lambda text: "version = 2\n" + text,
        ['unknown top-level key "version"'],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SERIES))
def test_a_bad_series_fails_every_package_naming_the_file_the_patch_and_the_key(tmp_path, case):
    change, expected = BAD_SERIES[case]
    configs, patches = repo_copy(tmp_path, change(SAMPLE_SERIES))
    # The whole series is checked whichever package asks: the CPU variant gets neither
    # alpha-bridge nor gamma-sm90, and still fails on them.
    for attr in (
        f"variants.{CPU_AVX2}.cpp.attrs.passthru",
        "flavours.onnxruntime-cpu.attrs.passthru",
    ):
        result = probe(tmp_path, attr, configs, patches)
        assert result.returncode != 0, f"{case}: {attr} evaluated"
        assert "patches/series.toml: " in result.stderr
        for text in expected:
            assert text in result.stderr, f"{case}: {text!r} not in {result.stderr}"


def test_a_missing_series_file_is_named(tmp_path):
    configs, patches = repo_copy(tmp_path, series=None)
    result = probe(tmp_path, "flavours.onnxruntime-cpu.attrs.passthru", configs, patches)
    assert result.returncode != 0
    assert f"patches/series.toml: {patches}/series.toml does not exist" in result.stderr


def test_a_series_without_patches_applies_none(tmp_path):
    configs, patches = repo_copy(tmp_path, "# nothing yet\n", files={})
    assert applied(tmp_path, "cuda-static", configs, patches) == []
    assert applied(tmp_path, H100_AVX512, configs, patches) == []


def test_settings_enabled_patches_is_neither_read_nor_required(tmp_path):
    configs, patches = repo_copy(tmp_path)
    before = package(tmp_path, H100_AVX512, configs, patches)
    settings = configs / "settings.toml"
    text = settings.read_text()
    # Still present with a value: ignored (the series decides).
    if re.search(r"(?m)^enabled_patches = ", text):
        settings.write_text(
            re.sub(r"(?m)^enabled_patches = .*$", 'enabled_patches = ["x.patch"]', text)
        )
    else:
        settings.write_text(text + '\nenabled_patches = ["x.patch"]\n')
    assert package(tmp_path, H100_AVX512, configs, patches) == before
    # Gone: fine too.
    settings.write_text(re.sub(r"(?m)^enabled_patches = .*\n", "", settings.read_text()))
    assert "enabled_patches" not in settings.read_text()
    assert package(tmp_path, H100_AVX512, configs, patches) == before


STANDIN_STORE = "/nix/store/00000000000000000000000000000000-standin-"
# package.nix's postInstall at 1.23.2 (copy_strip_binary.sh's headers).
NIXPKGS_POST_INSTALL = (
    "install -m644 -Dt $out/include \\\n"
    "  ../include/onnxruntime/core/framework/provider_options.h \\\n"
    "  ../include/onnxruntime/core/providers/cpu/cpu_provider_factory.h \\\n"
    "  ../include/onnxruntime/core/session/onnxruntime_*.h\n"
)
STATIC_CUDA_LIBRARIES = [
    f"cudaPackages_12_9.{name}.static"
    for name in ("libcublas", "libcurand", "libcusparse", "libcufft")
]


@pytest.mark.parametrize("name", ["cpu", "cuda-hybrid", "cuda-dyn", "cuda-static"])
def test_each_flavours_install_and_fixup_steps(tmp_path, name):
    series = (REPO / "patches" / "series.toml").read_text()
    configs, patches = repo_copy(
        tmp_path, series, {patch: f"{patch}.patch" for patch in STATIC_SERIES}
    )
    flavour = load_matrix(CONFIGS).flavour(name)
    record = package(tmp_path, name, configs, patches)
    attrs, args = record["attrs"], record["overrideArgs"]
    install, fixup = attrs["postInstall"], attrs["postFixup"]
    static_core = flavour.linkage != "shared"

    # nixpkgs' own step first, then ours on a line of its own.
    assert install.startswith(NIXPKGS_POST_INSTALL)
    assert install[len(NIXPKGS_POST_INSTALL) :].lstrip("\n").startswith('mkdir -p "$out/lib"\n')
    # No unit tests, the promised layout in passthru, everything in `out`: but nixpkgs'
    # separateDebugInfo = true still gives the derivation a `debug` output, with no reference
    # checks on it (make-derivation.nix), and __structuredAttrs turns the recipe's
    # disallowedRequisites into outputChecks.out.
    assert attrs["doCheck"] is False and record["derived"]["runsTestsAtBuild"] is False
    assert attrs["passthru"]["workbench"]["produces"] == list(flavour.produces)
    assert attrs["passthru"]["workbench"]["linkage"] == flavour.linkage
    assert attrs["outputs"] == ["out"]
    assert attrs["separateDebugInfo"] is True and attrs["__structuredAttrs"] is True
    built = probe_json(tmp_path, f"built.{flavour.attr}", configs, patches)
    assert built["outputs"] == ["out", "debug"]
    checks = record["derived"]["outputChecks"]
    assert set(checks) == {"out", "debug"} and checks["debug"] == {}
    nvcc_bin = ["cudaPackages_12_9.cuda_nvcc.bin"] if flavour.cuda else []
    assert checks["out"] == {"disallowedRequisites": nvcc_bin}
    # nixpkgs' GetRuntimePath substitution (what the hybrid core's dlopen relies on) is kept.
    assert 'PathString(\\"$out/lib/\\")' in attrs["postPatch"]

    # The static core: ORT's _deps archives, the archives of the inputs ORT found in nixpkgs
    # (protobuf made static), checked before the build, and one merged archive.
    assert ('find _deps -name "$pattern"' in install) is static_core
    assert ('"$AR" -M < merge.mri' in install) is static_core
    # The protobuf archive is the one of the protobuf ORT was built with: the recipe's
    # protobuf' (the static protobuf passed in, with nixpkgs' nvcc fix on top, passthru.protobuf),
    # never the static protobuf itself, a different derivation.
    inputs = [
        f"libcpuinfo.a {STANDIN_STORE}cpuinfo/lib",
        f"libprotobuf-lite.a {built['protobuf']}/lib",
    ]
    if static_core:
        assert args["protobuf"]["overrideArgs"] == {"enableShared": False}
        assert args["protobuf"]["overrideAttrsCalls"] == 0
        assert built["protobufRecord"]["overrideArgs"] == {"enableShared": False}
        assert built["protobufRecord"]["attrs"]["patches"][-1].endswith(
            "0010-Workaround-nvcc-bug-in-message_lite.h.patch"
        )
        assert built["protobuf"] != built["staticProtobuf"]
        assert f"{built['staticProtobuf']}/lib" not in install
        assert "\n".join(inputs) in install
        assert "\n".join(inputs) in attrs["preConfigure"]
        assert "exit 1" in attrs["preConfigure"]
    else:
        assert "protobuf" not in args and "preConfigure" not in attrs
        assert "libcpuinfo.a" not in install

    # Hybrid: both providers copied beside the core (or the build fails naming one).
    hybrid_loop = "for f in libonnxruntime_providers_cuda.so libonnxruntime_providers_shared.so"
    assert (hybrid_loop in install) is (flavour.linkage == "hybrid")

    # Static CUDA: the math libraries' static outputs, a device link for the configured
    # architectures with nixpkgs' nvcc, and the provider archive required.
    nvcc = f"{STANDIN_STORE}cudaPackages_12_9.cuda_nvcc.bin"
    dlink = (
        f'"{nvcc}/bin/nvcc" -dlink -gencode=arch=compute_90,code=sm_90 '
        '-gencode=arch=compute_120,code=sm_120 -o "$out/lib/cuda_device_link.o" $objects'
    )
    static_cuda = name == "cuda-static"
    assert (dlink in install) is static_cuda
    assert ("produced no libonnxruntime_providers_cuda.a" in install) is static_cuda
    static_libraries = [lib for lib in attrs["buildInputs"] if lib in STATIC_CUDA_LIBRARIES]
    assert static_libraries == (STATIC_CUDA_LIBRARIES if static_cuda else [])

    # CUDA: cuDNN copied for consumers, NCCL off, every file scrubbed of nvcc.
    cudnn = f'cp -L {STANDIN_STORE}cudaPackages_12_9.cudnn.lib/lib/libcudnn*.so* "$out/lib/cudnn/"'
    assert (cudnn in install) is flavour.cuda
    if flavour.cuda:
        assert args["ncclSupport"] is False
        assert cmake_values(attrs["cmakeFlags"], "onnxruntime_USE_NCCL") == ["FALSE"]
        assert fixup == (
            'find "$out" -type f -print0 | xargs -0 --no-run-if-empty '
            f'remove-references-to -t "{nvcc}"\n'
        )
    else:
        assert "ncclSupport" not in args and fixup == ""


def test_shared_and_cpu_flavours(tmp_path):
    dyn = probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn")
    assert cmake_values(dyn["attrs"]["cmakeFlags"], "onnxruntime_BUILD_SHARED_LIB") == ["TRUE"]
    assert "CXXFLAGS" not in dyn["attrs"]["env"]
    assert "remove-references-to" in dyn["attrs"]["postFixup"]  # every file, not one .so

    cpu = probe_json(tmp_path, "flavours.onnxruntime-cpu")
    assert cpu["overrideArgs"]["cudaSupport"] is False
    assert cmake_values(cpu["attrs"]["cmakeFlags"], "onnxruntime_BUILD_SHARED_LIB") == ["FALSE"]
    assert cmake_values(cpu["attrs"]["cmakeFlags"], "BUILD_SHARED_LIBS") == ["FALSE"]
    assert cpu["attrs"]["pname"] == "onnxruntime-cpu"


# --- the flake ----------------------------------------------------------------------------------

# flake.nix's own outputs function, given the stand-in as its nixpkgs input.
OUTPUTS_SUMMARY = """
{ repo, rev }:
let
  out = (import (repo + "/flake.nix")).outputs {
    self = { outPath = repo; };
    nixpkgs = { outPath = repo + "/tests/nix/standin-nixpkgs.nix"; }
      // (if rev == "" then { } else { inherit rev; });
  };
in {
  packages = builtins.mapAttrs (_: builtins.attrNames) out.packages;
  apps = builtins.mapAttrs (_: builtins.mapAttrs (_: app: app)) out.apps;
  workbench = out.packages.x86_64-linux.workbench.standinRecord;
  static = out.packages.x86_64-linux.onnxruntime-cuda-dyn.standinRecord.importArgs;
  shell = out.devShells.x86_64-linux.default.standinRecord;
}
"""


def flake_outputs(tmp_path: Path, rev: str = ""):
    return nix_eval(
        tmp_path, "-E", OUTPUTS_SUMMARY, "--argstr", "repo", str(REPO), "--argstr", "rev", rev
    )


def test_flake_nix_parses(tmp_path):
    result = run_nix(tmp_path, ["nix-instantiate", "--parse", "flake.nix"])
    assert result.returncode == 0, result.stderr
    for path in sorted((REPO / "nix").glob("*.nix")):
        result = run_nix(tmp_path, ["nix-instantiate", "--parse", str(path)])
        assert result.returncode == 0, f"{path}: {result.stderr}"
    text = (REPO / "flake.nix").read_text()
    assert f'"github:NixOS/nixpkgs/{PIN}"' in text
    assert load_matrix(CONFIGS).nixpkgs_rev == PIN


def test_flake_offers_every_variant_on_its_platform_plus_flavours_and_workbench(tmp_path):
    result = flake_outputs(tmp_path, PIN)
    assert result.returncode == 0, result.stderr
    outputs = json.loads(result.stdout)
    matrix = load_matrix(CONFIGS)
    # Every offered release of configs/releases.toml: the pin's own under the seeds' names, the
    # others with their release in the name, less what the release cannot build (the Python
    # side's availability decides the same, so the two sides must agree).
    from workbench.planning.availability import of_flavour, unavailable_reason

    variants = [
        v
        for release in matrix.releases.offered
        for v in expand(matrix, release.version)
        if unavailable_reason(v, matrix) is None
    ]
    assert any(v.name.endswith("-ort1_24_2") for v in variants)
    assert any(v.name.endswith("-ort1_22_2") for v in variants)
    extra = {
        f.attr + release.suffix
        for release in matrix.releases.offered
        for f in matrix.flavours
        if of_flavour(f, matrix, None, release.version).evaluates
    } | {"workbench", "default"}
    assert "onnxruntime-cuda-hybrid-ort1_24_2" not in extra  # not offered: releases.toml says why
    for system in ("x86_64-linux", "aarch64-linux"):
        expected = {v.name for v in variants if v.platform == system} | extra
        assert set(outputs["packages"][system]) == expected
    every = set(outputs["packages"]["x86_64-linux"]) | set(outputs["packages"]["aarch64-linux"])
    assert {v.name for v in variants} <= every

    apps = outputs["apps"]["x86_64-linux"]
    assert set(apps) == {"default", "workbench", "debug-bt"}
    assert apps["default"]["type"] == "app"
    assert apps["workbench"]["program"].endswith("-workbench-0.1.0/bin/workbench")
    assert apps["debug-bt"]["program"].endswith("-debug-bt/bin/debug-bt")

    # nixpkgs is imported with allowUnfree (CUDA) and without a global cudaSupport.
    assert outputs["static"]["config"] == {"allowUnfree": True}


def test_flake_workbench_package_follows_pyproject(tmp_path):
    outputs = json.loads(flake_outputs(tmp_path).stdout)
    record = outputs["workbench"]
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    args = record["args"]
    assert record["standin"] == "python313Packages.buildPythonApplication"
    assert args["pname"] == pyproject["project"]["name"]
    assert args["version"] == pyproject["project"]["version"]
    assert args["pyproject"] is True
    assert args["build-system"] == ["python313Packages.hatchling"]
    wanted = [
        re.split(r"[<>=!~;\s\[]", dep, maxsplit=1)[0]
        for dep in pyproject["project"]["dependencies"]
        if "python_version" not in dep
    ]
    assert [dep.removeprefix("python313Packages.") for dep in args["dependencies"]] == wanted
    assert args["meta"]["mainProgram"] == "workbench"
    assert args["src"].endswith("-workbench-source")


def test_flake_dev_shell_has_python_with_the_deps_gdb_ninja_cmake(tmp_path):
    shell = json.loads(flake_outputs(tmp_path).stdout)["shell"]
    packages = shell["args"]["packages"]
    assert {"gdb", "ninja", "cmake"} <= {p for p in packages if isinstance(p, str)}
    python = next(p for p in packages if isinstance(p, dict))
    assert python["standin"] == "python3.withPackages"
    deps = ("textual", "psutil", "pygdbmi", "rich", "tomlkit", "platformdirs", "unidiff", "pytest")
    for dep in deps:
        assert f"python313Packages.{dep}" in python["args"]


def test_flake_refuses_a_lock_that_drifted_from_the_matrix(tmp_path):
    result = flake_outputs(tmp_path, "0" * 40)
    assert result.returncode != 0
    assert "configs/matrix.toml says nixpkgs_rev = " + PIN in result.stderr


@needs("nix", debian="nix-bin")
def test_the_flake_evaluates_as_a_real_flake_with_the_standin_as_nixpkgs(tmp_path):
    # A copy outside git (an untracked flake.nix is invisible to a git flake), and the stand-in
    # as a flake input whose default.nix nix/ imports like nixpkgs'.
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("flake.nix", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, repo / name)
    for name in ("nix", "configs", "patches", "workbench"):
        shutil.copytree(
            REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    # The static flavour's patch files, which the repository itself does not have yet.
    for name in STATIC_SERIES:
        (repo / "patches" / f"{name}.patch").write_text(patch_text(name))
    standin = tmp_path / "standin"
    standin.mkdir()
    shutil.copy(STANDIN, standin / "default.nix")
    (standin / "flake.nix").write_text("{ outputs = _: { }; }\n")

    def flake_eval(attr: str, apply: str):
        result = run_nix(
            tmp_path,
            [
                "nix",
                "eval",
                "--json",
                f"path:{repo}#{attr}",
                "--apply",
                apply,
                "--override-input",
                "nixpkgs",
                f"path:{standin}",
                "--no-write-lock-file",
            ],
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    packages = flake_eval("packages", "builtins.mapAttrs (_: builtins.attrNames)")
    names = {
        v.name
        for v in expand(load_matrix(CONFIGS))
        if v.platform == "x86_64-linux" and (v.toolkit is None or v.toolkit.at_pin)
    }
    assert names <= set(packages["x86_64-linux"])
    assert {"onnxruntime", "onnxruntime-cpu", "onnxruntime-cuda-dyn", "workbench"} <= set(
        packages["aarch64-linux"]
    )

    # Evaluated purely, the flake reads its own patches/series.toml and copies each selected
    # patch file into the store on its own (nix eval writes the store, unlike --eval above).
    static = flake_eval(
        "packages.x86_64-linux.onnxruntime",
        "p: { names = p.workbench.patchNames; files = p.patches; }",
    )
    assert static["names"] == STATIC_SERIES
    assert own_patches(static["files"]) == NIXPKGS_OWN_PATCHES
    files = static["files"][len(NIXPKGS_OWN_PATCHES) :]
    assert [store_basename(path) for path in files] == [f"{n}.patch" for n in STATIC_SERIES]
    assert [Path(path).read_text() for path in files] == [patch_text(n) for n in STATIC_SERIES]


# nix/lib.nix's normaliseArch on each spelling; null where it throws.
NORMALISE_EACH = """
{ knownFile, spellingsFile }:
let
  lib = import ./nix/lib.nix;
  known = builtins.fromJSON (builtins.readFile knownFile);
  each = text: let r = builtins.tryEval (lib.normaliseArch known text); in
    if r.success then r.value else null;
in map each (builtins.fromJSON (builtins.readFile spellingsFile))
"""


def test_architecture_spellings_mean_the_same_as_on_the_python_side(tmp_path):
    from workbench.configs.cuda_arch import ArchitectureError, normalise

    known = load_matrix(CONFIGS).known_cuda_architectures
    spellings = ["90", "sm_90", "compute_90", "9.0", "9.0a", "90a", "SM_120", "12.0", "120", "100f"]
    spellings += ["90-real", "sm_100a-virtual", "sm_42", "9", "1000", "9.0.1", "abc", "12.1a"]
    known_file = tmp_path / "known.json"
    known_file.write_text(json.dumps(list(known)))
    spellings_file = tmp_path / "spellings.json"
    spellings_file.write_text(json.dumps(spellings))
    from_nix = nix_json(
        tmp_path,
        "-E",
        NORMALISE_EACH,
        "--argstr",
        "knownFile",
        str(known_file),
        "--argstr",
        "spellingsFile",
        str(spellings_file),
    )
    from_python = []
    for text in spellings:
        try:
            from_python.append(normalise(text, known))
        except ArchitectureError:
            from_python.append(None)
    assert from_nix == from_python
    assert from_python.count(None) >= 4  # the refusals are compared too


# --- every variant and flavour at once ------------------------------------------------------------


def test_every_variant_and_flavour_against_the_faithful_standin(tmp_path):
    series = (REPO / "patches" / "series.toml").read_text()
    configs, patches = repo_copy(
        tmp_path, series, {name: f"{name}.patch" for name in STATIC_SERIES}
    )
    everything = probe_json(tmp_path, "variants", configs, patches)
    matrix = load_matrix(CONFIGS)
    variants = expand(matrix)
    assert set(everything) == {v.name for v in variants}
    for variant in variants:
        record = everything[variant.name]
        if variant.toolkit is not None and not variant.toolkit.at_pin:
            assert set(record) == {"spec", "unavailable"}, variant.name
            continue
        cpp_record, python = record["cpp"], record["python"]
        attrs, derived = cpp_record["attrs"], cpp_record["derived"]
        flags = attrs["cmakeFlags"]
        isa = list(variant.isa.flags)
        python_set = f"python{variant.python.replace('.', '')}Packages"
        assert cpp_record["overrideArgs"]["python3Packages"] == f"<{python_set}>", variant.name
        assert python["standin"] == f"{python_set}.onnxruntime"
        if variant.toolkit is not None:
            assert cpp_record["overrideArgs"]["cudaPackages"] == f"<{variant.toolkit.nixpkgs_attr}>"
            assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == [variant.sm.cmake_arch]
            assert cmake_values(flags, "onnxruntime_NVCC_THREADS") == ["1"]
            assert derived["compileLines"]["cudaHost"] == ["-O3"], variant.name
            assert attrs["requiredSystemFeatures"] == ["big-parallel"]
            assert derived["violatesDisallowedRequisites"] is False
        else:
            assert cpp_record["overrideArgs"]["cudaSupport"] is False
            assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == []
            assert derived["compileLines"]["cudaHost"] is None
        # ISA flags in C and C++ compiles only, before CMake's Release -O3.
        for kind in ("c", "cxx"):
            assert derived["compileLines"][kind] == [*isa, "-O3", "-DNDEBUG"], variant.name
        assert "NIX_CFLAGS_COMPILE" not in derived["environment"]
        # Nothing of the ISA runs on the build machine.
        assert derived["runsTestsAtBuild"] is False
        assert cmake_values(flags, "onnxruntime_BUILD_UNIT_TESTS") == ["FALSE"]
        assert python["derived"]["runsImportCheckAtBuild"] is False
        assert python["attrs"]["meta"]["platforms"] == [variant.platform]
    for flavour in matrix.flavours:
        record = probe_json(tmp_path, f"flavours.{flavour.attr}", configs, patches)
        flags = record["attrs"]["cmakeFlags"]
        assert record["overrideArgs"]["cudaSupport"] is flavour.cuda
        shared = "TRUE" if flavour.shared else "FALSE"
        assert cmake_values(flags, "onnxruntime_BUILD_SHARED_LIB") == [shared]
        lto = cmake_values(flags, "onnxruntime_ENABLE_LTO")
        assert lto == ["FALSE"], flavour.name  # static: off by us; CUDA 12.9: off by nixpkgs
        assert record["derived"]["violatesDisallowedRequisites"] is False
        if flavour.cuda:
            assert record["overrideArgs"]["cudaPackages"] == "<cudaPackages_12_9>"


# --- what nixpkgs' 1.23.2 recipe gives, and what the flake keeps of it ------------------------

FETCHCONTENT_DIRS = ["ABSEIL_CPP", "DLPACK", "FLATBUFFERS", "MP11", "ONNX", "RE2", "SAFEINT"]


@pytest.mark.parametrize("target", [H100_AVX512, CPU_AVX2, "cpu", "cuda-hybrid"])
def test_packages_keep_the_1_23_2_recipes_attributes(tmp_path, target):
    configs, patches = repo_copy(tmp_path)
    record = package(tmp_path, target, configs, patches)
    attrs = record["attrs"]
    cuda = record["overrideArgs"]["cudaSupport"]
    flags = attrs["cmakeFlags"]
    assert attrs["version"] == "1.23.2" and attrs["src"] == "source-onnxruntime-src"
    assert attrs["__structuredAttrs"] is True and attrs["separateDebugInfo"] is True
    assert own_patches(attrs["patches"]) == NIXPKGS_OWN_PATCHES
    # Only env.* reaches the builder: nixpkgs' NIX_LDFLAGS stays beside the flake's flags.
    environment = record["derived"]["environment"]
    assert environment["NIX_LDFLAGS"] == "-z,noexecstack"
    assert set(environment) <= {"NIX_LDFLAGS", "CFLAGS", "CXXFLAGS", "CUDAFLAGS"}
    # The bundled dependencies' sources and protoc stay as nixpkgs sets them.
    dirs = [
        d
        for d in [*FETCHCONTENT_DIRS, "CUTLASS"]
        if cmake_values(flags, f"FETCHCONTENT_SOURCE_DIR_{d}")
    ]
    assert dirs == FETCHCONTENT_DIRS + (["CUTLASS"] if cuda else [])
    assert cmake_values(flags, "onnxruntime_USE_FULL_PROTOBUF") == ["FALSE"]
    assert ("--compile-no-warning-as-error" in flags) is cuda
    attr = load_matrix(configs).flavour(target).attr if target in ("cpu", "cuda-hybrid") else target
    built = probe_json(tmp_path, f"built.{attr}", configs, patches)
    assert cmake_values(flags, "ONNX_CUSTOM_PROTOC_EXECUTABLE") == [
        f"{built['protobuf']}/bin/protoc"
    ]
    passthru = attrs["passthru"]
    expected = {"cudaSupport", "cudaPackages", "ncclSupport", "protobuf", "tests", "workbench"}
    assert expected <= set(passthru)
    if target.startswith("onnxruntime-"):
        # A variant's C++ package keeps nixpkgs' outputs, and its Python package is the wheel
        # of that very build, linked against the protobuf it was built with.
        assert built["outputs"] == ["out", "dev", "dist", "debug"]
        python = probe_json(tmp_path, f"variants.{target}.python", configs, patches)["attrs"]
        assert python["src"] == f"{attrs['pname']}-1.23.2.dist"
        assert python["buildInputs"][2] == passthru["protobuf"]
        assert python["buildInputs"][3]["attrs"]["pname"] == attrs["pname"]


def test_the_standin_refuses_what_nixpkgs_refuses_about_debug_info(tmp_path):
    # separateDebugInfo with reference checks needs __structuredAttrs: a flake turning it off
    # would fail in nixpkgs, and fails here.
    expr = """
    let pkgs = import ./tests/nix/standin-nixpkgs.nix { };
        cuda = { cudaSupport = true; cudaPackages = pkgs.cudaPackages_12_9; };
        p = (pkgs.onnxruntime.override cuda).overrideAttrs (old: { __structuredAttrs = false; });
    in p.outputs
    """
    result = nix_eval(tmp_path, "-E", expr)
    assert result.returncode != 0
    assert "separateDebugInfo = true in onnxruntime requires __structuredAttrs" in result.stderr
    # A flavour's one output still comes with `debug`, as mkDerivation adds it.
    expr = """
    let pkgs = import ./tests/nix/standin-nixpkgs.nix { };
    in (pkgs.onnxruntime.overrideAttrs (old: { outputs = [ "out" ]; })).outputs
    """
    assert nix_json(tmp_path, "-E", expr) == ["out", "debug"]


def test_every_offered_target_keeps_the_recipes_outputs_patches_env_and_protobuf(tmp_path):
    # Every variant's C++ package and every flavour the flake offers at the pin's release.
    configs, patches = repo_copy(tmp_path)
    built = probe_json(tmp_path, "built", configs, patches)
    records = {
        name: entry["cpp"]
        for name, entry in probe_json(tmp_path, "variants", configs, patches).items()
        if "cpp" in entry
    }
    matrix = load_matrix(configs)
    # The pin's release (1.23.2); other releases' source overrides are tested in test_nix_releases.
    pinned = {f.attr for f in matrix.flavours}
    flavours = probe_json(tmp_path, "flavours", configs, patches)
    records |= {attr: record for attr, record in flavours.items() if attr in pinned}
    offered = {v.name for v in expand(matrix) if v.toolkit is None or v.toolkit.at_pin}
    assert set(records) == offered | {f.attr for f in matrix.flavours} == set(built)
    for name, record in records.items():
        attrs = record["attrs"]
        flavour = name in {f.attr for f in matrix.flavours}
        assert attrs["__structuredAttrs"] is True, name
        assert built[name]["outputs"] == (
            ["out", "debug"] if flavour else ["out", "dev", "dist", "debug"]
        ), name
        assert own_patches(attrs["patches"]) == NIXPKGS_OWN_PATCHES, name
        assert record["derived"]["environment"]["NIX_LDFLAGS"] == "-z,noexecstack", name
        protoc = cmake_values(attrs["cmakeFlags"], "ONNX_CUSTOM_PROTOC_EXECUTABLE")
        assert protoc == [f"{built[name]['protobuf']}/bin/protoc"], name
        assert 'PathString(\\"$out/lib/\\")' in attrs["postPatch"], name
