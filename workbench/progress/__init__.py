"""Build progress from log lines: Nix internal-json, ninja's `[f/t]` and make's `[ NN%]`.

`ProgressTracker.feed` folds the lines of one build into a `Progress` snapshot and
`ProgressTracker.render` shows a line as a person reads it; `parse_nix_line`, `parse_ninja` and
`parse_make` are the pure line parsers underneath. Nothing here imports Textual.

The names below are loaded when first used (PEP 562), not when the package is: importing one
small module of it (`workbench.progress.visible`, which `workbench bt` uses to print a process's
text safely) does not load the tracker and the Nix log parser with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.progress.nix_log import (
        NixEvent,
        NixMessage,
        NixResult,
        NixStart,
        NixStop,
        derivation_name,
        parse_nix_line,
    )
    from workbench.progress.steps import (
        NinjaStatusParser,
        Step,
        clean_terminal_line,
        parse_make,
        parse_ninja,
        parse_step,
    )
    from workbench.progress.tracker import (
        DerivationState,
        FinishedDerivation,
        Progress,
        ProgressTracker,
    )

# Each name, and the module it comes from.
_HOMES = {
    **dict.fromkeys(
        (
            "NixEvent",
            "NixMessage",
            "NixResult",
            "NixStart",
            "NixStop",
            "derivation_name",
            "parse_nix_line",
        ),
        "workbench.progress.nix_log",
    ),
    **dict.fromkeys(
        (
            "NinjaStatusParser",
            "Step",
            "clean_terminal_line",
            "parse_make",
            "parse_ninja",
            "parse_step",
        ),
        "workbench.progress.steps",
    ),
    **dict.fromkeys(
        ("DerivationState", "FinishedDerivation", "Progress", "ProgressTracker"),
        "workbench.progress.tracker",
    ),
}

__all__ = [
    "DerivationState",
    "FinishedDerivation",
    "NinjaStatusParser",
    "NixEvent",
    "NixMessage",
    "NixResult",
    "NixStart",
    "NixStop",
    "Progress",
    "ProgressTracker",
    "Step",
    "clean_terminal_line",
    "derivation_name",
    "parse_make",
    "parse_ninja",
    "parse_nix_line",
    "parse_step",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later uses find it without this call
    return value
