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

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from nix_testing import needs_nix, nix_env

from workbench.matrix import load_matrix
from workbench.variants import expand

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"
STANDIN = REPO / "tests" / "nix" / "standin-nixpkgs.nix"
PIN = "ed142ab1b3a092c4d149245d0c4126a5d7ea00b0"

H100_AVX512 = "onnxruntime-python313-cuda12_9-sm90-avx512"
H100_AVX512_CUDA12_4 = "onnxruntime-python312-cuda12_4-sm90-avx512"
GRACE_ARMV9 = "onnxruntime-python312-cuda12_4-sm90-armv9"
T4_AVX2 = "onnxruntime-python313-cuda12_9-sm75-avx2"
CPU_AVX2 = "onnxruntime-python313-cpu-avx2"
STATIC_SERIES = [
    "static-init-bridge.patch",
    "static-init-cpu.patch",
    "static-init-provider.patch",
    "static-init-common.patch",
    "static-datatype-loop.patch",
    "static-tensorshape-loop.patch",
    "cuda-static-provider.patch",
    "providers-shared-static.patch",
]
NIXPKGS_OWN_PATCH = "nixpkgs/pkgs/by-name/on/onnxruntime/cpuinfo-logging.patch"


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
    return run_nix(tmp_path, ["nix-instantiate", "--eval", "--strict", "--json", *args])


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
    [(H100_AVX512, "90"), (T4_AVX2, "75"), (GRACE_ARMV9, "90"), (H100_AVX512_CUDA12_4, "90")],
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
    for name in (T4_AVX2, H100_AVX512_CUDA12_4):
        flags = cpp(tmp_path, name, configs)["attrs"]["cmakeFlags"]
        assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == [expected]
    flavour = probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn", configs)
    assert cmake_values(flavour["attrs"]["cmakeFlags"], "CMAKE_CUDA_ARCHITECTURES") == [expected]


def test_flavours_keep_nixpkgs_architectures_without_an_override(tmp_path):
    flavour = probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn")
    flags = flavour["attrs"]["cmakeFlags"]
    assert cmake_values(flags, "CMAKE_CUDA_ARCHITECTURES") == ["52;standin-default"]


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
        (H100_AVX512, "-mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -O2"),
        (T4_AVX2, "-mavx2 -mfma -O2"),
        (GRACE_ARMV9, "-march=armv9-a+sve2 -O2"),
        ("onnxruntime-python313-cpu-armv8_2", "-march=armv8.2-a+fp16+dotprod -O2"),
        (
            "onnxruntime-python313-cpu-avx512vnni",
            "-mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni -O2",
        ),
    ],
)
def test_isa_flags_then_optimisation_flags_reach_the_compiler(tmp_path, name, flags):
    record = cpp(tmp_path, name)
    assert record["attrs"]["env"]["NIX_CFLAGS_COMPILE"] == flags
    platform = "aarch64-linux" if "arm" in name else "x86_64-linux"
    assert record["attrs"]["meta"]["platforms"] == [platform]


def test_optimisation_flags_come_from_settings(tmp_path):
    configs = configs_with(tmp_path, optimization_flags='["-O3", "-g1"]')
    record = cpp(tmp_path, T4_AVX2, configs)
    assert record["attrs"]["env"]["NIX_CFLAGS_COMPILE"] == "-mavx2 -mfma -O3 -g1"


@pytest.mark.parametrize("threads", [1, 3])
def test_nvcc_threads_come_from_settings(tmp_path, threads):
    configs = configs_with(tmp_path, nvcc_threads=str(threads))
    for name in (H100_AVX512, H100_AVX512_CUDA12_4):
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
        (H100_AVX512_CUDA12_4, "cudaPackages_12_4", "python312Packages"),
        (GRACE_ARMV9, "cudaPackages_12_4", "python312Packages"),
        (CPU_AVX2, None, "python313Packages"),
    ],
)
def test_cuda_packages_and_python_follow_the_toolkit(tmp_path, name, cuda_set, python_set):
    record = probe_json(tmp_path, f"variants.{name}")
    cpp_record, python = record["cpp"], record["python"]
    if cuda_set:
        assert cpp_record["overrideArgs"]["cudaSupport"] is True
        assert cpp_record["overrideArgs"]["cudaPackages"] == f"<{cuda_set}>"
        assert cpp_record["attrs"]["nativeBuildInputs"][3] == f"{cuda_set}.cuda_nvcc"
    # The wheel inside the C++ build and the Python package use the toolkit's Python.
    assert cpp_record["overrideArgs"]["python3Packages"] == f"<{python_set}>"
    assert cpp_record["overrideArgs"]["pythonSupport"] is True
    assert python["standin"] == f"{python_set}.onnxruntime"
    assert python["overrideArgs"]["onnxruntime"] == cpp_record


def test_python_packages_carry_the_variant_name_and_description(tmp_path):
    for variant in expand(load_matrix(CONFIGS)):
        if variant.name not in (H100_AVX512, H100_AVX512_CUDA12_4, CPU_AVX2, GRACE_ARMV9):
            continue
        attrs = probe_json(tmp_path, f"variants.{variant.name}.python")["attrs"]
        assert attrs["pname"] == variant.name
        assert attrs["name"] == f"{variant.name}-1.23.2"
        assert attrs["meta"]["description"] == variant.description
        assert attrs["meta"]["platforms"] == [variant.platform]
        assert attrs["meta"]["broken"] is False
        assert attrs["passthru"]["workbench"]["python"] == variant.python


def test_variants_nvcc_cannot_build_are_marked_broken_with_the_reason(tmp_path):
    variants = {v.name: v for v in expand(load_matrix(CONFIGS))}
    name = "onnxruntime-python312-cuda12_4-sm120-avx512"
    assert variants[name].caveat
    attrs = probe_json(tmp_path, f"variants.{name}.python")["attrs"]
    assert attrs["meta"]["broken"] is True
    assert attrs["passthru"]["workbench"]["caveat"] == variants[name].caveat


# --- linkage flavours and patches ---------------------------------------------------------------


def repo_copy_with_patches(tmp_path: Path, names: list[str], **settings) -> tuple[Path, Path]:
    configs = configs_with(tmp_path, **settings) if settings else tmp_path / "repo" / "configs"
    if not settings:
        shutil.copytree(CONFIGS, configs)
    patches = configs.parent / "patches"
    patches.mkdir()
    for name in names:
        (patches / name).write_text("")
    return configs, patches


def test_static_flavour_applies_its_series_in_order_then_enabled_patches(tmp_path):
    configs, patches = repo_copy_with_patches(
        tmp_path, [*STATIC_SERIES, "my-fix.patch"], enabled_patches='["my-fix.patch"]'
    )
    record = probe_json(tmp_path, "flavours.onnxruntime", configs, patches)
    attrs = record["attrs"]
    applied = attrs["patches"]
    assert applied[0] == NIXPKGS_OWN_PATCH
    # Each patch is its own store path, named after the file (the contents alone decide it).
    basenames = [re.sub(r"^/nix/store/[0-9a-z]{32}-", "", path) for path in applied[1:]]
    assert all(path.startswith("/nix/store/") for path in applied[1:])
    assert basenames == [*STATIC_SERIES, "my-fix.patch"]
    assert attrs["passthru"]["workbench"]["patchNames"] == [*STATIC_SERIES, "my-fix.patch"]

    # ORT_STATIC_PROVIDERS for C++ and CUDA, static libraries, no scrub of a .so that is not built.
    assert attrs["env"]["CXXFLAGS"] == "-DORT_STATIC_PROVIDERS"
    assert attrs["env"]["CUDAFLAGS"] == "-DORT_STATIC_PROVIDERS"
    flags = attrs["cmakeFlags"]
    assert cmake_values(flags, "onnxruntime_BUILD_SHARED_LIB") == ["FALSE"]
    assert cmake_values(flags, "BUILD_SHARED_LIBS") == ["FALSE"]
    assert attrs["postFixup"] == ""
    assert attrs["pname"] == "onnxruntime"
    assert record["overrideArgs"]["cudaSupport"] is True
    assert record["overrideArgs"]["cudaPackages"] == "<cudaPackages_12_9>"
    assert record["overrideArgs"]["pythonSupport"] is False


def test_a_patch_in_both_lists_is_applied_once(tmp_path):
    configs, patches = repo_copy_with_patches(
        tmp_path, STATIC_SERIES, enabled_patches='["static-init-cpu.patch"]'
    )
    names = probe_json(tmp_path, "flavours.onnxruntime", configs, patches)["attrs"]["passthru"]
    assert names["workbench"]["patchNames"] == STATIC_SERIES


def test_enabled_patches_reach_variants_too(tmp_path):
    configs, patches = repo_copy_with_patches(
        tmp_path, ["my-fix.patch"], enabled_patches='["my-fix.patch"]'
    )
    applied = probe_json(tmp_path, f"variants.{H100_AVX512}.cpp", configs, patches)["attrs"]
    assert applied["patches"][0] == NIXPKGS_OWN_PATCH
    assert applied["patches"][1].endswith("-my-fix.patch")


def test_a_missing_flavour_patch_throws_naming_it_and_where_to_get_it(tmp_path):
    configs, patches = repo_copy_with_patches(tmp_path, STATIC_SERIES[:3])
    result = probe(tmp_path, "flavours.onnxruntime.attrs.patches", configs, patches)
    assert result.returncode != 0
    assert "static-init-common.patch" in result.stderr
    assert f"{patches}/static-init-common.patch does not exist" in result.stderr
    assert "onnxruntime-builder flake's patches/" in result.stderr
    assert "configs/flavours.toml" in result.stderr


def test_a_missing_enabled_patch_throws_naming_settings(tmp_path):
    configs, patches = repo_copy_with_patches(tmp_path, [], enabled_patches='["nope.patch"]')
    result = probe(tmp_path, f"variants.{CPU_AVX2}.cpp.attrs.patches", configs, patches)
    assert result.returncode != 0
    assert "nope.patch" in result.stderr
    assert "enabled_patches in configs/settings.toml" in result.stderr
    assert "onnxruntime-builder flake's patches/" in result.stderr


def test_shared_and_cpu_flavours(tmp_path):
    dyn = probe_json(tmp_path, "flavours.onnxruntime-cuda-dyn")
    assert cmake_values(dyn["attrs"]["cmakeFlags"], "onnxruntime_BUILD_SHARED_LIB") == ["TRUE"]
    assert "CXXFLAGS" not in dyn["attrs"]["env"]
    assert dyn["attrs"]["postFixup"].startswith("remove-references-to")  # nixpkgs' scrub kept

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
    variants = expand(load_matrix(CONFIGS))
    extra = {"onnxruntime-cpu", "onnxruntime-cuda-dyn", "onnxruntime", "workbench", "default"}
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
    for dep in ("textual", "psutil", "pygdbmi", "rich", "tomlkit", "platformdirs", "pytest"):
        assert f"python313Packages.{dep}" in python["args"]


def test_flake_refuses_a_lock_that_drifted_from_the_matrix(tmp_path):
    result = flake_outputs(tmp_path, "0" * 40)
    assert result.returncode != 0
    assert "configs/matrix.toml says nixpkgs_rev = " + PIN in result.stderr


@pytest.mark.skipif(shutil.which("nix") is None, reason="the `nix` command is not installed")
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
    standin = tmp_path / "standin"
    standin.mkdir()
    shutil.copy(STANDIN, standin / "default.nix")
    (standin / "flake.nix").write_text("{ outputs = _: { }; }\n")

    result = run_nix(
        tmp_path,
        [
            "nix",
            "eval",
            "--json",
            f"path:{repo}#packages",
            "--apply",
            "builtins.mapAttrs (_: builtins.attrNames)",
            "--override-input",
            "nixpkgs",
            f"path:{standin}",
            "--no-write-lock-file",
        ],
    )
    assert result.returncode == 0, result.stderr
    packages = json.loads(result.stdout)
    names = {v.name for v in expand(load_matrix(CONFIGS)) if v.platform == "x86_64-linux"}
    assert names <= set(packages["x86_64-linux"])
    assert {"onnxruntime", "onnxruntime-cpu", "onnxruntime-cuda-dyn", "workbench"} <= set(
        packages["aarch64-linux"]
    )


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
    from workbench.cuda_arch import ArchitectureError, normalise

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
