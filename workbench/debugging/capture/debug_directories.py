"""Where gdb is told to look for separate debug files, computed one way for everyone.

`workbench bt` computes this list twice: at the entry point, to start gdb with the program
already named (gdb_start.start_early, before anything heavy is imported), and in the
capture, which checks the symbols and must know whether that early gdb was told the same.
So this module imports only `os`.
"""

from __future__ import annotations

import os

DEFAULT_DEBUG_DIRS = ("/usr/lib/debug",)
NIX_STORE = "/nix/store/"
# Characters that cannot be passed through gdb's `set debug-file-directory` (its value is
# taken unquoted, and colons separate directories): such a directory is left out.
_UNPASSABLE = (":", '"', "\\")

_store_listing: list[str] | None = None


def debug_directories(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Where gdb should look: given ones, then NIX_DEBUG_INFO_DIRS (as nixpkgs' gdb does),
    then the system default."""
    nix = tuple(part for part in os.environ.get("NIX_DEBUG_INFO_DIRS", "").split(":") if part)
    return tuple(dict.fromkeys([*extra, *nix, *DEFAULT_DEBUG_DIRS]))


def store_path(path: str) -> str | None:
    """`/nix/store/HASH-NAME/lib/libx.so` → `/nix/store/HASH-NAME`; None outside the store."""
    if not path.startswith(NIX_STORE):
        return None
    entry = path[len(NIX_STORE) :].split("/", 1)[0]
    return f"{NIX_STORE}{entry}" if entry else None


def nix_debug_outputs(path: str) -> list[str]:
    """`/nix/store/HASH-NAME/bin/x` → the debug directories of any `*-NAME-debug` output.

    The store is listed once per process (it may hold a hundred thousand entries)."""
    global _store_listing
    package = store_path(path)
    if package is None:
        return []
    store_name = os.path.basename(package)
    name = store_name.split("-", 1)[1] if "-" in store_name else store_name
    if _store_listing is None:
        try:
            _store_listing = os.listdir(NIX_STORE)
        except OSError:
            return []
    suffix = f"-{name}-debug"
    return [f"{NIX_STORE}{entry}/lib/debug" for entry in _store_listing if entry.endswith(suffix)]


def searched_directories(path: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every directory searched for `path`'s debug file, in gdb's order."""
    return tuple(dict.fromkeys([*debug_directories(extra), *nix_debug_outputs(path)]))


def passable(directories: tuple[str, ...]) -> tuple[str, ...]:
    """The directories that can be handed to gdb's `set debug-file-directory`."""
    return tuple(
        directory
        for directory in directories
        if directory
        and not any(character in directory for character in _UNPASSABLE)
        and not any(character.isspace() for character in directory)
    )
