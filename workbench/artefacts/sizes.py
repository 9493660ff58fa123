"""What a successful Nix or Flox build produced: its out-links, their store paths, NAR and
closure sizes (`nix path-info --json -S`), and the CUDA architectures inside (cuobjdump).

The nixpkgs CUDA roadmap seed is about exactly these numbers (closure and NAR sizes that per-
architecture builds exist to shrink); the supervisor records them after a build, and history,
report and the TUI show and compare them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.artefacts.out_links import other_output_name, out_link_name
from workbench.host.bounded_command import run_bounded
from workbench.host.units import scaled_byte_size

NIX_FLAGS = ["--extra-experimental-features", "nix-command flakes"]
TIMEOUT_S = 60.0
# cuobjdump's listings (`cuobjdump --list-elf` / `--list-ptx`, CUDA Binary Utilities manual,
# "cuobjdump" section): one line per embedded file, "ELF file    1: name.1.sm_90.cubin" and
# "PTX file    1: name.1.sm_90.ptx"; arch-specific targets are named sm_90a, sm_100a, ...
_ARCH = re.compile(r"\.sm_(\d+[a-z]?)\.(cubin|ptx)\b")
# Links a Flox build leaves beside result-NAME that are not the package's outputs:
# result-NAME-log (the build log added to the store) and result-NAME-buildCache (a manifest
# build's cache), flox package-builder/flox-build.mk; result-NAME-env is the smoke's environment.
NOT_OUTPUTS = ("-log", "-buildCache", "-env")
# ORT's own libraries: the CUDA code the build compiled. Copied NVIDIA libraries (lib/cudnn) hold
# every architecture NVIDIA ships and say nothing about what was asked for.
ORT_LIBRARIES = ("libonnxruntime*.so*", "libonnxruntime*.a")


@dataclass(frozen=True)
class Output:
    """One output a build left: its out-link, store path and sizes in bytes."""

    link: str
    path: str
    nar_size: int | None
    closure_size: int | None

    @property
    def is_debug(self) -> bool:
        """Whether this is the `debug` output (result-NAME-debug, a store path NAME-debug)."""
        return self.link.endswith("-debug") and self.path.endswith("-debug")

    def to_json(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "path": self.path,
            "nar_size": self.nar_size,
            "closure_size": self.closure_size,
        }


@dataclass(frozen=True)
class Artefacts:
    """Everything recorded about a build's result."""

    outputs: tuple[Output, ...]
    sass: tuple[str, ...] = ()  # CUDA architectures with machine code (cubin) inside
    ptx: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "outputs": [o.to_json() for o in self.outputs],
            "sass": list(self.sass),
            "ptx": list(self.ptx),
            "warnings": list(self.warnings),
        }

    @property
    def installed(self) -> tuple[Output, ...]:
        """The outputs a consumer installs: all but `debug` (nixpkgs' separateDebugInfo puts
        the libraries' DWARF there, often larger than the libraries themselves)."""
        return tuple(o for o in self.outputs if not o.is_debug)

    @property
    def nar_size(self) -> int | None:
        """The NAR size of the outputs but `debug`, summed."""
        sizes = [o.nar_size for o in self.installed if o.nar_size is not None]
        return sum(sizes) if sizes else None

    @property
    def closure_size(self) -> int | None:
        """The largest closure of the outputs but `debug`."""
        sizes = [o.closure_size for o in self.installed if o.closure_size is not None]
        return max(sizes) if sizes else None

    @property
    def debug_nar_size(self) -> int | None:
        """The `debug` output's NAR size; None when the build left no debug output."""
        sizes = [o.nar_size for o in self.outputs if o.is_debug and o.nar_size is not None]
        return sum(sizes) if sizes else None


def from_json(data: dict[str, Any] | None) -> Artefacts | None:
    """The recorded form back (history's `artefacts` column)."""
    if not data:
        return None
    outputs = tuple(
        Output(o["link"], o["path"], o.get("nar_size"), o.get("closure_size"))
        for o in data.get("outputs", [])
    )
    return Artefacts(
        outputs,
        tuple(data.get("sass", [])),
        tuple(data.get("ptx", [])),
        tuple(data.get("warnings", [])),
    )


def out_links(directory: Path, target: str) -> list[Path]:
    """result-TARGET and its other outputs' links (result-TARGET-dev, result-TARGET-debug, ...)
    in `directory`: those whose store path is an output of the same package (Nix names an
    output other than `out` NAME-VERSION-OUTPUT), so result-onnxruntime-cpu is never taken for
    an output of the target `onnxruntime`."""
    base = directory / out_link_name(target)
    if not base.is_symlink():
        return []
    main = os.path.realpath(base)
    links = [base]
    links += sorted(
        p
        for p in directory.glob(f"{base.name}-*")
        if p.is_symlink()
        and not p.name.endswith(NOT_OUTPUTS)
        and other_output_name(main, os.path.realpath(p)) == p.name[len(base.name) + 1 :]
    )
    return links


def _run(argv: list[str], timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """(exit code, stdout) of a probe; 127 when missing, 124 past the timeout."""
    try:
        done = run_bounded(argv, timeout)
    except FileNotFoundError:
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout


def path_sizes(paths: list[str], nix: str = "nix") -> dict[str, tuple[int | None, int | None]]:
    """Store path -> (NAR size, closure size), from `nix path-info --json -S`."""
    if not paths:
        return {}
    code, stdout = _run([nix, *NIX_FLAGS, "path-info", "--json", "-S", *paths])
    if code != 0:
        return {}
    try:
        document = json.loads(stdout)
    except json.JSONDecodeError:
        return {}
    # Nix 2.8 prints a list of objects with "path"; newer Nix an object keyed by path.
    items = (
        document.items()
        if isinstance(document, dict)
        else ((entry.get("path"), entry) for entry in document if isinstance(entry, dict))
    )
    sizes: dict[str, tuple[int | None, int | None]] = {}
    for path, entry in items:
        if isinstance(path, str) and isinstance(entry, dict):
            nar, closure = entry.get("narSize"), entry.get("closureSize")
            sizes[path] = (
                nar if isinstance(nar, int) else None,
                closure if isinstance(closure, int) else None,
            )
    return sizes


def architectures_listed(listing: str) -> set[str]:
    """The architectures named in a `cuobjdump --list-elf` or `--list-ptx` listing."""
    return {match.group(1) for match in _ARCH.finditer(listing)}


def cuda_architectures_inside(
    output: Path, cuobjdump: str = "cuobjdump"
) -> tuple[set[str], set[str]]:
    """(SASS, PTX) architectures in the output's ONNX Runtime libraries; empty sets without
    cuobjdump."""
    if shutil.which(cuobjdump) is None:
        return set(), set()
    sass: set[str] = set()
    ptx: set[str] = set()
    libraries = sorted({path for pattern in ORT_LIBRARIES for path in output.rglob(pattern)})
    for library in libraries:
        if not library.is_file() or library.is_symlink():
            continue
        for flag, found in (("--list-elf", sass), ("--list-ptx", ptx)):
            code, stdout = _run([cuobjdump, flag, str(library)])
            if code == 0:
                found.update(architectures_listed(stdout))
    return sass, ptx


def architectures_asked(
    directory: Path, target: str, settings_architectures: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """What the build of `target` in the checkout `directory` compiled CUDA code for, as the
    flake chooses it (nix/overrides.nix mkOrt): settings.toml's cuda_architectures when set,
    else a variant's own SM ("...-sm90-..." -> "90") or a flavour's cuda_architectures
    (configs/flavours.toml). Empty for a CPU target or one the configs do not know."""
    if settings_architectures:
        return tuple(settings_architectures)
    from workbench.configs.matrix import load_matrix
    from workbench.configs.variants import NAME_PATTERN
    from workbench.errors import WorkbenchError

    try:
        matrix = load_matrix(directory / "configs")
    except (OSError, WorkbenchError):
        matrix = None
    named = NAME_PATTERN.match(target)
    if named:
        sm_name = named.group("sm")
        if sm_name is None:
            return ()
        for sm in matrix.sms if matrix else ():
            if sm.name == sm_name:
                return (sm.cmake_arch,)
        return (sm_name.removeprefix("sm"),)
    if matrix is None:
        return ()
    try:
        flavour = matrix.flavour(target)
    except KeyError:
        return ()
    return tuple(flavour.cuda_architectures) if flavour.cuda else ()


def architecture_warnings(asked: tuple[str, ...], sass: set[str], ptx: set[str]) -> list[str]:
    """What differs between the architectures asked for and the code inside; nothing when
    nothing was asked or no CUDA code was found. Code for an arch-specific target (sm_90a)
    counts for its architecture (90)."""
    if not asked or not (sass or ptx):
        return []
    inside = sass | ptx
    covered = {arch.rstrip("abcdefghijklmnopqrstuvwxyz") for arch in inside}
    warnings = []
    missing = [arch for arch in asked if arch not in covered]
    extra = sorted(
        arch for arch in inside if arch.rstrip("abcdefghijklmnopqrstuvwxyz") not in asked
    )
    if missing:
        warnings.append(f"asked for {', '.join(missing)} but the libraries hold no code for it")
    if extra:
        warnings.append(f"the libraries also hold code for {', '.join(extra)}, not asked for")
    return warnings


def collect(
    directory: Path,
    target: str,
    settings_architectures: tuple[str, ...] = (),
    cuobjdump: str = "cuobjdump",
) -> Artefacts | None:
    """The result of building `target` in `directory`: its outputs' sizes and, where the
    output holds CUDA code, its architectures, with a warning when they are not what the build
    asked for (`architectures_asked`: the settings' list, else the target's own)."""
    links = out_links(directory, target)
    if not links:
        return None
    resolved = {str(link): os.path.realpath(link) for link in links}
    sizes = path_sizes(sorted(set(resolved.values())))
    outputs = tuple(
        Output(Path(link).name, path, *sizes.get(path, (None, None)))
        for link, path in resolved.items()
    )
    sass, ptx = cuda_architectures_inside(Path(resolved[str(links[0])]), cuobjdump)
    asked = architectures_asked(directory, target, settings_architectures)
    warnings = architecture_warnings(asked, sass, ptx)
    return Artefacts(outputs, tuple(sorted(sass)), tuple(sorted(ptx)), tuple(warnings))


def human_bytes(size: int | None) -> str:
    """1536 -> "1.5 KiB"; None -> "-": host.units' formatter, so sizes read alike everywhere."""
    return scaled_byte_size(size)
