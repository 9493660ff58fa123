"""Where a build's result is: `result-NAME` in the checkout, for both backends.

`flox build NAME` leaves result-NAME; `workbench build` passes `--out-link result-NAME` to
`nix build` so the loop finds a variant's or flavour's result the same way whichever built it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

# /nix/store/HASH-NAME: the 32-character hash part of a store path's name.
_STORE_NAME = re.compile(r"^[0-9a-df-np-sv-z]{32}-(.+)$")
# A derivation output's name (nixpkgs' out, dev, dist, debug, lib, bin, man, static, ...).
_OUTPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def out_link_name(name: str) -> str:
    """The out-link for a target name ("cuda-hybrid" -> "result-cuda-hybrid")."""
    return f"result-{name}"


def other_output_name(main: str, other: str) -> str | None:
    """The output name of store path `other` when it is another output of the package whose
    `out` is store path `main` (Nix names output OUTPUT of NAME-VERSION NAME-VERSION-OUTPUT);
    None otherwise."""
    found_main = _STORE_NAME.match(os.path.basename(main))
    found_other = _STORE_NAME.match(os.path.basename(other))
    if not found_main or not found_other:
        return None
    name, other_name = found_main.group(1), found_other.group(1)
    if not other_name.startswith(f"{name}-"):
        return None
    output = other_name[len(name) + 1 :]
    return output if _OUTPUT_NAME.match(output) else None


def link_other_outputs(checkout: Path, name: str, timeout_s: float = 60.0) -> list[str]:
    """result-NAME-OUTPUT for each other output of the package result-NAME points at, as
    `flox build` leaves them (it builds `DRV^*`); `nix build .#ATTR` links only the default
    output, though building the derivation made every output (nixpkgs' onnxruntime has out,
    dev, dist and debug; a flavour out and debug). Each link is a GC root, so the debug output
    `workbench bt` reads stays as long as the result does. Returns the links made; nothing
    when the deriver is unknown (a substituted path) or a query fails."""
    link = checkout / out_link_name(name)
    if not link.is_symlink():
        return []
    main = os.path.realpath(link)

    def query(*argv: str) -> list[str]:
        try:
            done = subprocess.run(
                ["nix-store", "--query", *argv],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        return done.stdout.split() if done.returncode == 0 else []

    deriver = query("--deriver", main)
    if len(deriver) != 1 or not os.path.exists(deriver[0]):
        return []
    wanted: dict[str, str] = {}
    for path in query("--outputs", deriver[0]):
        output = other_output_name(main, path)
        if output and os.path.exists(path):
            wanted[output] = path
    made, _problems = link_results(
        checkout, {f"{name}-{output}": path for output, path in sorted(wanted.items())}
    )
    return made


def find_result(checkout: Path, *names: str) -> Path | None:
    """The first of result-NAME (each name in turn), then `result`, that points somewhere."""
    for name in (*names, None):
        link = checkout / (out_link_name(name) if name else "result")
        if link.exists():
            return link
    return None


def link_results(
    checkout: Path, outputs: dict[str, str], timeout_s: float = 120.0
) -> tuple[list[str], list[str]]:
    """result-NAME in `checkout` for each target name -> store path, registered as GC roots
    (`nix-store --realise PATH --add-root LINK`: the path is already there, so nothing is built,
    and the link keeps it from the garbage collector as `nix build` keeps its out-link).

    A matrix build runs one `nix build --no-link` for all its targets (Nix would name them
    result, result-1, ...); this gives each the link `flox build NAME` would leave. Returns
    (links made, one line per target that could not be linked).
    """
    made: list[str] = []
    problems: list[str] = []
    for name, path in outputs.items():
        link = checkout / out_link_name(name)
        try:
            done = subprocess.run(
                ["nix-store", "--realise", path, "--add-root", str(link)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            problems.append(f"{link.name}: {error}")
            continue
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["nix-store failed"])[-1]
            problems.append(f"{link.name}: {last}")
            continue
        made.append(link.name)
    return made, problems
