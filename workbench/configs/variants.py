"""Variant names: the matrix expanded into the seeds' 66 variants; format, parse, validate."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from workbench.configs.matrix import Isa, Matrix, Sm, Toolkit
from workbench.errors import WorkbenchError

NAME_PATTERN = re.compile(
    r"^onnxruntime-python(?P<python>\d{3,4})-(?P<stack>cuda\d+_\d+|cpu)"
    r"(?:-(?P<sm>sm\d+))?-(?P<isa>[a-z0-9_]+)$"
)


class UnknownVariantError(WorkbenchError):
    """A variant name that the matrix does not produce."""

    def __init__(self, name: str, reason: str, suggestions: list[str]) -> None:
        self.name = name
        self.reason = reason
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown variant {name!r}: {reason}{hint}")


@dataclass(frozen=True)
class Variant:
    """One buildable ONNX Runtime variant: Python, CUDA toolkit (or CPU-only), SM, ISA."""

    python: str  # "3.13"
    toolkit: Toolkit | None
    sm: Sm | None
    isa: Isa
    ort_version: str
    # "" for the pin's own release; "-ort1_24_2" for another (configs/releases.toml): the
    # attribute, out-link and history name carry it, so releases sit side by side.
    release_suffix: str = ""

    @property
    def name(self) -> str:
        return format_name(self.python, self.toolkit, self.sm, self.isa) + self.release_suffix

    @property
    def base_name(self) -> str:
        """The seeds' name, without the release."""
        return format_name(self.python, self.toolkit, self.sm, self.isa)

    @property
    def is_gpu(self) -> bool:
        return self.toolkit is not None

    @property
    def platform(self) -> str:
        return self.isa.platform

    @property
    def cmake_cuda_architectures(self) -> str | None:
        return self.sm.cmake_arch if self.sm else None

    @property
    def caveat(self) -> str | None:
        """Why this variant cannot be built as named, if it cannot."""
        if (
            self.toolkit
            and self.sm
            and _version_key(self.toolkit.version) < _version_key(self.sm.min_toolkit)
        ):
            return (
                f"nvcc {self.toolkit.version} cannot target {self.sm.name} "
                f"({self.sm.family} needs CUDA {self.sm.min_toolkit} or newer)"
            )
        return None

    @property
    def description(self) -> str:
        """The header line of the Flox matrix's .nix files."""
        if self.sm and self.toolkit:
            gpus = ", ".join(self.sm.gpus[:3])
            return (
                f"ONNX Runtime {self.ort_version} for NVIDIA {self.sm.family} "
                f"({self.sm.name.upper()}: {gpus}) + {self.isa.label} [CUDA {self.toolkit.version}]"
            )
        return f"ONNX Runtime {self.ort_version} CPU-only + {self.isa.label}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def python_tag(python: str) -> str:
    """ "3.13" -> "313"."""
    return python.replace(".", "")


def format_name(python: str, toolkit: Toolkit | None, sm: Sm | None, isa: Isa) -> str:
    """The variant's name by the matrix's naming rule."""
    stack = toolkit.name if toolkit else "cpu"
    sm_part = f"-{sm.name}" if sm else ""
    return f"onnxruntime-python{python_tag(python)}-{stack}{sm_part}-{isa.name}"


def expand(matrix: Matrix, ort: str | None = None) -> list[Variant]:
    """Every variant of the matrix, in the matrix's order: toolkits x SMs x ISAs, then CPU;
    of release `ort` (default: the pin's own, whose names are the seeds')."""
    version = ort or matrix.ort_version
    suffix = matrix.release(version).suffix if ort else ""
    variants = [
        Variant(toolkit.python, toolkit, sm, matrix.isa(isa_name), version, suffix)
        for toolkit in matrix.toolkits
        for sm in matrix.sms
        for isa_name in sm.isas
    ]
    variants += [
        Variant(matrix.cpu_python, None, None, matrix.isa(isa_name), version, suffix)
        for isa_name in matrix.cpu_isas
    ]
    return variants


def by_name(matrix: Matrix, ort: str | None = None) -> dict[str, Variant]:
    """Variants keyed by name."""
    return {variant.name: variant for variant in expand(matrix, ort)}


def parse(name: str, matrix: Matrix, ort: str | None = None) -> Variant:
    """The variant called `name` (of release `ort`, or the release its name carries:
    `...-ort1_24_2`), or UnknownVariantError saying why and what is near."""
    if matrix.releases is not None:
        base, named = matrix.releases.split_name(name)
        if named is not None:
            if ort is not None and ort != named.version:
                raise UnknownVariantError(
                    name, f"its name says ONNX Runtime {named.version}, --ort says {ort}", []
                )
            name, ort = base, named.version
    known = by_name(matrix, ort)
    base_names = {variant.base_name: variant for variant in known.values()}
    if name in base_names:
        return base_names[name]
    suggestions = difflib.get_close_matches(name, list(base_names), n=3, cutoff=0.6)
    raise UnknownVariantError(name, _why_unknown(name, matrix), suggestions)


def _why_unknown(name: str, matrix: Matrix) -> str:
    found = NAME_PATTERN.match(name)
    if not found:
        return (
            "names look like onnxruntime-python313-cuda12_9-sm90-avx512 "
            "or onnxruntime-python313-cpu-avx2"
        )
    python, stack, sm_name, isa_name = found.group("python", "stack", "sm", "isa")
    isa_names = [isa.name for isa in matrix.isas]
    if isa_name not in isa_names:
        return f"no ISA {isa_name!r} (ISAs: {', '.join(isa_names)})"
    if stack == "cpu":
        if sm_name:
            return "CPU-only variants have no SM part"
        if python != python_tag(matrix.cpu_python):
            return f"CPU-only variants use Python {matrix.cpu_python}"
        return f"no CPU-only variant for {isa_name}"
    toolkit_names = [toolkit.name for toolkit in matrix.toolkits]
    if stack not in toolkit_names:
        return f"no toolkit {stack!r} (toolkits: {', '.join(toolkit_names)})"
    toolkit = matrix.toolkit(stack)
    if python != python_tag(toolkit.python):
        return f"CUDA {toolkit.version} variants use Python {toolkit.python}"
    sm_names = [sm.name for sm in matrix.sms]
    if not sm_name:
        return f"GPU variants need an SM part ({', '.join(sm_names)})"
    if sm_name not in sm_names:
        return f"no SM {sm_name!r} (SMs: {', '.join(sm_names)})"
    sm = matrix.sm(sm_name)
    return f"{sm_name} is built for {', '.join(sm.isas)} only"
