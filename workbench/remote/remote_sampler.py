"""What each build host is compiling: the workbench's sampler run there, over one SSH connection.

Per host, one long-lived ssh session over the host's multiplexed connection (`hosts.ssh`:
ControlMaster/ControlPersist, the connection `workbench hosts` and the probes use) runs
`python -m workbench.monitor.stream` on the host, which writes one JSON line a second: the
compile and link jobs of the Nix builds there (file, CPU %, RSS) and the host's memory. A
sample costs nothing on the wire but that line: no connection, no channel per sample.

How the code gets there, in this order (the one used is said in the host's line):
1. installed: a `workbench` on the host's PATH whose Python has `workbench.monitor.stream`;
2. shipped: the sampler's own modules (`workbench.monitor`, standard library only, no psutil)
   zipped here and piped to the host's `python3` (3.10 or newer) on the same session's stdin,
   unpacked in a temporary folder that is removed once imported;
3. nix copy: with neither, when the host has Nix and this workbench runs from the Nix store,
   its Python environment is copied there (`nix copy --to`, through the same connection) and
   run from the host's store.
A host where none works, or whose sampler ends, says so in its line; the build goes on.

Which builders are this build's: the sampler is started with the targets' derivation names
and then told, on the session's stdin, every derivation Nix starts on that host as the build's
log reveals it (`FleetSampling.learn`): the compile of a variant runs in a dependency (the
flake's `NAME-cpp` C++ layer, below the target's Python layer), not in the target itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.remote.config import BuildHost
from workbench.remote.ssh import SshSetup

if TYPE_CHECKING:
    from workbench.remote.fleet import Fleet

# The modules the sampler needs (workbench.monitor imports nothing else of the workbench).
_SHIPPED = (
    "__init__.py",
    "monitor/__init__.py",
    "monitor/classification.py",
    "monitor/derivation_file.py",
    "monitor/discovery.py",
    "monitor/memory.py",
    "monitor/procfs.py",
    "monitor/sampler.py",
    "monitor/stream.py",
)
_LENGTH_DIGITS = 12
# No sample for this long while the session is still open: the line says how stale it is.
STALE_AFTER_S = 5.0
NIX_COPY_TIMEOUT_S = 300.0

# Run by the host's python3: read the zipped sampler from stdin, import it, remove it, sample.
_LOADER = f"""
import io, json, shutil, sys, tempfile, zipfile
def fail(text):
    print(json.dumps({{"error": text}}), flush=True)
    sys.exit(3)
if sys.version_info < (3, 10):
    fail("python3 there is " + sys.version.split()[0] + ", the sampler needs 3.10 or newer")
size = int(sys.stdin.buffer.read({_LENGTH_DIGITS}) or 0)
data = sys.stdin.buffer.read(size)
if size == 0 or len(data) != size:
    fail("the sampler's code arrived cut short")
folder = tempfile.mkdtemp(prefix="workbench-sampler-")
try:
    zipfile.ZipFile(io.BytesIO(data)).extractall(folder)
    sys.path.insert(0, folder)
    from workbench.monitor import stream
except Exception as error:
    fail("the shipped sampler does not start: " + type(error).__name__ + ": " + str(error))
finally:
    shutil.rmtree(folder, ignore_errors=True)
sys.exit(stream.main(["--via", "shipped", "--stdin-eof", *sys.argv[1:]]))
"""

_STREAM = "-m workbench.monitor.stream --stdin-eof"
# Said by the remote script before the loader reads the zipped sampler on stdin: only then is
# it sent (an installed sampler reads nothing but derivation names there).
_SEND_BUNDLE = '{"send": "sampler"}'

# The remote side of the session: installed, else shipped, else a line saying what is missing.
_REMOTE_SCRIPT = f"""
wb=$(command -v workbench 2>/dev/null) || wb=
if [ -n "$wb" ]; then
  py=$(sed -n '1s/^#![ ]*//p' "$wb" | cut -d' ' -f1)
  if [ -n "$py" ] && "$py" -c 'import workbench.monitor.stream' 2>/dev/null; then
    exec "$py" {_STREAM} --via installed @ARGS@
  fi
fi
if command -v python3 >/dev/null 2>&1; then
  echo '{_SEND_BUNDLE}'
  exec python3 -c {shlex.quote(_LOADER)} @ARGS@
fi
if command -v nix-store >/dev/null 2>&1; then nix=yes; else nix=no; fi
echo '{{"error": "no workbench and no python3 on the PATH there", "nix": "'$nix'"}}'
"""


def remote_script(derivations: tuple[str, ...] = ()) -> str:
    """The remote side's shell script, its sampler told which derivations are this build's."""
    return _REMOTE_SCRIPT.replace("@ARGS@", stream_arguments(derivations))


def stream_arguments(derivations: tuple[str, ...]) -> str:
    """`--derivation NAME ...` for the sampler's command line, quoted for the remote shell."""
    return " ".join(f"--derivation {shlex.quote(name)}" for name in derivations)


def derivation_names(drv_paths: list[str]) -> tuple[str, ...]:
    """ "/nix/store/<hash>-onnxruntime-1.23.2.drv" -> "onnxruntime-1.23.2", as a builder's
    `name` says it (what the sampler matches builders by)."""
    names = []
    for path in drv_paths:
        base = path.rpartition("/")[2].removesuffix(".drv")
        if len(base) > 33 and base[32] == "-":
            names.append(base[33:])
    return tuple(dict.fromkeys(names))


def sampler_bundle() -> bytes:
    """The sampler's modules as a zip (a few tens of KiB), as the remote loader reads it."""
    package = Path(__file__).resolve().parent.parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for relative in _SHIPPED:
            archive.write(package / relative, f"workbench/{relative}")
    return buffer.getvalue()


def local_nix_closure() -> str | None:
    """The store path of the Python environment running this workbench, if in the Nix store."""
    prefix = Path(sys.prefix).resolve()
    parts = prefix.parts
    if len(parts) >= 4 and parts[1:3] == ("nix", "store"):
        return str(Path(*parts[:4]))
    return None


@dataclass(frozen=True)
class CompileJob:
    """One compile or link job on the host at the last sample."""

    pid: int
    tool: str
    file: str | None
    kind: str | None
    cpu_percent: float
    rss: int


@dataclass(frozen=True)
class HostSample:
    """One sample of one host."""

    t: float
    received: float  # monotonic, here
    cpu_percent: float
    memory_available: int
    memory_total: int
    jobs: tuple[CompileJob, ...]


def parse_sample(line: str, received: float) -> HostSample | None:
    """A sample line of `workbench.monitor.stream`, else None (any other line)."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict) or "jobs" not in data:
            return None
        jobs = tuple(
            CompileJob(
                pid=int(job["pid"]),
                tool=str(job.get("tool") or ""),
                file=str(job["file"]) if job.get("file") else None,
                kind=str(job["kind"]) if job.get("kind") else None,
                cpu_percent=float(job.get("cpu_percent") or 0.0),
                rss=int(job.get("rss") or 0),
            )
            for job in data["jobs"]
        )
        return HostSample(
            t=float(data["t"]),
            received=received,
            cpu_percent=float(data.get("cpu_percent") or 0.0),
            memory_available=int(data.get("memory_available") or 0),
            memory_total=int(data.get("memory_total") or 0),
            jobs=jobs,
        )
    except (ValueError, KeyError, TypeError):
        return None


def _size(value: int) -> str:
    if value >= 1 << 30:
        return f"{value / (1 << 30):.1f} GiB"
    return f"{value / (1 << 20):.0f} MiB"


def jobs_text(sample: HostSample, most: int = 3) -> str:
    """ "compiling slow.cc (98% CPU, 312 MiB), ...; 21.3 GiB free" (file names untrusted)."""
    parts = []
    for job in sample.jobs[:most]:
        verb = "linking" if job.kind == "linker" else "compiling"
        what = os.path.basename(job.file) if job.file else job.tool
        parts.append(f"{verb} {what} ({job.cpu_percent:.0f}% CPU, {_size(job.rss)})")
    if len(sample.jobs) > most:
        parts.append(f"+{len(sample.jobs) - most} more")
    doing = ", ".join(parts) if parts else "nothing compiling"
    return f"{doing}; {_size(sample.memory_available)} free"


@dataclass
class RemoteSampler:
    """The sampler of one host: one ssh session over its shared connection, read in a thread."""

    setup: SshSetup
    host: BuildHost
    clock: Any = time.monotonic
    derivations: tuple[str, ...] = ()
    """Only builders of these derivations are sampled there (empty: every Nix build)."""
    via: str = ""
    error: str = ""  # why it cannot sample (never started)
    gone: str = ""  # why it stopped after it started
    remote_pid: int | None = None
    samples: int = 0
    psutil_imported: bool | None = None
    latest: HostSample | None = None
    _process: subprocess.Popen[bytes] | None = None
    _stopping: bool = False
    _thread: threading.Thread | None = None
    _stderr: list[str] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)  # every name known, the command line's too
    _live: subprocess.Popen[bytes] | None = None  # the session whose sampler reads names now
    _stdin_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._names = set(self.derivations)

    def add_derivations(self, names: Iterable[str]) -> None:
        """More derivations of this build that Nix builds on this host (names, as
        `derivation_names` gives them): sent to the remote sampler on its stdin, at once if it
        runs, else as soon as it says hello."""
        with self._stdin_lock:
            new = sorted(set(names) - self._names)
            if not new:
                return
            self._names.update(new)
            if self._live is not None:
                self._send_names(self._live, new)

    def _send_names(self, process: subprocess.Popen[bytes], names: list[str]) -> None:
        """One `{"derivations": [...]}` line on the session's stdin (under `_stdin_lock`)."""
        if process.stdin is None or not names:
            return
        with contextlib.suppress(OSError, ValueError):  # ended: its end is said elsewhere
            process.stdin.write((json.dumps({"derivations": names}) + "\n").encode())
            process.stdin.flush()

    def start(self) -> None:
        """Start in the background (the SSH handshake may take seconds): never blocks."""
        self._thread = threading.Thread(
            target=self._run, name=f"sampler-{self.host.name}", daemon=True
        )
        self._thread.start()

    def wait_started(self, timeout_s: float) -> bool:
        """Wait until the first sample arrived or it failed; whether it samples."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.latest is not None or self.error or self.gone:
                break
            time.sleep(0.05)
        return self.latest is not None and not self.gone

    def _run(self) -> None:
        try:
            problem = self._session(remote_script(self.derivations), bundle=sampler_bundle())
            if problem is not None and not self._stopping:
                self._fallback(problem)
        except Exception as error:  # a thread's failure becomes the host's line, never a trace
            self.error = self.error or f"{type(error).__name__}: {error}"

    def _fallback(self, problem: dict[str, Any]) -> None:
        """Neither installed nor shippable: copy this workbench's closure, if Nix can."""
        closure = local_nix_closure()
        reason = str(problem.get("error", "the sampler did not start"))
        if problem.get("nix") != "yes" or closure is None:
            missing = "no Nix there" if problem.get("nix") != "yes" else "no Nix closure here"
            self.error = f"{reason}; {missing} to copy the workbench to"
            return
        env = dict(os.environ)
        argv = self.setup.base_argv(self.host)
        # Nix's own ssh goes through the same shared connection (the path has no spaces).
        env["NIX_SSHOPTS"] = " ".join(argv[1:-1])
        copied = subprocess.run(
            ["nix", "copy", "--to", self.host.store_uri, closure],
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            timeout=NIX_COPY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if copied.returncode != 0:
            last = (copied.stderr.strip().splitlines() or ["failed"])[-1]
            self.error = f"{reason}; nix copy of the workbench failed: {last}"
            return
        python = shlex.quote(f"{closure}/bin/python3")
        extra = stream_arguments(self.derivations)
        again = self._session(f"exec {python} {_STREAM} --via nix-copy {extra}", bundle=None)
        if again is not None:
            self.error = str(again.get("error", "the copied sampler did not start"))

    def _session(self, script: str, bundle: bytes | None) -> dict[str, Any] | None:
        """Run one session to its end; an `{"error": ...}` line it sent, else None."""
        process = subprocess.Popen(
            [*self.setup.base_argv(self.host), script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._process = process
        threading.Thread(target=self._read_stderr, args=(process,), daemon=True).start()
        assert process.stdin is not None and process.stdout is not None
        # stdin stays open: the remote sampler reads derivation names on it, and ends when it
        # closes (stop()).
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line == _SEND_BUNDLE and bundle is not None:
                with self._stdin_lock, contextlib.suppress(OSError, ValueError):
                    process.stdin.write(f"{len(bundle):0{_LENGTH_DIGITS}d}".encode() + bundle)
                    process.stdin.flush()
                continue
            sample = parse_sample(line, self.clock())
            if sample is not None:
                self.latest = sample
                self.samples += 1
                continue
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and "psutil_imported" in data:
                self.psutil_imported = bool(data["psutil_imported"])
            elif isinstance(data, dict) and "hello" in data:
                self.via = str(data.get("via", "?"))
                self.remote_pid = int(data.get("pid") or 0) or None
                with self._stdin_lock:  # it reads names now: those learnt meanwhile go first
                    self._live = process
                    self._send_names(process, sorted(self._names - set(self.derivations)))
            elif isinstance(data, dict) and "error" in data:
                with self._stdin_lock:
                    self._live = None
                self._close(process)
                return data
        with self._stdin_lock:
            self._live = None
        code = process.wait()
        if not self._stopping:
            said = self._stderr[-1] if self._stderr else ""
            why = f"the session ended (ssh exit {code})" + (f": {said}" if said else "")
            if self.latest is None and not self.via:
                self.error = why
            else:
                self.gone = why
        return None

    def _read_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            text = raw.decode("utf-8", "replace").strip()
            if text:
                self._stderr.append(text[:300])
                del self._stderr[:-5]

    def _close(self, process: subprocess.Popen[bytes]) -> None:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self) -> None:
        """End the session: its stdin closes, so the remote sampler exits; the connection
        itself stays (ControlPersist) for whoever shares it."""
        self._stopping = True
        if self._process is not None and self._process.poll() is None:
            self._close(self._process)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def line(self) -> str:
        """What the host's line says of its processes (untrusted file names inside)."""
        if self.error:
            return f"not sampled: {self.error}"
        if self.gone:
            return f"sampler gone: {self.gone}"
        if self.latest is None:
            return "sampler starting"
        age = self.clock() - self.latest.received
        stale = f" (no sample for {age:.0f} s)" if age > STALE_AFTER_S else ""
        return f"{jobs_text(self.latest)}{stale} [sampled via {self.via or '?'}]"

    def shape(self) -> str:
        """The line without its numbers: what changed in kind (files, gone), not in CPU."""
        if self.error or self.gone or self.latest is None:
            return self.line()
        return ",".join(sorted(job.file or job.tool for job in self.latest.jobs))


@dataclass
class FleetSampling:
    """A sampler per remote host of a build, started together and stopped together."""

    samplers: dict[str, RemoteSampler]
    _learnt: int = 0  # the fleet's attempts told to the samplers so far

    @classmethod
    def for_hosts(
        cls, setup: SshSetup, hosts: list[BuildHost], derivations: tuple[str, ...] = ()
    ) -> FleetSampling:
        """Start sampling `hosts` (in the background), for builders of `derivations` only
        when names are given."""
        fleet = cls(
            {host.name: RemoteSampler(setup, host, derivations=derivations) for host in hosts}
        )
        for sampler in fleet.samplers.values():
            sampler.start()
        return fleet

    @classmethod
    def for_matrix(
        cls, matrix: dict[str, Any], config_directory: Path, state_directory: Path
    ) -> FleetSampling | str:
        """Sample the remote hosts of a matrix build (its record's "matrix" settings), as
        hosts.toml reaches them now; a line saying why not when it cannot be read."""
        from workbench.errors import WorkbenchError
        from workbench.remote.config import load_hosts
        from workbench.remote.ssh import prepare_ssh

        names = set(dict(matrix.get("hosts", {})).values())
        if not names:
            return cls({})
        try:
            config = load_hosts(config_directory)
        except (OSError, ValueError, WorkbenchError) as error:
            return f"hosts not sampled: {error}"
        hosts = [host for host in config.hosts if host.name in names]
        if not hosts:
            return cls({})
        # This build's derivations only: a shared builder also builds for others.
        drvs = [str(t.get("drv", "")) for t in matrix.get("targets", []) if isinstance(t, dict)]
        return cls.for_hosts(
            prepare_ssh(config.hosts, state_directory), hosts, derivation_names(drvs)
        )

    def learn(self, fleet: Fleet) -> None:
        """Tell each host's sampler the derivations Nix started on it since the last call
        (activity 105 names the host): dependencies of the targets included."""
        for attempt in fleet.attempts[self._learnt :]:
            sampler = self.samplers.get(attempt.host)
            if sampler is not None:
                sampler.add_derivations(derivation_names([attempt.drv]))
        self._learnt = len(fleet.attempts)

    def lines(self) -> dict[str, str]:
        """host name -> what its line says of its processes."""
        return {name: sampler.line() for name, sampler in self.samplers.items()}

    def shape(self) -> dict[str, str]:
        """host name -> the line without its numbers."""
        return {name: sampler.shape() for name, sampler in self.samplers.items()}

    def stop(self) -> None:
        """Stop every host's sampler."""
        for sampler in self.samplers.values():
            sampler.stop()
