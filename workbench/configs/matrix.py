"""The variant matrix and linkage flavours, read from configs/matrix.toml and flavours.toml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.configs.releases import Release, Releases, load_releases
from workbench.configs.toml_files import line_of_key, load_toml, read_text
from workbench.errors import ConfigError


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit the GPU variants are built with."""

    name: str  # "cuda12_9"
    version: str  # "12.9"
    python: str  # "3.13"
    nixpkgs_attr: str  # "cudaPackages_12_9"
    min_driver: str  # "575.51.03"
    # False when the nixpkgs pin has no such package set ([nixpkgs_pin] in matrix.toml).
    at_pin: bool = True
    instead: str | None = None  # the toolkit its variants are built with instead


@dataclass(frozen=True)
class Sm:
    """A GPU architecture (streaming multiprocessor generation)."""

    name: str  # "sm90"
    capability: str  # "9.0"
    family: str
    gpus: tuple[str, ...]
    isas: tuple[str, ...]
    min_toolkit: str

    @property
    def cmake_arch(self) -> str:
        """The CMAKE_CUDA_ARCHITECTURES form: the capability without the dot."""
        return self.capability.replace(".", "")


@dataclass(frozen=True)
class Isa:
    """A CPU instruction set level with its compiler flags."""

    name: str
    label: str
    flags: tuple[str, ...]
    platform: str
    hardware: str
    use: str
    cpuinfo_flags: tuple[str, ...]
    rank: int


LINKAGES = ("static", "hybrid", "shared")


@dataclass(frozen=True)
class Flavour:
    """A linkage flavour of the builder flake (CPU static, CUDA hybrid, shared or static)."""

    name: str
    attr: str
    description: str
    cuda: bool
    linkage: str  # one of LINKAGES
    experimental: bool
    defines: tuple[str, ...]
    cuda_architectures: tuple[str, ...] = ()  # used when settings.toml names none
    produces: tuple[str, ...] = ()  # the output's layout: globs relative to it
    experimental_why: str = ""  # what an experimental flavour risks (flavours.toml)

    @property
    def shared(self) -> bool:
        """libonnxruntime.so rather than a static core."""
        return self.linkage == "shared"


@dataclass(frozen=True)
class Matrix:
    """Everything configs/matrix.toml and configs/flavours.toml say."""

    ort_version: str
    nixpkgs_rev: str
    driver_floors: dict[str, str]
    toolkits: tuple[Toolkit, ...]
    cpu_python: str
    cpu_isas: tuple[str, ...]
    sms: tuple[Sm, ...]
    isas: tuple[Isa, ...]
    known_cuda_architectures: tuple[str, ...]
    flavours: tuple[Flavour, ...]
    # The CUDA package sets nixpkgs has at the pin, and the one `cudaPackages` points at.
    pin_cuda_sets: tuple[str, ...] = ()
    pin_default_cuda_set: str = ""
    # configs/releases.toml: the ONNX Runtime releases (the pin's, ort_version, first).
    releases: Releases | None = None

    def release(self, version: str | None = None) -> Release:
        """The offered release `version` (default: the pin's own); UnknownReleaseError if none."""
        releases = self.releases or Releases(self.ort_version, ())
        if not releases.all:
            releases = load_releases(Path("/nonexistent"), self.ort_version)
        return releases.get(version or self.ort_version)

    def isa(self, name: str) -> Isa:
        """The ISA called `name` (KeyError when there is none)."""
        for isa in self.isas:
            if isa.name == name:
                return isa
        raise KeyError(name)

    def sm(self, name: str) -> Sm:
        """The SM called `name` (KeyError when there is none)."""
        for sm in self.sms:
            if sm.name == name:
                return sm
        raise KeyError(name)

    def toolkit(self, name: str) -> Toolkit:
        """The toolkit called `name` (KeyError when there is none)."""
        for toolkit in self.toolkits:
            if toolkit.name == name:
                return toolkit
        raise KeyError(name)

    def flavour(self, name: str) -> Flavour:
        """The flavour called `name` or with flake attribute `name` (KeyError when none)."""
        for flavour in self.flavours:
            if name in (flavour.name, flavour.attr):
                return flavour
        raise KeyError(name)


class _Reader:
    """Typed access to one parsed TOML file, with errors that name file, line and key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = load_toml(path)
        self._text: str | None = None

    def fail(self, key: str, problem: str) -> ConfigError:
        if self._text is None:
            self._text = read_text(self.path)
        line = line_of_key(self._text, key.rsplit(".", 1)[-1])
        where = f"{self.path}:{line}" if line else str(self.path)
        return ConfigError(f"{where}: {key}: {problem}")

    def get(self, table: dict[str, Any], key: str, kind: type, where: str) -> Any:
        if key not in table:
            raise self.fail(f"{where}.{key}" if where else key, "missing")
        value = table[key]
        if kind is tuple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.fail(key, f"must be a list of strings, not {value!r}")
            return tuple(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(key, f"must be a {kind.__name__}, not {value!r}")
        return value

    def tables(self, key: str) -> list[dict[str, Any]]:
        value = self.data.get(key)
        if not isinstance(value, list) or not value:
            raise self.fail(key, f"needs at least one [[{key}]] table")
        return value


def load_matrix(config_directory: Path) -> Matrix:
    """Read and cross-check matrix.toml and flavours.toml from `config_directory`."""
    matrix_file = _Reader(config_directory / "matrix.toml")
    data = matrix_file.data
    ort = data.get("onnxruntime", {})
    floors_table = data.get("driver_floors", {})
    floors = {str(k): matrix_file.get(floors_table, k, str, "driver_floors") for k in floors_table}
    pin = data.get("nixpkgs_pin", {})
    pin_sets = matrix_file.get(pin, "cuda_package_sets", tuple, "nixpkgs_pin")
    toolkits = []
    for table in matrix_file.tables("toolkits"):
        version = matrix_file.get(table, "version", str, "toolkits")
        if version not in floors:
            raise matrix_file.fail(
                "version", f"toolkit {version} has no entry in [driver_floors] ({sorted(floors)})"
            )
        toolkits.append(
            Toolkit(
                name=matrix_file.get(table, "name", str, "toolkits"),
                version=version,
                python=matrix_file.get(table, "python", str, "toolkits"),
                nixpkgs_attr=matrix_file.get(table, "nixpkgs_attr", str, "toolkits"),
                min_driver=floors[version],
                at_pin=table.get("nixpkgs_attr") in pin_sets,
                instead=table.get("instead"),
            )
        )
    names = [toolkit.name for toolkit in toolkits]
    for toolkit in toolkits:
        if not toolkit.at_pin and toolkit.instead not in names:
            raise matrix_file.fail(
                "instead",
                f"toolkit {toolkit.name} ({toolkit.nixpkgs_attr}) is not in "
                f"[nixpkgs_pin].cuda_package_sets, so it needs `instead` = one of {names}, "
                f"not {toolkit.instead!r}",
            )
    isas = tuple(
        Isa(
            name=matrix_file.get(t, "name", str, "isas"),
            label=matrix_file.get(t, "label", str, "isas"),
            flags=matrix_file.get(t, "flags", tuple, "isas"),
            platform=matrix_file.get(t, "platform", str, "isas"),
            hardware=matrix_file.get(t, "hardware", str, "isas"),
            use=matrix_file.get(t, "use", str, "isas"),
            cpuinfo_flags=matrix_file.get(t, "cpuinfo_flags", tuple, "isas"),
            rank=matrix_file.get(t, "rank", int, "isas"),
        )
        for t in matrix_file.tables("isas")
    )
    isa_names = {isa.name for isa in isas}
    sms = []
    for table in matrix_file.tables("sms"):
        sm = Sm(
            name=matrix_file.get(table, "name", str, "sms"),
            capability=matrix_file.get(table, "capability", str, "sms"),
            family=matrix_file.get(table, "family", str, "sms"),
            gpus=matrix_file.get(table, "gpus", tuple, "sms"),
            isas=matrix_file.get(table, "isas", tuple, "sms"),
            min_toolkit=matrix_file.get(table, "min_toolkit", str, "sms"),
        )
        unknown = [name for name in sm.isas if name not in isa_names]
        if unknown:
            raise matrix_file.fail("isas", f"{sm.name} names unknown ISAs {unknown}")
        sms.append(sm)
    cpu_only = data.get("cpu_only", {})
    cpu_isas = matrix_file.get(cpu_only, "isas", tuple, "cpu_only")
    unknown = [name for name in cpu_isas if name not in isa_names]
    if unknown:
        raise matrix_file.fail("isas", f"[cpu_only] names unknown ISAs {unknown}")
    known = matrix_file.get(
        data.get("cuda_architectures", {}), "known", tuple, "cuda_architectures"
    )
    ort_version = matrix_file.get(ort, "version", str, "onnxruntime")
    return Matrix(
        ort_version=ort_version,
        nixpkgs_rev=matrix_file.get(ort, "nixpkgs_rev", str, "onnxruntime"),
        driver_floors=floors,
        toolkits=tuple(toolkits),
        cpu_python=matrix_file.get(cpu_only, "python", str, "cpu_only"),
        cpu_isas=cpu_isas,
        sms=tuple(sms),
        isas=isas,
        known_cuda_architectures=known,
        flavours=_load_flavours(config_directory / "flavours.toml"),
        pin_cuda_sets=pin_sets,
        pin_default_cuda_set=matrix_file.get(pin, "default_cuda_package_set", str, "nixpkgs_pin"),
        releases=load_releases(config_directory, ort_version),
    )


def _load_flavours(path: Path) -> tuple[Flavour, ...]:
    reader = _Reader(path)
    flavours = []
    for t in reader.tables("flavours"):
        linkage = reader.get(t, "linkage", str, "flavours")
        if linkage not in LINKAGES:
            raise reader.fail("linkage", f"{linkage!r} is not one of {', '.join(LINKAGES)}")
        experimental = reader.get(t, "experimental", bool, "flavours")
        why = reader.get(t, "experimental_why", str, "flavours") if "experimental_why" in t else ""
        if experimental and not why.strip():
            raise reader.fail(
                "experimental_why", f"{t.get('name')!r} is experimental: say why (what it risks)"
            )
        flavours.append(
            Flavour(
                name=reader.get(t, "name", str, "flavours"),
                attr=reader.get(t, "attr", str, "flavours"),
                description=reader.get(t, "description", str, "flavours"),
                cuda=reader.get(t, "cuda", bool, "flavours"),
                linkage=linkage,
                experimental=experimental,
                defines=reader.get(t, "defines", tuple, "flavours"),
                cuda_architectures=reader.get(t, "cuda_architectures", tuple, "flavours"),
                produces=reader.get(t, "produces", tuple, "flavours"),
                experimental_why=" ".join(why.split()),
            )
        )
    return tuple(flavours)
