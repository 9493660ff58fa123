"""The libraries the threads run in: their symbols, and where gdb finds their debug files."""

from __future__ import annotations

import os
from typing import Any

from workbench.debugging.capture.debug_directories import nix_debug_outputs, passable, store_path
from workbench.debugging.capture.gdb_probes import WAIT_SCAN_DEPTH
from workbench.debugging.capture.mappings import library_of
from workbench.debugging.capture.pc_sampling import RegisterRead
from workbench.debugging.capture.symbols import (
    SymbolStatus,
    is_runtime_or_system_library,
)
from workbench.debugging.gdb.gdb_session import GdbSession
from workbench.debugging.model import (
    Capture,
)


def symbols_json(status: SymbolStatus | None) -> dict[str, Any] | None:
    if status is None:
        return None
    facts = status.facts
    return {
        "path": status.path,
        "level": status.level,
        "missing": status.missing,
        "debug_file": status.debug_file,
        "build_id": facts.build_id if facts else None,
        "debuglink": facts.debuglink if facts else None,
        "searched": list(status.searched),
        "advice": list(status.advice),
        "message": status.message(),
    }


def with_libraries(
    executable: dict[str, Any] | None, libraries: list[SymbolStatus]
) -> dict[str, Any]:
    """The executable's symbols document with `libraries`: each checked library's own."""
    document: dict[str, Any] = dict(executable) if executable else {"path": None, "level": None}
    document["missing"] = bool(executable and executable.get("missing"))
    document["libraries"] = [symbols_json(status) for status in libraries]
    return document


def libraries_in_use(capture: Capture) -> list[str]:
    """The mapped files the threads' code is in: where program counters were sampled, then
    each thread's innermost frame and its innermost frame outside the runtime libraries
    (a thread blocked in libc waits on behalf of that caller). Most frequent first."""
    counts: dict[str, int] = {}
    for hits in capture.pc_samples.values():
        for hit in hits:
            if hit.library:
                counts[hit.library] = counts.get(hit.library, 0) + 1
    for sample in capture.samples[-1:]:
        for thread in sample.threads:
            frames = thread.frames[:WAIT_SCAN_DEPTH]
            caller = next(
                (
                    frame
                    for frame in frames
                    if frame.library and not is_runtime_or_system_library(frame.library)
                ),
                None,
            )
            for frame in (frames[0] if frames else None, caller):
                if frame is not None and frame.library:
                    counts[frame.library] = counts.get(frame.library, 0) + 1
    return sorted(counts, key=lambda path: -counts[path])


def load_relative_libraries(
    session: GdbSession, mappings: list[tuple[int, int, str]], timeout: float
) -> None:
    """Load the libraries gdb could not find because the program named them relative to its
    own directory (dlopen("./libx.so"), ctypes.CDLL("./libx.so")): gdb looks for them
    relative to its own. Their mapped paths' directories become solib-search-path, where
    gdb looks for a library by its base name, and `sharedlibrary` loads them. Nothing is
    sent when every library was found (the usual case)."""
    unfound = {
        os.path.basename(str(payload.get("host-name") or payload.get("id") or ""))
        for record in session.notifications
        if record.get("message") == "library-loaded"
        and isinstance(payload := record.get("payload"), dict)
        and not str(payload.get("host-name") or payload.get("id") or "/").startswith("/")
    }
    directories = passable(
        tuple(
            dict.fromkeys(
                os.path.dirname(path)
                for _, _, path in mappings
                if os.path.basename(path) in unfound
            )
        )
    )
    if directories:
        session.commands(
            [
                f"-gdb-set solib-search-path {':'.join(directories)}",
                '-interpreter-exec console "sharedlibrary"',
            ],
            timeout=timeout,
        )


def library_debug_directories(
    pcs: dict[int, list[RegisterRead]],
    mappings: list[tuple[int, int, str]],
    given: tuple[str, ...],
) -> tuple[str, ...]:
    """The Nix `-debug` outputs of the store libraries the program counters landed in that
    gdb was not given: empty unless such a library runs (then gdb is told before it attaches
    and loads the library's symbols). The store is listed once per process."""
    landed: set[str] = set()
    for reads in pcs.values():
        for read in reads:
            library = library_of(read.pc, mappings)
            if library and store_path(library):
                landed.add(library)
    extra: list[str] = []
    for library in sorted(landed):
        if not is_runtime_or_system_library(library):
            extra += [d for d in nix_debug_outputs(library) if d not in given and d not in extra]
    return passable(tuple(extra))
