"""Which interpreter `workbench smoke NAME` runs, which build that is, and what must work in it.

The result of either backend is result-NAME in the checkout (`flox build NAME` leaves it;
`workbench build` passes --out-link result-NAME to `nix build`). A Flox environment's result has
bin/python; a Nix build of a variant is its Python package, so the flake's `NAME.environment`
(the variant's Python with it installed) is built beside it as result-NAME-env. A CUDA variant
whose CUDA provider is missing or fails has failed its smoke, whatever the CPU run did.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.artefacts.out_links import out_link_name
from workbench.errors import WorkbenchError

NIX_FLAGS = ["--extra-experimental-features", "nix-command flakes"]
CUDA_PROVIDER = "CUDAExecutionProvider"


@dataclass(frozen=True)
class SmokeTarget:
    """The interpreter to run, and the sentence saying which build it is."""

    python: Path
    said: str


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
    if direct.exists():
        return SmokeTarget(direct, f"smoking {link.name} -> {output}, {which}")
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
    )


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
    release it was built as: `onnxruntime.__version__`), or None when it reports that one."""
    if not check:
        return None
    reported = check.get("onnxruntime")
    if reported == version:
        return None
    return (
        f"built as ONNX Runtime {version}, but onnxruntime.__version__ says {reported or 'nothing'}"
        f" ({check.get('onnxruntime_file') or 'no module file'}): the build did not take the "
        f"release's source, or another onnxruntime shadows it on this Python's path"
    )
