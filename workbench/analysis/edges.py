"""ninja's log entries as build edges: one per command, timed exactly, named by what it made.

ninja logs one line per output of an edge, one after another with the same start, end and
command hash; `EdgeAssembler` folds them into one `Edge`. Each ninja process counts time from its
own start, so a build that runs ninja more than once (a CMake re-run, ORT's build.py calling it
per target) starts a new "session" whenever an end time falls back (an edge's line is written
when it ends, so within one ninja run end times only grow); sessions are laid end to end.

An edge is named by its output, and, for CMake's layout, by its target and source:
`CMakeFiles/onnxruntime_providers.dir/core/providers/cpu/conv.cc.o` is target
`onnxruntime_providers`, source `core/providers/cpu/conv.cc`, a C/C++ compile. The same source
built into five targets is five edges with five outputs, never one file five times.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.analysis.ninja_log import LogEntry

COMPILE = "compile"
CUDA = "cuda"
LINK = "link"
OTHER = "other"

# CMake's object path: CMakeFiles/<target>.dir/<source path>.o (Makefile and Ninja generators).
_CMAKE_OBJECT = re.compile(r"(?:^|/)CMakeFiles/([^/]+)\.dir/(.+?)\.(?:o|obj)$")
_SOURCE_OBJECT = re.compile(r"^(.+\.(?:cc|cpp|cxx|c\+\+|C|c|cu|S|s|m|mm))\.(?:o|obj)$")
_LIBRARY = re.compile(r"\.(?:a|so|lib|dll|dylib)(?:\.\d+)*$")
_CMAKE_RULE = re.compile(r"^[A-Z]+_[A-Z_]+?__(.+)_[^_]*$")
_CUDA_OUTPUTS = (".ptx", ".cubin", ".fatbin", ".cu.o", ".cu.obj")


@dataclass(frozen=True, slots=True)
class Edge:
    """One command ninja ran: its outputs and exact times (seconds from the build's first ninja
    start, sessions laid end to end)."""

    outputs: tuple[str, ...]
    start_s: float
    end_s: float
    command_hash: str
    session: int = 0
    rule: str | None = None
    """The ninja rule, when the graph was read (CXX_COMPILER__t_Release, ...)."""

    @property
    def output(self) -> str:
        """The edge's first output: its name."""
        return self.outputs[0]

    @property
    def duration_s(self) -> float:
        """Exact duration (ninja's millisecond clock)."""
        return self.end_s - self.start_s

    @property
    def target(self) -> str | None:
        """The CMake target the edge belongs to, when its output or rule says."""
        found = target_of(self.output)
        if found is None and self.rule:
            # CMake's rules are LANG_KIND__TARGET_CONFIG: CXX_STATIC_LIBRARY_LINKER__fixture_
            named = _CMAKE_RULE.match(self.rule)
            found = named.group(1) if named else None
        return found

    @property
    def source(self) -> str | None:
        """The source file a compile edge compiles, when its output says."""
        return source_of(self.output)

    @property
    def kind(self) -> str:
        """compile, cuda, link or other."""
        return kind_of(self.output, self.rule)


def target_of(output: str) -> str | None:
    """`CMakeFiles/foo.dir/src/a.cc.o` → `foo`; a library or program → its own name."""
    found = _CMAKE_OBJECT.search(output)
    if found is not None:
        return found.group(1)
    return None


def source_of(output: str) -> str | None:
    """`CMakeFiles/foo.dir/src/a.cc.o` → `src/a.cc`; `a.cc.o` → `a.cc`; else None."""
    found = _CMAKE_OBJECT.search(output)
    if found is not None:
        inner = found.group(2)
        source = _SOURCE_OBJECT.match(inner + ".o")
        return source.group(1) if source else None
    source = _SOURCE_OBJECT.match(output)
    return source.group(1) if source else None


def kind_of(output: str, rule: str | None = None) -> str:
    """What an edge does, from its rule when known, else from its output's name."""
    if rule:
        upper = rule.upper()
        if "CUDA_COMPILER" in upper or "NVCC" in upper:
            return CUDA
        if "COMPILER" in upper or upper in ("CC", "CXX"):
            return COMPILE
        if "LINKER" in upper or upper in ("LINK", "AR"):
            return LINK
    if output.endswith(_CUDA_OUTPUTS):
        return CUDA
    if output.endswith((".o", ".obj")):
        return COMPILE
    if _LIBRARY.search(output):
        return LINK
    if rule is None and "." not in output.rsplit("/", 1)[-1]:
        return LINK  # a program: ninja logs it as a bare name
    return OTHER


class EdgeAssembler:
    """Folds log entries, as they arrive, into edges; see the module docstring."""

    def __init__(self) -> None:
        self.edges: list[Edge] = []
        self._session = 0
        self._offset_ms = 0
        self._session_end_ms = 0
        self._last_end_ms = -1
        self._pending: list[LogEntry] = []

    def add(self, entries: Iterable[LogEntry]) -> list[Edge]:
        """Fold new entries in; returns the edges they completed (the last group may wait
        for its other outputs until the next call or `flush`)."""
        done: list[Edge] = []
        pending = self._pending
        for entry in entries:
            if pending:
                first = pending[0]
                if (
                    entry.start_ms == first.start_ms
                    and entry.end_ms == first.end_ms
                    and entry.command_hash == first.command_hash
                ):
                    pending.append(entry)
                    continue
                done.append(self._edge(pending))
                pending = self._pending = []
            pending.append(entry)
        return done

    def flush(self) -> list[Edge]:
        """Complete the last group (call when no more entries will come)."""
        if not self._pending:
            return []
        edge = self._edge(self._pending)
        self._pending = []
        return [edge]

    def _edge(self, group: Sequence[LogEntry]) -> Edge:
        first = group[0]
        if self._last_end_ms >= 0 and first.end_ms < self._last_end_ms:
            # A new ninja process: its clock started again. Lay it after the last one.
            self._session += 1
            self._offset_ms += self._session_end_ms
            self._session_end_ms = 0
        self._last_end_ms = first.end_ms
        self._session_end_ms = max(self._session_end_ms, first.end_ms)
        edge = Edge(
            outputs=tuple(entry.output for entry in group),
            start_s=(self._offset_ms + first.start_ms) / 1000.0,
            end_s=(self._offset_ms + first.end_ms) / 1000.0,
            command_hash=first.command_hash,
            session=self._session,
        )
        self.edges.append(edge)
        return edge


def assemble(entries: Iterable[LogEntry]) -> list[Edge]:
    """All edges of a list of entries."""
    assembler = EdgeAssembler()
    assembler.add(entries)
    assembler.flush()
    return assembler.edges
