"""The stand-in flake's repository for the iterate tests: flake, configs, series and source.

tests/iterate/standin_flake/ holds the flake (a STAND-IN for the builder flake's
onnxruntime-cpu; its README says what each piece stands for). A test copies it to a temporary
directory (a flake inside this git checkout would see only tracked files) beside a copy of
configs/, the fixture series in patches/ and the fixture source in source/, and writes
nixpkgs-own.patch: the stand-in's "nixpkgs' own" patch, which makes light_1.cc use the header of
the dependency derivation.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from patch_fixture import FixtureSeries, diff_of, edited, write_fixture_series, write_fixture_source

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import set_setting

HERE = Path(__file__).resolve().parent
FLAKE = HERE / "standin_flake"
REPO = HERE.parent.parent
ATTR = "onnxruntime-cpu"


@dataclass(frozen=True)
class StandinRepo:
    root: Path
    configs: Path
    source: Path
    series: FixtureSeries

    @property
    def own_patch(self) -> Path:
        return self.root / "nixpkgs-own.patch"


def write_standin_repo(
    root: Path, units: int = 16, optimization: str | None = "-O0"
) -> StandinRepo:
    """The stand-in flake with configs, series and a fixture source of `units` units."""
    shutil.copytree(FLAKE, root)
    configs = root / "configs"
    shutil.copytree(REPO / "configs", configs)
    (root / "patches").mkdir()  # before the series is written: patches/ beside configs/
    source = root / "source"
    write_fixture_source(source, units=units)
    series = write_fixture_series(configs, source)
    if optimization is not None:
        set_setting(configs, load_matrix(configs), "optimization_flags", optimization)
    own = edited(
        source,
        "light_1.cc",
        "int light_1(int x) {",
        "#include <standin_dep.h>\n\nint light_1(int x) {",
    )
    own = (own[0], own[1].replace("+ digits;", "+ digits + STANDIN_DEP_VALUE - 7;"))
    (root / "nixpkgs-own.patch").write_text(diff_of({"light_1.cc": own}))
    return StandinRepo(root, configs, source, series)
