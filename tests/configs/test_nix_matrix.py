"""nix/matrix.nix, nix/variants.nix and nix/series.nix against workbench/: one config, two readers.

The matrix against workbench/configs/variants.py, the patch series (patches/series.toml) against
workbench/patches/series.py. Real Nix (Debian's nix-bin) evaluates the real nix/ files; nothing
here needs nixpkgs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from nix_testing import SAMPLE_APPLIED, SAMPLE_SERIES, needs_nix, nix_env, repo_copy

from workbench.configs.matrix import load_matrix
from workbench.configs.variants import expand
from workbench.errors import ConfigError
from workbench.patches.series import load_series

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"


pytestmark = needs_nix


def nix_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`nix-instantiate --eval --strict --json ARGS` in the repository (an argv list, no shell)."""
    return subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", *args],
        cwd=REPO,
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def nix_json(tmp_path: Path, *args: str):
    result = nix_eval(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def python_names(config_directory: Path) -> list[str]:
    return [variant.name for variant in expand(load_matrix(config_directory))]


def copy_configs(tmp_path: Path) -> Path:
    target = tmp_path / "configs"
    shutil.copytree(CONFIGS, target)
    return target


def test_matrix_nix_lists_the_same_names_in_the_same_order_as_python(tmp_path: Path) -> None:
    names = nix_json(tmp_path, "nix/matrix.nix")
    assert names == python_names(CONFIGS)


def test_matrix_has_the_seeds_66_variants(tmp_path: Path) -> None:
    names = nix_json(tmp_path, "nix/matrix.nix")
    assert len(names) == 66
    assert len(set(names)) == 66
    assert sum("-cpu-" in name for name in names) == 6
    assert "onnxruntime-python313-cuda12_9-sm90-avx512" in names
    assert "onnxruntime-python312-cuda12_4-sm90-armv9" in names
    assert "onnxruntime-python313-cpu-avx2" in names


def test_variant_names_nix_takes_the_config_directory(tmp_path: Path) -> None:
    names = nix_json(tmp_path, "nix/variant-names.nix", "--argstr", "configDir", str(CONFIGS))
    assert names == nix_json(tmp_path, "nix/matrix.nix")


def test_specs_agree_with_python_field_by_field(tmp_path: Path) -> None:
    specs = nix_json(tmp_path, "-E", "(import ./nix/variants.nix { }).variants")
    variants = expand(load_matrix(CONFIGS))
    assert len(specs) == len(variants)
    for spec, variant in zip(specs, variants, strict=True):
        assert spec["name"] == variant.name
        assert spec["description"] == variant.description
        assert spec["caveat"] == variant.caveat
        assert spec["platform"] == variant.platform
        assert spec["python"] == variant.python
        assert spec["cmakeCudaArchitectures"] == variant.cmake_cuda_architectures
        assert spec["isa"]["flags"] == list(variant.isa.flags)
        assert spec["cuda"] == variant.is_gpu
        if variant.toolkit:
            assert spec["toolkit"]["nixpkgs_attr"] == variant.toolkit.nixpkgs_attr
            assert spec["toolkit"]["min_driver"] == variant.toolkit.min_driver
        else:
            assert spec["toolkit"] is None
        assert spec["pythonPackages"] == "python" + variant.python.replace(".", "") + "Packages"


def test_flavour_specs_agree_with_python(tmp_path: Path) -> None:
    specs = nix_json(tmp_path, "-E", "(import ./nix/variants.nix { }).flavours")
    flavours = load_matrix(CONFIGS).flavours
    assert [(s["name"], s["attr"]) for s in specs] == [(f.name, f.attr) for f in flavours]
    for spec, flavour in zip(specs, flavours, strict=True):
        assert spec["defines"] == list(flavour.defines)
        assert (spec["cuda"], spec["shared"]) == (flavour.cuda, flavour.shared)
        # Patches are patches/series.toml's business now (compared below), not flavours.toml's.
        assert "patches" not in spec
    assert [s["attr"] for s in specs] == [
        "onnxruntime-cpu",
        "onnxruntime-cuda-hybrid",
        "onnxruntime-cuda-dyn",
        "onnxruntime",
    ]
    for spec, flavour in zip(specs, flavours, strict=True):
        assert spec["linkage"] == flavour.linkage
        assert spec["produces"] == list(flavour.produces)
        assert spec["cudaArchitectures"] == list(flavour.cuda_architectures)


# --- the patch series: nix/series.nix against workbench/patches/series.py ---------------------

# nix/series.nix's checked entries, and its selection for every flavour and variant (names).
SERIES_SELECTION = """
{ configDir, patchDir }:
let
  matrix = import ./nix/variants.nix { inherit configDir; };
  series = import ./nix/series.nix { inherit patchDir matrix; };
  entry = select: spec: {
    inherit (spec) name;
    value = map (patch: patch.name) (select spec.name);
  };
in
{
  inherit (series) patches;
  applied = builtins.listToAttrs (
    map (entry series.forFlavour) matrix.flavours ++ map (entry series.forVariant) matrix.variants
  );
}
"""


def nix_series(tmp_path: Path, configs: Path, patches: Path) -> subprocess.CompletedProcess[str]:
    return nix_eval(
        tmp_path,
        "-E",
        SERIES_SELECTION,
        "--argstr",
        "configDir",
        str(configs),
        "--argstr",
        "patchDir",
        str(patches),
    )


def assert_same_series(tmp_path: Path, configs: Path, patches: Path) -> dict[str, list[str]]:
    """Both sides read the same series.toml alike and select alike; returns the selection."""
    result = nix_series(tmp_path, configs, patches)
    assert result.returncode == 0, result.stderr
    from_nix = json.loads(result.stdout)
    matrix = load_matrix(configs)
    series = load_series(configs, matrix)
    assert series.directory == patches
    assert from_nix["patches"] == [
        {
            "name": p.name,
            "file": p.file,
            "group": p.group,
            "fixes": p.fixes,
            "flavours": list(p.flavours),
            "variants": list(p.variants),
            "enabled": p.enabled,
            "releases": list(p.releases) if p.releases is not None else None,
        }
        for p in series.patches
    ]
    targets = [f.name for f in matrix.flavours] + [v.name for v in expand(matrix)]
    assert sorted(from_nix["applied"]) == sorted(targets)
    from_python = {target: [p.name for p in series.applied_to(target)] for target in targets}
    assert from_nix["applied"] == from_python
    return from_nix["applied"]


def test_the_repository_series_is_read_and_selected_alike(tmp_path: Path) -> None:
    applied = assert_same_series(tmp_path, CONFIGS, REPO / "patches")
    assert len(applied["cuda-static"]) == 8
    assert applied["cpu"] == applied["cuda-dyn"] == []


def test_a_series_of_flavours_and_variant_patterns_is_selected_alike(tmp_path: Path) -> None:
    configs, patches = repo_copy(tmp_path)
    applied = assert_same_series(tmp_path, configs, patches)
    assert {target: applied[target] for target in SAMPLE_APPLIED} == SAMPLE_APPLIED


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('"cuda-static", "cuda-dyn"]', '"cuda-static", "gpu"]', ["flavours", "gpu"]),
        ('name = "delta-cpu"', 'name = "Delta"', ["name", "Delta"]),
        ('name = "gamma-sm90"', 'name = "alpha-bridge"', ["alpha-bridge", "unique"]),
        ('variants = ["*-sm90-*"]', 'variants = ["*-sm91-*"]', ["variants", "*-sm91-*"]),
        ('variants = ["*-sm90-*"]', 'variants = ["*.sm90"]', ["variants", "*.sm90"]),
        ("enabled = false", "enabled = 0", ["enabled"]),
        ('group = "local"\nfixes = "One', 'grop = "local"\nfixes = "One', ["grop"]),
    ],
    ids=[
        "unknown-flavour",
        "bad-name",
        "duplicate-name",
        "pattern-matches-nothing",
        "bad-pattern",
        "enabled-not-bool",
        "unknown-key",
    ],
)
def test_a_bad_series_is_refused_by_both_sides_naming_it(tmp_path: Path, old, new, words) -> None:
    assert SAMPLE_SERIES.count(old) == 1, f"the test's edit does not apply: {old!r}"
    configs, patches = repo_copy(tmp_path, SAMPLE_SERIES.replace(old, new))

    with pytest.raises(ConfigError) as refused:
        load_series(configs, load_matrix(configs))
    result = nix_series(tmp_path, configs, patches)
    assert result.returncode != 0
    assert "patches/series.toml: " in result.stderr
    for word in words:
        assert word in str(refused.value)
        assert word in result.stderr


def _add_isa_to_sm100(text: str) -> str:
    # GB200 pairs Blackwell with Grace: an ARM ISA on sm100.
    block = text.index('name = "sm100"')
    line = text.index("isas = [", block)
    end = text.index("]", line)
    return text[:end] + ', "armv9"' + text[end:]


def _add_toolkit(text: str) -> str:
    toolkit = (
        '[[toolkits]]\nname = "cuda13_0"\nversion = "13.0"\npython = "3.13"\n'
        'nixpkgs_attr = "cudaPackages_13_0"\n\n'
    )
    return text.replace("# CPU-only variants use this Python.", toolkit + "# CPU-only variants")


def _drop_cpu_isa(text: str) -> str:
    return text.replace(
        'isas = ["avx2", "avx512", "avx512bf16", "avx512vnni", "armv8_2", "armv9"]\n\n# GPU',
        'isas = ["avx2", "armv9"]\n\n# GPU',
    )


@pytest.mark.parametrize(
    ("change", "count", "new_name"),
    [
        (_add_isa_to_sm100, 68, "onnxruntime-python313-cuda12_9-sm100-armv9"),
        (_add_toolkit, 96, "onnxruntime-python313-cuda13_0-sm120-avx512vnni"),
        (_drop_cpu_isa, 62, None),
    ],
    ids=["isa-on-sm100", "new-toolkit", "fewer-cpu-isas"],
)
def test_a_changed_matrix_changes_both_sides_equally(tmp_path: Path, change, count, new_name):
    configs = copy_configs(tmp_path)
    matrix_file = configs / "matrix.toml"
    original = matrix_file.read_text()
    changed = change(original)
    assert changed != original, "the test's edit did not apply to configs/matrix.toml"
    matrix_file.write_text(changed)

    nix_names = nix_json(tmp_path, "nix/variant-names.nix", "--argstr", "configDir", str(configs))
    assert nix_names == python_names(configs)
    assert len(nix_names) == count
    if new_name:
        assert new_name in nix_names
    # The repository's own matrix is untouched.
    assert len(nix_json(tmp_path, "nix/matrix.nix")) == 66


def test_an_unknown_isa_is_refused_by_both_sides_naming_it(tmp_path: Path) -> None:
    configs = copy_configs(tmp_path)
    matrix_file = configs / "matrix.toml"
    matrix_file.write_text(matrix_file.read_text().replace('"avx512vnni", "armv8_2"', '"avx1024"'))

    with pytest.raises(ConfigError, match="avx1024"):
        load_matrix(configs)
    result = nix_eval(tmp_path, "nix/variant-names.nix", "--argstr", "configDir", str(configs))
    assert result.returncode != 0
    assert "configs/matrix.toml" in result.stderr
    assert "unknown ISAs avx1024" in result.stderr


def test_a_missing_config_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = nix_eval(tmp_path, "nix/variant-names.nix", "--argstr", "configDir", str(missing))
    assert result.returncode != 0
    assert f"{missing}/matrix.toml does not exist" in result.stderr
