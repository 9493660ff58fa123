"""What a ninja run did, from its `[finished/total] description` lines in the build log.

Outside a terminal ninja prints one status line per edge it runs (NINJA_STATUS, "[%f/%t] " by
default; the iterate command sets exactly that). CMake's descriptions say what each edge is:
"Building CXX object CMakeFiles/t.dir/a.cc.o" (a compile), "Linking CXX static library
libt.a" (a link), "Re-running CMake..." (a re-configure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from workbench.progress.steps import bounded_int

NINJA_STATUS = "[%f/%t] "
STATUS = re.compile(r"^(?:\S+> )?\[(\d+)/(\d+)\] (.*)$")
COMPILE = re.compile(r"^Building (C|CXX|CUDA|ASM|Fortran|HIP|OBJC|OBJCXX) object (\S+)")
LINK = re.compile(r"^Linking ")


@dataclass
class NinjaRun:
    """The edges one ninja run ran, sorted by kind."""

    edges: int = 0
    total: int = 0
    compiled: list[str] = field(default_factory=list)
    """Object files compiled, as CMake names them (CMakeFiles/t.dir/a.cc.o)."""
    linked: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    no_work: bool = False

    @property
    def sources(self) -> list[str]:
        """The compiled translation units' file names (a.cc for CMakeFiles/t.dir/a.cc.o)."""
        names = []
        for obj in self.compiled:
            base = obj.rsplit("/", 1)[-1]
            names.append(base[: -len(".o")] if base.endswith(".o") else base)
        return names

    def to_json(self) -> dict[str, object]:
        return {
            "edges": self.edges,
            "total": self.total,
            "compiled": self.compiled,
            "sources": self.sources,
            "linked": self.linked,
            "other": self.other,
            "no_work": self.no_work,
        }


def parse(lines: list[str]) -> NinjaRun:
    """The edges in a ninja run's output lines."""
    run = NinjaRun()
    for line in lines:
        found = STATUS.match(line)
        if found is None:
            if line.startswith("ninja: no work to do"):
                run.no_work = True
            continue
        total = bounded_int(found.group(2))
        if total is None:  # a status line with thousands of digits: build output, not a count
            continue
        run.edges += 1
        run.total = max(run.total, total)
        description = found.group(3)
        compiled = COMPILE.match(description)
        if compiled:
            run.compiled.append(compiled.group(2))
        elif LINK.match(description):
            run.linked.append(description)
        else:
            run.other.append(description)
    return run


def parse_log(path: Path | str) -> NinjaRun:
    """The edges in a build log file (a missing log ran none)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return NinjaRun()
    return parse(text.splitlines())
