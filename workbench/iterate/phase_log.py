"""What a failed phase of the derivation said, from the build log of the cycle that ran it.

The phases program (workbench/iterate/phases.py) prints "workbench iterate: PHASE in DIR"
before each phase, and the phase's own output follows in the same log. The first line of it
that reads as an error (CMake's "CMake Error at CMakeLists.txt:3 (message):" with the first
line of its message, a compiler's "x.cc:3:1: error: ...", a bash "error:") is the summary's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.progress.visible import clean_terminal_line, visible

_ERROR = re.compile(
    r"^(?:CMake Error|error:|ERROR:|fatal error:)|: (?:fatal )?error: |^\S+: line \d+: "
)
_KEEP = 300


@dataclass(frozen=True)
class PhaseFailure:
    phase: str
    error: str
    """The phase's first error line (printable: control characters made visible)."""
    log: str

    def to_json(self) -> dict[str, str]:
        return {"phase": self.phase, "error": self.error, "log": self.log}


def phase_failure(log_path: Path | str, phase: str) -> PhaseFailure:
    """The failed `phase`'s first error line in the log (its last words when none reads as an
    error; "(no output)" when it said nothing)."""
    try:
        text = Path(log_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return PhaseFailure(phase, "(the build log cannot be read)", str(log_path))
    marker = f"workbench iterate: {phase} in "
    start = text.rfind(marker)
    lines = [clean_terminal_line(line) for line in text[max(start, 0) :].splitlines()[1:]]
    return PhaseFailure(phase, visible(_first_error(lines))[:_KEEP], str(log_path))


def _first_error(lines: list[str]) -> str:
    for index, line in enumerate(lines):
        if _ERROR.search(line):
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            # CMake's message is on the indented lines after "CMake Error at X:N (message):".
            if line.rstrip().endswith(":") and following:
                return f"{line.strip()} {following}"
            return line.strip()
    said = [line.strip() for line in lines if line.strip() and "workbench" not in line]
    return said[-1] if said else "(no output)"
