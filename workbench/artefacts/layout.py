"""A flavour's output layout is its contract (configs/flavours.toml `produces`): check it.

`workbench build` runs this after a flavour builds; the same globs are in the flake's
passthru.workbench.produces, so both sides mean the same files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.artefacts.out_links import out_link_name
from workbench.configs.matrix import Flavour

CHUNK = 1 << 20
_STORE_NAME = re.compile(r"^[0-9a-z]{32}-(?P<name>.+)$")


@dataclass(frozen=True)
class FoundResult:
    """Where a built flavour is in a checkout: `link` (None when not found) and, when the link
    is not the one `workbench build` makes or there is none, a line saying so."""

    link: Path | None
    note: str | None = None


def _store_name(link: Path) -> str | None:
    """The package name of the store path `link` points at ("onnxruntime-cpu-1.23.2"), else None."""
    match = _STORE_NAME.match(link.resolve().name)
    return match.group("name") if match else None


def find_flavour_result(checkout: Path, flavour: Flavour, bare: bool = True) -> FoundResult:
    """The checkout's link to a built `flavour`.

    result-ATTR is what `workbench build` makes (`flox build ATTR` too); result-NAME is taken as
    well. A bare `result` (a plain `nix build`) only when `bare` and it points at this flavour's
    package (ATTR-VERSION): one left by another build is never taken for it.
    """
    names = [out_link_name(flavour.attr)]
    if flavour.name != flavour.attr:
        names.append(out_link_name(flavour.name))
    for name in names:
        if (checkout / name).exists():
            return FoundResult(checkout / name)
    wanted = " or ".join(names)
    if not bare:
        return FoundResult(None, f"no {wanted} in {checkout}")
    result = checkout / "result"
    if not result.exists():
        return FoundResult(None, f"no {wanted} (nor result) in {checkout}")
    package = _store_name(result)
    if package is not None and re.match(rf"^{re.escape(flavour.attr)}-[0-9]", package):
        return FoundResult(result, f"no {wanted} in {checkout}: using result ({package})")
    return FoundResult(
        None,
        f"no {wanted} in {checkout}, and result points at {result.resolve()}, "
        f"not a build of {flavour.attr}",
    )


def file_contains(path: Path, needle: bytes) -> bool:
    """Whether `needle` occurs in the file, read in 1 MiB chunks (archives run to gigabytes)."""
    overlap = len(needle) - 1
    tail = b""
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            if needle in tail + chunk:
                return True
            tail = chunk[-overlap:] if overlap else b""
    return False


def check_layout(output: Path, flavour: Flavour) -> list[str]:
    """What the built output lacks of its flavour's layout; empty when it is whole."""
    output = output.resolve()
    if not output.is_dir():
        return [f"{output}: no such output (was the build successful?)"]
    problems = [
        f"{pattern}: missing" for pattern in flavour.produces if not any(output.glob(pattern))
    ]
    if flavour.linkage == "hybrid":
        core = output / "lib" / "libonnxruntime.a"
        runtime = f"{output}/lib/".encode()
        if core.is_file() and not file_contains(core, runtime):
            problems.append(
                f"lib/libonnxruntime.a: its runtime path (ORT's GetRuntimePath) is not "
                f"{output}/lib/, so the static core cannot find its CUDA provider there"
            )
    return problems
