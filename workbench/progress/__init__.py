"""Build progress from log lines: Nix internal-json, ninja's `[f/t]` and make's `[ NN%]`.

`ProgressTracker.feed` folds the lines of one build into a `Progress` snapshot and
`ProgressTracker.render` shows a line as a person reads it; `parse_nix_line`, `parse_ninja` and
`parse_make` are the pure line parsers underneath. Nothing here imports Textual.
"""

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
