"""Where a build's result is: `result-NAME` in the checkout, for both backends.

`flox build NAME` leaves result-NAME; `workbench build` passes `--out-link result-NAME` to
`nix build` so the loop finds a variant's or flavour's result the same way whichever built it.
"""

from __future__ import annotations

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
