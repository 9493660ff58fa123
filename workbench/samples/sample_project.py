"""The bundled sample project: a small generated C++ project to see builds working at once.

A newcomer on a host without Nix or a GPU builds it through the `run` backend and sees the
build screen, graphs and history fill in within seconds; the tests build the same project.
Most translation units are light; a few instantiate deep template chains so their cc1plus runs
long enough (a second or more) to be seen by the sampler.

    python -m workbench.samples.sample_project build DIR [--jobs N]   # write, configure, build
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
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
struct Value {{
    long v;
    bool operator<(const Value& other) const {{ return v < other.v; }}
}};
template <int N>
struct Chain {{
    static long run(long x) {{
        std::map<std::string, std::vector<Value<N>>> table;
        table[std::to_string(N)].push_back(Value<N>{{x * N}});
        std::vector<Value<N>> values(table.size() + N % 7, Value<N>{{x}});
        std::sort(values.begin(), values.end());
        return Chain<N - 1>::run(x + static_cast<long>(values.size()) + values.front().v);
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

NAME = "sample-project"


def write_project(
    directory: Path, units: int = 12, heavy: Sequence[int] = (0, 5, 10), depth: int = 6
) -> list[str]:
    """Write the project into `directory`; returns the names of its translation units."""
    directory.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    declarations: list[str] = []
    calls: list[str] = []
    for n in range(units):
        kind = "heavy" if n in heavy else "light"
        template = HEAVY if n in heavy else LIGHT
        (directory / f"{kind}_{n}.cc").write_text(template.format(n=n, depth=depth))
        declarations.append(
            f"{'long' if n in heavy else 'int'} {kind}_{n}({'long' if n in heavy else 'int'} x);"
        )
        calls.append(f"total += {kind}_{n}(argc);")
        names.append(f"{kind}_{n}.cc")
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


def build_argv(directory: Path, jobs: int | None = None, clean: bool = False) -> list[str]:
    """The one command that writes, configures and builds the project (for `workbench run`);
    `clean`: from clean (`ninja -t clean` first), so a second build builds everything again."""
    argv = [sys.executable, "-m", "workbench.samples.sample_project", "build", str(directory)]
    if jobs:
        argv += ["--jobs", str(jobs)]
    return [*argv, "--clean"] if clean else argv


def is_built(directory: Path) -> bool:
    """Whether the sample in `directory` was built before (a build now may have nothing to do)."""
    return (directory / "build" / ".ninja_log").exists()


def configure_argv(source: Path, output: Path) -> list[str]:
    """CMake's configure step for a generated project: Ninja files, g++ (the build's default)."""
    return [
        "cmake",
        "-S",
        str(source),
        "-B",
        str(output),
        "-G",
        "Ninja",
        "-DCMAKE_CXX_COMPILER=g++",
    ]


def missing_tools() -> list[str]:
    """Tools the sample build needs that this host lacks."""
    return [tool for tool in ("cmake", "ninja", "g++") if shutil.which(tool) is None]


def build(directory: Path, jobs: int | None, clean: bool = False) -> int:
    """Write the sources if absent, configure once (Ninja, no optimisation), run ninja."""
    missing = missing_tools()
    if missing:
        print(
            f"sample project: missing {', '.join(missing)} (Debian: apt install cmake "
            "ninja-build g++)",
            file=sys.stderr,
        )
        return 2
    source, output = directory / "src", directory / "build"
    if not (source / "CMakeLists.txt").exists():
        write_project(source)
    if not (output / "build.ninja").exists():
        result = subprocess.run(configure_argv(source, output), check=False)
        if result.returncode != 0:
            return result.returncode
    if clean:
        subprocess.run(["ninja", "-C", str(output), "-t", "clean"], check=False)
    ninja = ["ninja", "-C", str(output), *(["-j", str(jobs)] if jobs else [])]
    sys.stdout.flush()
    os.execvp(ninja[0], ninja)  # the build's process is ninja itself from here on
    return 0  # pragma: no cover - execvp does not return


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.samples.sample_project")
    actions = parser.add_subparsers(dest="action", required=True)
    build_parser = actions.add_parser("build", help="write, configure and build the project")
    build_parser.add_argument("directory", type=Path)
    build_parser.add_argument("--jobs", type=int)
    build_parser.add_argument("--clean", action="store_true", help="ninja -t clean first")
    args = parser.parse_args(argv)
    return build(args.directory, args.jobs, args.clean)


if __name__ == "__main__":
    sys.exit(main())
