"""CUDA architecture input ("sm_90", "9.0", "compute_90", "90a", "90-real") to CMake's form."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from workbench.errors import WorkbenchError

_FORMS = re.compile(
    r"^(?:sm_|compute_|sm|compute)?"
    r"(?P<major>\d{1,3})(?:\.(?P<minor>\d))?"
    r"(?P<suffix>[af])?"
    r"(?P<kind>-real|-virtual)?$"
)


class ArchitectureError(WorkbenchError):
    """A CUDA architecture that is not one the workbench knows."""


def normalise(text: str, known: Sequence[str]) -> str:
    """One architecture in CMAKE_CUDA_ARCHITECTURES form: "sm_90" / "9.0" / "compute_90" -> "90".

    "90a", "9.0a" -> "90a"; "-real" / "-virtual" suffixes are kept (CMake understands them).
    """
    raw = text.strip().lower()
    found = _FORMS.match(raw)
    if found:
        major, minor = found.group("major"), found.group("minor")
        number = major + minor if minor is not None else major
        arch = number + (found.group("suffix") or "")
        if arch in known:
            return arch + (found.group("kind") or "")
    raise ArchitectureError(
        f"unknown CUDA architecture {text.strip()!r}; valid values: {', '.join(known)} "
        "(also written sm_90, compute_90, 9.0, 90-real, 90-virtual)"
    )


def normalise_list(values: str | Iterable[str], known: Sequence[str]) -> list[str]:
    """A comma/semicolon/space separated list (or iterable) normalised, duplicates dropped."""
    items = re.split(r"[,;\s]+", values) if isinstance(values, str) else list(values)
    result: list[str] = []
    for item in items:
        if item.strip():
            arch = normalise(item, known)
            if arch not in result:
                result.append(arch)
    return result


def capability_to_arch(capability: str) -> str:
    """ "8.6" -> "86"."""
    return capability.replace(".", "")
