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

from workbench.child_process import ChildProcess
from workbench.debugging.capture.debug_directories import passable, searched_directories

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

_early: EarlyGdb | None = None


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
    usable = passable(debug_dirs)
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


class BtWords:
    """What `start_early` reads from the words after `bt`: the PID (None: no capture follows,
    or the words are unclear, and the parser decides), --gdb's value, the --debug-dir values."""

    __slots__ = ("debug_dirs", "gdb", "pid")

    def __init__(self, pid: int | None, gdb: str | None, debug_dirs: tuple[str, ...]) -> None:
        self.pid = pid
        self.gdb = gdb
        self.debug_dirs = debug_dirs


def bt_words(words: list[str]) -> BtWords:
    """The words after `bt`, read conservatively: anything unclear is no capture."""
    pid = None
    explicit = None
    debug_dirs: list[str] = []
    rest = list(words)
    unclear = BtWords(None, None, ())
    while rest:
        word = rest.pop(0)
        if word in _NO_CAPTURE or word == "--":
            return unclear
        if word in ("--gdb", "--debug-dir"):
            if not rest:
                return unclear
            value = rest.pop(0)
        elif word.startswith(("--gdb=", "--debug-dir=")):
            word, _, value = word.partition("=")
        elif word.isdigit():
            pid = int(word)
            continue
        else:
            continue
        if word == "--gdb":
            explicit = value
        else:
            debug_dirs.append(os.path.expanduser(value))
    return BtWords(pid, explicit, tuple(debug_dirs))


class SpawnedProcess(ChildProcess):
    """The parts of subprocess.Popen that GdbSession uses, for a process started with
    os.posix_spawn and three pipes.

    Importing subprocess costs 3 to 14 ms (measured here and on the GPU host), before gdb
    could start; plain gdb pays nothing like it. So the early gdb is spawned without it.
    """

    def __init__(self, argv: list[str]) -> None:
        child_stdin, self_stdin = os.pipe()  # os.pipe's ends are not inherited (PEP 446)
        self_stdout, child_stdout = os.pipe()
        self_stderr, child_stderr = os.pipe()
        try:
            self.pid = os.posix_spawn(
                argv[0],
                argv,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, child_stdin, 0),
                    (os.POSIX_SPAWN_DUP2, child_stdout, 1),
                    (os.POSIX_SPAWN_DUP2, child_stderr, 2),
                ],
            )
        except BaseException:
            for fd in (self_stdin, self_stdout, self_stderr):
                os.close(fd)
            raise
        finally:
            for fd in (child_stdin, child_stdout, child_stderr):
                os.close(fd)
        self.args = argv
        self.returncode: int | None = None
        self.stdin = open(self_stdin, "wb", buffering=0)  # noqa: SIM115 (closed by its owner)
        self.stdout = open(self_stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr = open(self_stderr, "rb", buffering=0)  # noqa: SIM115

    def timed_out(self, timeout: float) -> Exception:
        """As Popen.wait: subprocess.TimeoutExpired (imported only now, when it is late)."""
        import subprocess

        return subprocess.TimeoutExpired(self.args, timeout)

    def kill(self) -> None:
        if self.poll() is None:
            import signal

            os.kill(self.pid, signal.SIGKILL)


class EarlyGdb:
    """The gdb start_early started: its process, and the program it was given to read with
    the debug directories it was told (`preloaded`), or None if it was given none."""

    __slots__ = ("gdb", "preloaded", "process")

    def __init__(
        self,
        gdb: str,
        process: SpawnedProcess,
        preloaded: tuple[str, tuple[str, ...]] | None,
    ) -> None:
        self.gdb = gdb
        self.process = process
        self.preloaded = preloaded


def start_early(words_after_bt: list[str]) -> None:
    """Start gdb for `bt` now, from its raw arguments; run_bt adopts it (take_early).

    gdb is given the process's executable on its command line, as `gdb -p PID` reads it
    first thing: it reads the symbols (for a static ORT binary, the bulk of the wait) while
    Python imports the rest of the workbench. A run that ends before the capture (a bad
    option) leaves gdb nothing but the end of its input, on which it exits.
    """
    global _early
    words = bt_words(words_after_bt)
    gdb = chosen_gdb(words.gdb) if words.pid is not None else None
    if gdb is None or _early is not None:
        return
    preloaded = None
    argv = gdb_command(gdb)
    try:
        executable = os.readlink(f"/proc/{words.pid}/exe")
    except OSError:
        executable = ""
    if executable.startswith("/") and os.path.isfile(executable):
        directories = passable(searched_directories(executable, words.debug_dirs))
        argv = [*gdb_command(gdb, debug_dirs=directories), executable]
        preloaded = (executable, directories)
    try:
        process = SpawnedProcess(argv)
    except (ValueError, OSError):
        return  # run_bt starts it again and says why it cannot
    _early = EarlyGdb(gdb, process, preloaded)


def take_early(gdb: str) -> EarlyGdb | None:
    """The gdb start_early started, if it is `gdb` and still running; otherwise None (one
    that is not the wanted gdb is ended)."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if os.path.realpath(early.gdb) == os.path.realpath(gdb) and early.process.poll() is None:
        return early
    import contextlib

    with contextlib.suppress(OSError):
        early.process.kill()
    early.process.wait()
    return None
