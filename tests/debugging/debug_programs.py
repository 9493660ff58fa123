"""The C++ fixture programs of the debugging tests, compiled with the real g++.

Each program is built from fixtures/*.cc into a directory the caller owns; compiles run two
at a time (the test machines have two cores).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The provider bridge's loop, as the diagnosis names its functions.
BRIDGE_LOOP = {
    "onnxruntime::DataTypeImpl::GetType<float>",
    "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float",
}
# One quick sample: what the symbol tests need (their loop shows in the first).
ONE_SAMPLE = {"samples": 1, "observe": 0.15}
BRIDGE = ["bridge_provider.cc", "bridge_host.cc"]
# name -> (sources, flags). The bridge is built twice: at -O2 its calls become tail calls
# (a flat spinning loop), at -O0 they stay calls (recursion, with a big stack to last).
PROGRAMS: dict[str, tuple[list[str], list[str]]] = {
    "bridge_o2": (BRIDGE, ["-O2"]),
    "bridge_o0": (BRIDGE, ["-O0", "-DSLOW_HOST", "-DBIG_STACK"]),
    "static_init_deadlock": (["static_init_deadlock.cc"], ["-O2"]),
    "lock_order": (["lock_order.cc"], ["-O2"]),
    "busy": (["busy.cc"], ["-O2"]),
    "short_lived": (["short_lived.cc"], ["-O2"]),
    "many_threads": (["many_threads.cc"], ["-O2"]),
    "spin": (["spin.cc"], ["-O2"]),
    "interpreter_loop": (["interpreter_loop.cc"], ["-O2"]),
    "deep_sleep": (["deep_sleep.cc"], ["-O0"]),
    "primes": (["primes.cc"], ["-O2"]),
    "livelock": (["livelock.cc"], ["-O2"]),
    "kernel_work": (["kernel_work.cc"], ["-O2"]),
}


def compiler() -> str | None:
    return shutil.which("g++")


def build_all(
    directory: Path, names: list[str] | None = None, parallel: int = 2
) -> dict[str, Path]:
    """Compile the programs into `directory`; name -> binary path."""
    gxx = compiler()
    if gxx is None:
        raise RuntimeError("g++ is not installed")
    wanted = names or list(PROGRAMS)
    binaries = {name: directory / name for name in wanted}
    queue = list(wanted)
    running: list[tuple[str, subprocess.Popen[bytes]]] = []
    failures = []
    while queue or running:
        while queue and len(running) < parallel:
            name = queue.pop(0)
            sources, flags = PROGRAMS[name]
            argv = [
                gxx,
                *flags,
                "-g",
                "-pthread",
                f"-I{FIXTURES}",
                *(str(FIXTURES / source) for source in sources),
                "-o",
                str(binaries[name]),
            ]
            running.append((name, subprocess.Popen(argv, stderr=subprocess.PIPE)))
        name, process = running.pop(0)
        _, stderr = process.communicate()
        if process.returncode != 0:
            failures.append(f"{name}: {stderr.decode(errors='replace')}")
    if failures:
        raise RuntimeError("compiling the fixtures failed:\n" + "\n".join(failures))
    return binaries


def ptrace_works() -> bool:
    """Whether gdb may attach to a child process here (ptrace allowed, gdb installed)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return False
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        done = subprocess.run(
            [gdb, "-batch", "-nx", "-p", str(sleeper.pid), "-ex", "info threads"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        said = done.stdout + done.stderr
        return "ptrace:" not in said and ("LWP" in said or f"process {sleeper.pid}" in said)
    finally:
        sleeper.kill()
        sleeper.wait()


def run_tool(*argv: str) -> None:
    """A build tool (objcopy, strip, g++) run to make a test binary; fails the test if it fails."""
    subprocess.run(list(argv), check=True, capture_output=True)
