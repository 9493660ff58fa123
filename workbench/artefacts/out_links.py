"""Where a build's result is: `result-NAME` in the checkout, for both backends.

`flox build NAME` leaves result-NAME; `workbench build` passes `--out-link result-NAME` to
`nix build` so the loop finds a variant's or flavour's result the same way whichever built it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def out_link_name(name: str) -> str:
    """The out-link for a target name ("cuda-hybrid" -> "result-cuda-hybrid")."""
    return f"result-{name}"


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
