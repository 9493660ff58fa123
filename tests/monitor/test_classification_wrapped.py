"""Classification of wrapped compilers and of nvcc's host compile (issue 16, item 5)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from needed_tools import needs

from workbench.monitor.classification import ProcessKind, classify

# What nvcc 12.x runs for its host compile (`nvcc -v` prints these lines): the host compiler
# reads cudafe++'s output, a temporary named after the .cu.
NVCC_HOST_CC1PLUS = (
    "/nix/store/abc-gcc-13.3.0/libexec/gcc/x86_64-unknown-linux-gnu/13.3.0/cc1plus -quiet "
    "-D__CUDA_ARCH_LIST__=900 -D__NVCC__ "
    "/tmp/tmpxft_00003f2a_00000000-6_flash_fwd_hdim128.cudafe1.cpp "
    "-quiet -dumpbase tmpxft_00003f2a_00000000-6_flash_fwd_hdim128.cudafe1.cpp -O3 -o /tmp/ccX.s"
)
NVCC_HOST_GXX = (
    "g++ -D__CUDA_ARCH__=900 -c -x c++ -O3 -m64 "
    '"/tmp/tmpxft_00003f2a_00000000-6_flash_fwd_hdim128.cudafe1.cpp" '
    '-o "/tmp/tmpxft_00003f2a_00000000-11_flash_fwd_hdim128.o"'
)


@pytest.mark.parametrize(
    ("comm", "argv", "kind", "tool", "file"),
    [
        ("cc1plus", NVCC_HOST_CC1PLUS, ProcessKind.COMPILER, "cc1plus", "flash_fwd_hdim128.cu"),
        ("g++", NVCC_HOST_GXX, ProcessKind.COMPILER, "g++", "flash_fwd_hdim128.cu"),
        (
            "g++-real",
            "/usr/bin/g++-real -c src/a.cc -o a.o",
            ProcessKind.COMPILER,
            "g++",
            "src/a.cc",
        ),
        (
            "x86_64-unknown-",
            "x86_64-unknown-linux-gnu-g++-real -c b.cpp -o b.o",
            ProcessKind.COMPILER,
            "g++",
            "b.cpp",
        ),
        ("ccache", "ccache g++ -c src/c.cc -o c.o", ProcessKind.COMPILER, "g++", "src/c.cc"),
        (
            "sccache",
            "/usr/bin/sccache clang++ -c d.cc -o d.o",
            ProcessKind.COMPILER,
            "clang++",
            "d.cc",
        ),
        ("distcc", "distcc x86_64-linux-gnu-gcc -c e.c -o e.o", ProcessKind.COMPILER, "gcc", "e.c"),
        ("icecc", "icecc g++-12 -c f.cc", ProcessKind.COMPILER, "g++", "f.cc"),
        ("ccache", "ccache nvcc -c k.cu -o k.o", ProcessKind.CUDA, "nvcc", "k.cu"),
        ("ccache", "ccache g++ -o app a.o b.o", ProcessKind.LINKER, "g++", "app"),
        ("ld-real", "ld-real -o libx.so a.o", ProcessKind.LINKER, "ld", "libx.so"),
        ("distcc", "distcc --help", ProcessKind.OTHER, "distcc", None),
        # A real source whose name merely ends like nvcc's temporaries is left alone.
        ("g++", "g++ -c cudafe1.cpp", ProcessKind.COMPILER, "g++", "cudafe1.cpp"),
    ],
)
def test_wrapped_and_nvcc_host_compiles(
    comm: str, argv: str, kind: ProcessKind, tool: str, file: str | None
) -> None:
    import shlex

    found = classify(comm, shlex.split(argv))
    assert (found.kind, found.tool, found.file) == (kind, tool, file)


@needs("g++")
def test_a_real_wrapper_script_and_real_binary(tmp_path: Path) -> None:
    """A wrapper `g++` script that execs `g++-real` (as Debian's and nixpkgs' wrappers do): the
    running compiler driver, read from /proc, is classified as g++ compiling the source."""
    real = tmp_path / "g++-real"
    real.symlink_to(shutil.which("g++"))
    source = tmp_path / "slow.cc"
    source.write_text(
        "template <int N> struct F { static constexpr long v = F<N - 1>::v + N; };\n"
        "template <> struct F<0> { static constexpr long v = 0; };\n"
        "long x = F<3000>::v;\n"
    )
    process = subprocess.Popen(
        [str(real), "-ftemplate-depth=5000", "-c", str(source), "-o", str(tmp_path / "slow.o")],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        argv: list[str] = []
        while time.monotonic() < deadline and not argv:
            try:
                with open(f"/proc/{process.pid}/cmdline", "rb") as handle:
                    argv = [a.decode() for a in handle.read().split(b"\0") if a]
            except OSError:
                break
        with open(f"/proc/{process.pid}/comm") as handle:
            comm = handle.read().strip()
        found = classify(comm, argv)
        assert (found.kind, found.tool, found.file) == (
            ProcessKind.COMPILER,
            "g++",
            str(source),
        )
    finally:
        process.wait(timeout=60)
    assert os.path.exists(tmp_path / "slow.o")
