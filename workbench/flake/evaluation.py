"""Evaluate one package of the flake with Nix, to say before a build whether it evaluates.

The static answer (configs/matrix.toml's [nixpkgs_pin], workbench.planning.availability) covers
what we know nixpkgs lacks; this asks Nix, so anything else that breaks evaluation at the pin
(a patch file missing, a setting the flake refuses, an attribute nixpkgs renamed) is said before
an hour of building, with Nix's own first `error:` line.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workbench.host.bounded_command import run_bounded
from workbench.progress.visible import visible

# Nix's evaluation of ORT against real nixpkgs takes a few seconds; a flake input that must be
# fetched first can take much longer: past this, the answer is "not known", never "no".
EVAL_TIMEOUT_S = 120.0
NIX_FLAGS = ["--extra-experimental-features", "nix-command flakes"]
# Nix's words when an input (nixpkgs at the pin) cannot be downloaded or is not cached.
UNFETCHED = re.compile(
    r"unable to download|resolve host|cannot fetch|failed to fetch|unable to fetch|"
    r"while fetching the input|does not exist in the Nix store and cannot be fetched",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Evaluation:
    """Nix's verdict on one flake package."""

    attr: str
    evaluates: bool | None  # None: Nix could not be asked (missing, timed out)
    detail: str  # the store path, Nix's first error line, or why it was not asked

    def to_json(self) -> dict[str, object]:
        return {"attr": self.attr, "evaluates": self.evaluates, "detail": self.detail}


def first_error(stderr: str) -> str:
    """Nix's first `error:` line (the cause; the trace after it is detail), made printable."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith("error:"):
            message = line.removeprefix("error:").strip()
            if not message and index + 1 < len(lines):
                message = lines[index + 1]
            return visible(message)[:400]
    meaningful = [line for line in lines if not line.startswith("warning:")]
    return visible(meaningful[-1])[:400] if meaningful else "no message"


def evaluate(
    flake: Path, system: str, attr: str, timeout: float = EVAL_TIMEOUT_S, nix: str = "nix"
) -> Evaluation:
    """`nix eval --raw FLAKE#packages.SYSTEM.ATTR.outPath`: instantiates the derivation, builds
    nothing. The whole process group is ended on timeout."""
    argv = [
        nix,
        *NIX_FLAGS,
        "eval",
        "--raw",
        "--no-write-lock-file",
        f"{flake}#packages.{system}.{attr}.outPath",
    ]
    try:
        done = run_bounded(
            argv, timeout, env={**os.environ, "NIX_PATH": os.environ.get("NIX_PATH", "")}
        )
    except FileNotFoundError:
        return Evaluation(attr, None, f"{nix}: not found, so it was not evaluated")
    except subprocess.TimeoutExpired:
        return Evaluation(attr, None, f"nix eval took over {timeout:.0f} s; not known")
    stdout, stderr = done.stdout, done.stderr
    if done.returncode == 0:
        return Evaluation(attr, True, visible(stdout.strip()))
    error = first_error(stderr)
    if UNFETCHED.search(error):
        # The flake's inputs could not be had (no network, no cache): nothing is known yet
        # about the package itself.
        return Evaluation(attr, None, f"the flake's inputs could not be fetched: {error}")
    return Evaluation(attr, False, error)
