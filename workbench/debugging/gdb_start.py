"""gdb's command line, and the gdb that `workbench bt PID` starts before anything else.

gdb takes a fifth of a second or more to start (its own Python, its data directory); plain
`gdb -batch -p PID` starts it first thing. `workbench bt` used to start it only after the
command line was parsed and the parser's modules imported, 100-250 ms into the run on a
loaded machine. `start_early` starts it right at the entry point, from the raw arguments,
and `run_bt` adopts it. This module imports only the standard library's lightest parts, so
that nothing is loaded before gdb is on its way.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing before gdb starts
if TYPE_CHECKING:
    import subprocess

GDB_CANDIDATES = ("gdb", "cuda-gdb")
INDEX_CACHE_VARIABLE = "WORKBENCH_GDB_INDEX_CACHE"
# Options given before anything loads: no init files, no auto-loaded scripts (a hostile or
# slow .gdbinit / python pretty-printer in the target's tree must not run), no network.
SAFE_OPTIONS = (
    "--interpreter=mi3",
    "--nx",
    "--quiet",
    "-iex",
    "set auto-load off",
    "-iex",
    "set debuginfod enabled off",
    "-iex",
    "set pagination off",
    "-iex",
    "set confirm off",
    "-iex",
    "set width 0",
    "-iex",
    "set height 0",
    "-iex",
    "set print thread-events off",
)
# Words after `bt` that mean no capture follows: nothing is started for them.
_NO_CAPTURE = {"-h", "--help", "--version"}

_early: tuple[str, subprocess.Popen[bytes]] | None = None


def index_cache_directory() -> str | None:
    """Where gdb keeps the symbol indexes it builds (its index cache), or None for none.

    Reading a library's DWARF builds an index of it, the bulk of an attach: libc's separate
    debug file alone took about 65 of 150 ms here, a static ORT binary far more. gdb writes
    that index to its index cache, one file per build-id, and later sessions read it instead.
    $WORKBENCH_GDB_INDEX_CACHE names the directory ("off" for none); by default
    $XDG_CACHE_HOME/workbench/gdb-index (~/.cache/workbench/gdb-index), not gdb's own
    ~/.cache/gdb, so that the user's gdb settings and files are left alone.
    """
    chosen = os.environ.get(INDEX_CACHE_VARIABLE)
    if chosen is not None:
        return None if chosen.strip() in ("", "off") else os.path.expanduser(chosen)
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "workbench", "gdb-index")


def gdb_command(
    gdb: str, *, symbols_only: bool = False, debug_dirs: tuple[str, ...] = ()
) -> list[str]:
    """gdb's argv; symbols_only adds --readnever: ELF symbols only, no DWARF (fast).

    gdb's index cache is on (index_cache_directory) unless symbols_only: no DWARF, no index.
    debug_dirs become gdb's debug-file-directory, where it looks for separate debug files
    by build-id and by debuglink (colons cannot be in a directory name there).
    """
    argv = [gdb, *SAFE_OPTIONS]
    usable = [directory for directory in debug_dirs if directory and ":" not in directory]
    if usable:
        argv += ["-iex", f"set debug-file-directory {':'.join(usable)}"]
    cache = index_cache_directory()
    if cache and not symbols_only and "\n" not in cache:
        # A gdb older than 13 answers "undefined command" on stderr and goes on without one.
        argv += ["-iex", f"set index-cache directory {cache}", "-iex", "set index-cache enabled on"]
    if symbols_only:
        argv.insert(1, "--readnever")
    return argv


def which(name: str) -> str | None:
    """shutil.which's answer for an executable (without importing shutil): a name with a
    slash as it is, else the first match on PATH."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def chosen_gdb(explicit: str | None) -> str | None:
    """The gdb `find_gdb` would choose, or None where it would raise."""
    if explicit:
        return which(explicit)
    return next(filter(None, map(which, GDB_CANDIDATES)), None)


def bt_gdb_option(words: list[str]) -> tuple[bool, str | None]:
    """For the words after `bt`: whether they name a capture (a PID, no --help), and the
    --gdb value if given. Conservative: anything unclear is no capture (the parser decides)."""
    pid = False
    explicit = None
    rest = list(words)
    while rest:
        word = rest.pop(0)
        if word in _NO_CAPTURE or word == "--":
            return False, None
        if word == "--gdb":
            if not rest:
                return False, None
            explicit = rest.pop(0)
        elif word.startswith("--gdb="):
            explicit = word.partition("=")[2]
        elif word.isdigit():
            pid = True
    return pid, explicit


def start_early(words_after_bt: list[str]) -> None:
    """Start gdb for `bt` now, from its raw arguments; run_bt adopts it (take_early).

    A run that ends before the capture (a bad option) leaves gdb nothing but the end of its
    input, on which it exits.
    """
    global _early
    capture, explicit = bt_gdb_option(words_after_bt)
    gdb = chosen_gdb(explicit) if capture else None
    if gdb is None or _early is not None:
        return
    import subprocess

    try:
        process = subprocess.Popen(
            gdb_command(gdb),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
    except (ValueError, OSError):
        return  # run_bt starts it again and says why it cannot
    _early = (gdb, process)


def take_early(gdb: str) -> subprocess.Popen[bytes] | None:
    """The gdb start_early started, if it is `gdb` and still running; otherwise None (one
    that is not the wanted gdb is ended)."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    started, process = early
    if os.path.realpath(started) == os.path.realpath(gdb) and process.poll() is None:
        return process
    import contextlib

    with contextlib.suppress(OSError):
        process.kill()
    process.wait()
    return None
