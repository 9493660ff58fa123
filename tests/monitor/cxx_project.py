"""A small generated C++ project for tests that drive real cmake, ninja, make and g++.

Twelve translation units: most are light, a few instantiate deep template chains so that their
cc1plus runs long enough (a second or more) to be seen by a sampler. Shared by the progress and
monitor tests; every process a test starts runs in its own session and is killed on the way out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

LIGHT = """#include <numeric>
#include <string>
#include <vector>

int light_{n}(int x) {{
    std::vector<int> values(static_cast<std::size_t>(x) + {n});
    std::iota(values.begin(), values.end(), 0);
    int digits = static_cast<int>(std::to_string(x).size());
    return std::accumulate(values.begin(), values.end(), 0) + digits;
}}
"""

HEAVY = """#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace heavy_ns_{n} {{
template <int N>
struct Chain {{
    static long run(long x) {{
        std::map<std::string, std::vector<long>> table;
        table[std::to_string(N)].push_back(x * N);
        std::vector<long> values(table.size() + N % 7, x);
        std::sort(values.begin(), values.end());
        return Chain<N - 1>::run(x + static_cast<long>(values.size()) + values.front());
    }}
}};
template <>
struct Chain<0> {{
    static long run(long x) {{ return x; }}
}};
}}  // namespace heavy_ns_{n}

long heavy_{n}(long x) {{ return heavy_ns_{n}::Chain<{depth}>::run(x); }}
"""

CMAKE = """cmake_minimum_required(VERSION 3.16)
project(fixture CXX)
set(CMAKE_CXX_STANDARD 17)
add_library(fixture STATIC {sources})
add_executable(fixture_main main.cc)
target_link_libraries(fixture_main fixture)
"""


def write_project(
    directory: Path, units: int = 12, heavy: Sequence[int] = (0, 5, 10), depth: int = 20
) -> list[str]:
    """Write the project into `directory`; returns the names of its translation units."""
    directory.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    declarations: list[str] = []
    calls: list[str] = []
    for n in range(units):
        if n in heavy:
            name = f"heavy_{n}.cc"
            (directory / name).write_text(HEAVY.format(n=n, depth=depth))
            declarations.append(f"long heavy_{n}(long x);")
            calls.append(f"total += heavy_{n}(argc);")
        else:
            name = f"light_{n}.cc"
            (directory / name).write_text(LIGHT.format(n=n))
            declarations.append(f"int light_{n}(int x);")
            calls.append(f"total += light_{n}(argc);")
        names.append(name)
    main = "\n".join(
        [
            *declarations,
            "int main(int argc, char**) {",
            "    long total = 0;",
            *("    " + call for call in calls),
            "    return total == 42 ? 1 : 0;",
            "}",
        ]
    )
    (directory / "main.cc").write_text(main + "\n")
    (directory / "CMakeLists.txt").write_text(CMAKE.format(sources=" ".join(names)))
    return names


def configure(
    source: Path, build: Path, generator: str, build_type: str = "Release", cxx: str = "g++"
) -> None:
    """Run cmake's configure step (fails the test with cmake's output if it fails).

    `build_type` "" leaves CMAKE_BUILD_TYPE unset: no optimisation, the quickest compiles.
    `cxx` is the compiler driver the build runs (CMake's default would be /usr/bin/c++).
    """
    argv = ["cmake", "-S", str(source), "-B", str(build), "-G", generator]
    argv.append(f"-DCMAKE_CXX_COMPILER={cxx}")
    if build_type:
        argv.append(f"-DCMAKE_BUILD_TYPE={build_type}")
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@contextlib.contextmanager
def started(argv: Sequence[str], **kwargs: object) -> Iterator[subprocess.Popen[str]]:
    """Start a process in its own session; on the way out kill its whole group, always."""
    process = subprocess.Popen(list(argv), start_new_session=True, **kwargs)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        kill_group(process)


def kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the process group a `started` process leads, and reap the leader."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.wait(timeout=10)


def wait_rusage(process: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, float]:
    """Wait for a child with wait4(); (exit code, user + system CPU of it and its reaped tree)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid == process.pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            raise TimeoutError(f"{process.args} still running after {timeout} s")
        time.sleep(0.02)
