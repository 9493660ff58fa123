"""Does the program have symbols, and where is its separate debug file if it is stripped?

Release builds are often stripped, and Nix (`separateDebugInfo = true`) moves DWARF into a
`debug` output under `lib/debug/.build-id/xx/yyyy.debug`. gdb finds such a file by the
binary's build-id (under each debug-file directory) or by its `.gnu_debuglink` name (next to
the binary, in `.debug/` beside it, or under a debug directory plus the binary's directory).
This module reads only the ELF section headers and two small sections, with the same search,
so that a capture can say first what is missing and how to get it: for the executable, and
for each shared library the threads run in (check_libraries: libonnxruntime.so in a python
process), leaving out the runtime and system libraries whose missing debug info is normal.

(A small reader rather than pyelftools: three fixed-layout tables are read, and a new
runtime dependency would have to reach pyproject.toml and the flake's Python set.)
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from workbench.debugging.capture.debug_directories import searched_directories, store_path

# Libraries whose missing debug info is normal and not the user's to fix: the C and C++
# runtimes and the loader (every distribution and Nix ship them stripped, their debug info
# optional), and NVIDIA's driver libraries (shipped stripped, with no debug files at all).
# Code running there is no alarm about symbols; the diagnosis reads their callers instead.
RUNTIME_LIBRARY = re.compile(
    r"/(libc|libpthread|libstdc\+\+|libgcc_s|libm|libdl|librt|ld-linux[^/]*|ld64)[.-][^/]*$"
    r"|/ld-[^/]*$|/lib(cuda|nvidia-[^/]*)\.so[^/]*$"
)
# Libraries a distribution installed (its own debug packages cover them), unless a Python
# package put them there: a pip wheel's libonnxruntime.so is the user's to get symbols for.
DISTRIBUTION_DIRECTORY = re.compile(r"^/(usr/)?lib(64|exec)?/")
PYTHON_PACKAGES = re.compile(r"/(site|dist)-packages/")
MAX_CHECKED_LIBRARIES = 8


@dataclass(frozen=True)
class ElfFacts:
    """What the section headers say: symbol table, DWARF, build-id, debuglink name."""

    has_symtab: bool
    has_dwarf: bool
    build_id: str | None
    debuglink: str | None


@dataclass(frozen=True)
class SymbolStatus:
    """The executable's symbols: `level` is "full", "separate", "names-only" or "none".

    full: DWARF in the file; separate: DWARF in `debug_file`; names-only: a symbol table but
    no DWARF anywhere (function names, no file:line); none: stripped, no debug file found
    (frames in it have no names at all).
    """

    path: str
    level: str
    facts: ElfFacts | None
    debug_file: str | None = None
    searched: tuple[str, ...] = ()
    advice: tuple[str, ...] = field(default_factory=tuple)

    @property
    def missing(self) -> bool:
        return self.level in ("names-only", "none")

    def message(self) -> str:
        """One paragraph for the report, first thing shown when symbols are missing."""
        if self.level == "full":
            return f"{self.path}: symbols and debug info present"
        if self.level == "separate":
            return f"{self.path}: stripped; debug info read from {self.debug_file}"
        facts = self.facts
        what = (
            "has function names but no debug info (no file:line)"
            if self.level == "names-only"
            else "is stripped: no symbol table and no debug info, so frames in it have no names"
        )
        looked = []
        if facts and facts.build_id:
            looked.append(f"build-id {facts.build_id[:2]}/{facts.build_id[2:]}.debug")
        if facts and facts.debuglink:
            looked.append(f"debuglink {facts.debuglink}")
        searched = f" (looked for {' and '.join(looked)} in {', '.join(self.searched)})"
        return (
            f"SYMBOLS MISSING: {self.path} {what}; no separate debug file was found"
            f"{searched if looked else ''}. To get them: " + "; or ".join(self.advice)
        )


def read_elf(path: str | os.PathLike[str]) -> ElfFacts | None:
    """Section facts of a 32- or 64-bit ELF file; None when it is not ELF or unreadable."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if len(header) < 52 or header[:4] != b"\x7fELF":
                return None
            wide = header[4] == 2
            order = "<" if header[5] == 1 else ">"
            if wide:
                (shoff,) = struct.unpack_from(order + "Q", header, 0x28)
                shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", header, 0x3A)
                layout = order + "IIQQQQIIQQ"
            else:
                (shoff,) = struct.unpack_from(order + "I", header, 0x20)
                shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", header, 0x2E)
                layout = order + "IIIIIIIIII"
            if shoff == 0 or shnum == 0 or shstrndx >= shnum:
                return ElfFacts(False, False, None, None)
            handle.seek(shoff)
            table = handle.read(shentsize * shnum)
            sections = [
                struct.unpack_from(layout, table, index * shentsize) for index in range(shnum)
            ]

            def contents(section: tuple[int, ...], limit: int = 1 << 20) -> bytes:
                offset, size = section[4], section[5]
                handle.seek(offset)
                return handle.read(min(size, limit))

            names_blob = contents(sections[shstrndx])
            named: dict[str, tuple[int, ...]] = {}
            for section in sections:
                end = names_blob.find(b"\0", section[0])
                named[names_blob[section[0] : end].decode(errors="replace")] = section
            nobits = 8  # SHT_NOBITS: the section has no bytes in this file
            build_id = None
            if ".note.gnu.build-id" in named:
                note = contents(named[".note.gnu.build-id"])
                if len(note) >= 16:
                    namesz, descsz, _kind = struct.unpack_from(order + "III", note, 0)
                    start = 12 + (namesz + 3) // 4 * 4
                    build_id = note[start : start + descsz].hex() or None
            debuglink = None
            if ".gnu_debuglink" in named:
                link = contents(named[".gnu_debuglink"], 4096)
                debuglink = link.split(b"\0", 1)[0].decode(errors="replace") or None
            dwarf = named.get(".debug_info")
            return ElfFacts(
                has_symtab=".symtab" in named,
                has_dwarf=dwarf is not None and dwarf[1] != nobits and dwarf[5] > 0,
                build_id=build_id,
                debuglink=debuglink,
            )
    except (OSError, struct.error):
        return None


def find_debug_file(path: str, facts: ElfFacts, directories: tuple[str, ...]) -> str | None:
    """gdb's search for a separate debug file: by build-id first, then by debuglink."""
    candidates = []
    if facts.build_id and len(facts.build_id) > 2:
        candidates += [
            f"{directory}/.build-id/{facts.build_id[:2]}/{facts.build_id[2:]}.debug"
            for directory in directories
        ]
    if facts.debuglink:
        here = os.path.dirname(os.path.realpath(path))
        candidates += [f"{here}/{facts.debuglink}", f"{here}/.debug/{facts.debuglink}"]
        candidates += [f"{directory}{here}/{facts.debuglink}" for directory in directories]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.path.realpath(candidate) != os.path.realpath(path):
            found = read_elf(candidate)
            if found is not None and found.has_dwarf:
                return candidate
    return None


def check_symbols(path: str | None, extra_dirs: tuple[str, ...] = ()) -> SymbolStatus | None:
    """The executable's symbol status, with the debug directories gdb is to be given."""
    if not path:
        return None
    facts = read_elf(path)
    if facts is None:
        return None
    directories = searched_directories(path, extra_dirs)
    if facts.has_dwarf:
        return SymbolStatus(path, "full", facts, searched=directories)
    found = find_debug_file(path, facts, directories)
    if found:
        return SymbolStatus(path, "separate", facts, debug_file=found, searched=directories)
    advice = []
    package = store_path(path)
    if package:
        name = os.path.basename(package).split("-", 1)[-1]
        advice.append(
            f"build the debug output of {name} ({package}: separateDebugInfo = true, then "
            f"nix build of its .debug output) and put that output's lib/debug in "
            "NIX_DEBUG_INFO_DIRS or pass it with --debug-dir"
        )
    if facts.build_id:
        advice.append(
            f"place the debug file at DIR/.build-id/{facts.build_id[:2]}/"
            f"{facts.build_id[2:]}.debug and pass --debug-dir DIR"
        )
    advice.append("rebuild without stripping (-g, no strip; in Nix dontStrip = true)")
    return SymbolStatus(
        path,
        "names-only" if facts.has_symtab else "none",
        facts,
        searched=directories,
        advice=tuple(advice),
    )


def is_runtime_or_system_library(path: str) -> bool:
    """Whether missing symbols in `path` are normal (libc, the loader, the GPU driver, a
    distribution's own libraries): no alarm is raised for them."""
    if RUNTIME_LIBRARY.search(path):
        return True
    return bool(DISTRIBUTION_DIRECTORY.match(path)) and not PYTHON_PACKAGES.search(path)


def check_libraries(
    paths: Iterable[str], executable: str | None, extra_dirs: tuple[str, ...] = ()
) -> list[SymbolStatus]:
    """The symbol status of each shared library in `paths` that matters: not the executable
    (checked on its own), not a runtime or system library, at most MAX_CHECKED_LIBRARIES;
    in the order given. Only the ELF headers are read (each capture anew: a debug file
    placed since the last capture is found)."""
    wanted: list[str] = []
    for path in paths:
        if (
            path
            and path.startswith("/")
            and path != executable
            and path not in wanted
            and not is_runtime_or_system_library(path)
        ):
            wanted.append(path)
    statuses = [check_symbols(path, extra_dirs) for path in wanted[:MAX_CHECKED_LIBRARIES]]
    return [status for status in statuses if status is not None]
