"""A flavour's output layout is its contract (configs/flavours.toml `produces`): check it.

`workbench build` runs this after a flavour builds; the same globs are in the flake's
passthru.workbench.produces, so both sides mean the same files.
"""

from __future__ import annotations

from pathlib import Path

from workbench.configs.matrix import Flavour

CHUNK = 1 << 20


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
