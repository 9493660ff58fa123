"""Which interpreter `workbench smoke NAME` runs, which build that is, and what must work in it.

The result of either backend is result-NAME in the checkout (`flox build NAME` leaves it;
`workbench build` passes --out-link result-NAME to `nix build`). A Flox environment's result has
bin/python; a Nix build of a variant is its Python package, so the flake's `NAME.environment`
(the variant's Python with it installed) is built beside it as result-NAME-env. A CUDA variant
whose CUDA provider is missing or fails has failed its smoke, whatever the CPU run did.

The release is checked twice: `onnxruntime.__version__` (what Python sees) and the C API's
`OrtGetApiBase()->GetVersionString()` of the libonnxruntime.so the build made (what a C, C++ or
Rust consumer sees), found in the output or, for a store path, in its closure (a variant's
Python package refers to its C++ package).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.artefacts.out_links import out_link_name
from workbench.errors import WorkbenchError

NIX_FLAGS = ["--extra-experimental-features", "nix-command flakes"]
CUDA_PROVIDER = "CUDAExecutionProvider"
C_LIBRARY = re.compile(r"libonnxruntime\.so(\.[0-9]+)*")


@dataclass(frozen=True)
class SmokeTarget:
    """The interpreter to run, and the sentence saying which build it is."""

    python: Path
    said: str
    libraries: tuple[Path, ...] = ()  # the C API libraries of the build (c_api_libraries)


def c_api_libraries(output: str | os.PathLike[str], nix_store: str = "nix-store") -> list[Path]:
    """The libonnxruntime.so of a build's output: in its lib/, else (a store path) in the lib/
    of whatever its closure holds. One per directory: the unversioned name where it is there."""

    def in_lib(root: Path) -> Path | None:
        lib = root / "lib"
        try:
            names = sorted(
                entry.name for entry in os.scandir(lib) if C_LIBRARY.fullmatch(entry.name)
            )
        except OSError:
            return None
        return lib / names[0] if names else None

    own = in_lib(Path(output))
    if own is not None:
        return [own]
    real = os.path.realpath(output)
    program = shutil.which(nix_store)
    if program is None or not real.startswith("/nix/store/"):
        return []
    try:
        done = subprocess.run(
            [program, "--query", "--requisites", real],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    found = (in_lib(Path(line)) for line in done.stdout.splitlines() if line.strip())
    return [library for library in found if library is not None]


def _which_build(output: str, history: Any) -> str:
    """ "build #7 (flox, 2026-11-23 20:41)" for the build whose result is `output`."""
    if history is None:
        return "a build not in this history"
    for record in history.builds(limit=200):
        recorded = history.artefacts(record.id) or {}
        if any(o.get("path") == output for o in recorded.get("outputs", [])):
            import time

            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.ended or record.created))
            return f"build #{record.id} ({record.backend}, {when})"
    return "a build not in this history"


def resolve(name: str, checkout: Path, history: Any = None, nix: str = "nix") -> SmokeTarget:
    """The interpreter of the built variant `name` (result-NAME here, else in `checkout`),
    building its environment from the flake when the result is a bare Python package."""
    places = [Path.cwd(), checkout] if Path.cwd().resolve() != checkout.resolve() else [checkout]
    found = [
        place / out_link_name(name) for place in places if (place / out_link_name(name)).exists()
    ]
    if not found:
        raise WorkbenchError(
            f"no {out_link_name(name)} here or in {checkout}: build the variant first "
            f"(`workbench build {name}`, with --backend nix or flox: both leave "
            f"{out_link_name(name)}), or give --python PATH"
        )
    link = found[0]
    checkout = link.parent
    output = os.path.realpath(link)
    which = _which_build(output, history)
    direct = link / "bin" / "python"
    libraries = tuple(c_api_libraries(output, nix_store=_nix_store(nix)))
    if direct.exists():
        return SmokeTarget(direct, f"smoking {link.name} -> {output}, {which}", libraries)
    environment = checkout / f"{link.name}-env"
    done = subprocess.run(
        [
            nix,
            *NIX_FLAGS,
            "build",
            f".#{name}.environment",
            "--out-link",
            str(environment),
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    python = environment / "bin" / "python"
    if done.returncode != 0 or not python.exists():
        from workbench.flake.evaluation import first_error

        raise WorkbenchError(
            f"{link.name} is a Python package; its environment (`nix build .#{name}.environment`) "
            f"did not build: {first_error(done.stderr)}"
        )
    return SmokeTarget(
        python,
        f"smoking {link.name} -> {output}, {which}, in its environment {environment.name}",
        libraries,
    )


def _nix_store(nix: str) -> str:
    """nix-store beside the `nix` given (a path), else the one on PATH."""
    if os.sep in nix:
        beside = Path(nix).with_name("nix-store")
        if beside.exists():
            return str(beside)
    return "nix-store"


def require_providers(check: dict[str, Any] | None, cuda: bool) -> str | None:
    """Why the smoke failed although every run it made passed: a CUDA variant must have run
    on the CUDA provider. None when nothing more is required."""
    if not cuda or check is None:
        return None
    runs = {run.get("provider"): run for run in check.get("runs", [])}
    if CUDA_PROVIDER not in (check.get("available_providers") or []):
        return (
            f"a CUDA variant without {CUDA_PROVIDER} (providers: "
            f"{', '.join(check.get('available_providers') or []) or 'none'}): the CUDA "
            "provider library did not load (libonnxruntime_providers_cuda.so, cuDNN, the driver)"
        )
    run = runs.get(CUDA_PROVIDER)
    if run is None or not run.get("ok"):
        error = (run or {}).get("error", "it did not run")
        return f"the model failed on {CUDA_PROVIDER}: {error}"
    return None


def require_release(check: dict[str, Any] | None, version: str) -> str | None:
    """Why a smoke check fails for reporting another ONNX Runtime release than `version` (the
    release it was built as), through `onnxruntime.__version__` or the C API's version string
    of any library the check asked (`c_api`), or None when all report that one."""
    if not check:
        return None
    reported = check.get("onnxruntime")
    if reported != version:
        return (
            f"built as ONNX Runtime {version}, but onnxruntime.__version__ says "
            f"{reported or 'nothing'} ({check.get('onnxruntime_file') or 'no module file'}): the "
            f"build did not take the release's source, or another onnxruntime shadows it on this "
            f"Python's path"
        )
    for entry in check.get("c_api") or []:
        library = entry.get("library")
        if entry.get("error"):
            return (
                f"built as ONNX Runtime {version}, but its C API library {library} could not be "
                f"asked for its version: {entry['error']}"
            )
        if entry.get("version") != version:
            return (
                f"built as ONNX Runtime {version}, but the C API of {library} "
                f"(OrtGetApiBase()->GetVersionString()) says {entry.get('version') or 'nothing'}: "
                f"a C, C++ or Rust consumer linking it gets another release than Python's "
                f"onnxruntime {reported}"
            )
    return None
