"""Process kinds and files from argv: recorded shapes, and the argv this machine's g++ runs."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.monitor import ProcessKind, classify
from workbench.monitor.classification import tool_name
from workbench.monitor.procfs import parse_stat

K = ProcessKind

# (comm, argv, kind, tool, file). The nvcc-family lines follow nvcc's `--dryrun` output.
CASES = [
    (
        "cc1plus",
        (
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet -I inc -imultiarch "
            "x86_64-linux-gnu -D X=1 /src/conv.cc -quiet -dumpdir CMakeFiles/x.dir/ -dumpbase "
            "conv.cc.cc -dumpbase-ext .cc -O2 -o /tmp/ccCCoR7Q.s"
        ),
        K.COMPILER,
        "cc1plus",
        "/src/conv.cc",
    ),
    (
        "cc1plus",
        "cc1plus -quiet -MD a.d -MF a.d -MT x a.cc -dumpbase a.cc -o /tmp/cc.s",
        K.COMPILER,
        "cc1plus",
        "a.cc",
    ),
    ("cc1", "cc1 -quiet x.c -o -", K.COMPILER, "cc1", "x.c"),
    (
        "g++",
        (
            "/usr/bin/g++ -O2 -MD -MT CMakeFiles/x.dir/a.cc.o -MF CMakeFiles/x.dir/a.cc.o.d -o "
            "CMakeFiles/x.dir/a.cc.o -c /src/a.cc"
        ),
        K.COMPILER,
        "g++",
        "/src/a.cc",
    ),
    (
        "c++",
        "/usr/bin/c++ -O3 -DNDEBUG -o CMakeFiles/f.dir/b.cc.o -c /src/b.cc",
        K.COMPILER,
        "c++",
        "/src/b.cc",
    ),
    (
        "g++",
        "bash /nix/store/abc-gcc-wrapper-12/bin/g++ -c /build/src/conv.cc -o conv.o",
        K.COMPILER,
        "g++",
        "/build/src/conv.cc",
    ),
    (
        "x86_64-unknown-",
        "/nix/store/x-gcc/bin/x86_64-unknown-linux-gnu-g++ -c foo.cpp",
        K.COMPILER,
        "g++",
        "foo.cpp",
    ),
    ("g++-12", "g++-12 -c x.cc", K.COMPILER, "g++", "x.cc"),
    ("clang++", "/usr/bin/clang++-17 -c -o a.o a.cxx", K.COMPILER, "clang++", "a.cxx"),
    (
        "as",
        "as --64 -o CMakeFiles/x.dir/src/a.cc.o /tmp/ccX.s",
        K.COMPILER,
        "as",
        "CMakeFiles/x.dir/src/a.cc",
    ),
    # A compiler cache is classified as the compiler it runs.
    ("ccache", "ccache /usr/bin/g++ -c a.cc -o a.o", K.COMPILER, "g++", "a.cc"),
    (
        "nvcc",
        (
            "/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DX -O3 "
            "--generate-code=arch=compute_90,code=[compute_90,sm_90] -Xcompiler=-fPIC -x cu -c "
            "/src/flash/fwd.cu -o CMakeFiles/x.dir/fwd.cu.o"
        ),
        K.CUDA,
        "nvcc",
        "/src/flash/fwd.cu",
    ),
    (
        "nvcc",
        "nvcc -ccbin /usr/bin/g++ -t 4 -c attention.cu -o attention.cu.o",
        K.CUDA,
        "nvcc",
        "attention.cu",
    ),
    (
        "cicc",
        (
            'cicc --c++17 --gnu_version=120200 --orig_src_file_name "/src/flash/fwd.cu" '
            '--orig_src_path_name "/src/flash/fwd.cu" -arch compute_90 '
            "/tmp/tmpxft_00001b4e_00000000-7_fwd.cpp1.ii -o "
            "/tmp/tmpxft_00001b4e_00000000-6_fwd.ptx"
        ),
        K.CUDA,
        "cicc",
        "/src/flash/fwd.cu",
    ),
    (
        "cudafe++",
        (
            "cudafe++ --c++17 --orig_src_file_name /src/a.cu --gen_c_file_name "
            "/tmp/tmpxft_1_0-6_a.cudafe1.cpp"
        ),
        K.CUDA,
        "cudafe++",
        "/src/a.cu",
    ),
    (
        "ptxas",
        (
            "ptxas -arch=sm_90 -m64 /tmp/tmpxft_00001b4e_00000000-6_fwd.ptx -o "
            "/tmp/tmpxft_00001b4e_00000000-8_fwd.sm_90.cubin"
        ),
        K.CUDA,
        "ptxas",
        "fwd.cu",
    ),
    (
        "fatbinary",
        (
            "fatbinary -64 --cicc-cmdline=-ftz=0 "
            "--image3=kind=elf,sm=90,file=/tmp/tmpxft_00001b4e_00000000-8_fwd.sm_90.cubin "
            "--embedded-fatbin=/tmp/tmpxft_00001b4e_00000000-3_fwd.fatbin.c"
        ),
        K.CUDA,
        "fatbinary",
        "fwd.cu",
    ),
    (
        "nvlink",
        "nvlink --arch=sm_90 -m64 a.o b.o -o /tmp/tmpxft_00001b4e_00000000-9_dlink.sm_90.cubin",
        K.CUDA,
        "nvlink",
        None,
    ),
    ("nvcc", "nvcc -dlink a.o b.o -o cmake_device_link.o", K.LINKER, "nvcc", "cmake_device_link.o"),
    (
        "ld",
        "/usr/bin/ld -plugin x -o libonnxruntime.so a.o b.o",
        K.LINKER,
        "ld",
        "libonnxruntime.so",
    ),
    ("ld.gold", "ld.gold -o out a.o", K.LINKER, "ld.gold", "out"),
    ("mold", "mold -run -o prog a.o", K.LINKER, "mold", "prog"),
    (
        "collect2",
        "/usr/lib/gcc/x86_64-linux-gnu/12/collect2 -plugin x -o libonnxruntime.so a.o",
        K.LINKER,
        "collect2",
        "libonnxruntime.so",
    ),
    ("ar", "/usr/bin/ar qc libfoo.a a.o b.o", K.LINKER, "ar", "libfoo.a"),
    (
        "g++",
        "/usr/bin/g++ -O2 -rdynamic CMakeFiles/m.dir/main.cc.o -o fixture_main libfixture.a",
        K.LINKER,
        "g++",
        "fixture_main",
    ),
    ("ninja", "ninja -C build -j4", K.DRIVER, "ninja", None),
    ("make", "make -j8", K.DRIVER, "make", None),
    ("cmake", "/usr/bin/cmake -E cmake_depends", K.DRIVER, "cmake", None),
    ("nix-daemon", "nix-daemon --daemon", K.NIX, "nix-daemon", None),
    ("nix", "nix build .#onnxruntime -L --log-format internal-json", K.NIX, "nix", None),
    ("nix-build", "nix-build default.nix", K.NIX, "nix-build", None),
    (
        "python3",
        "/usr/bin/python3 tools/ci_build/build.py --parallel",
        K.PYTHON,
        "python3",
        "tools/ci_build/build.py",
    ),
    ("python3.11", "python3.11 -u -m pytest", K.PYTHON, "python3.11", "pytest"),
    ("sh", "/bin/sh -c 'g++ -c a.cc'", K.OTHER, "sh", None),
    ("bash", "bash -e /nix/store/x-default-builder.sh", K.OTHER, "bash", None),
    ("sleep", "sleep 100", K.OTHER, "sleep", None),
    ("cc1plus", "", K.COMPILER, "cc1plus", None),  # a zombie: no argv, the name is all there is
]


@pytest.mark.parametrize(("comm", "argv", "kind", "tool", "file"), CASES)
def test_classify(comm: str, argv: str, kind: ProcessKind, tool: str, file: str | None) -> None:
    what = classify(comm, shlex.split(argv))
    assert (what.kind, what.tool, what.file) == (kind, tool, file)


def test_the_real_gcc_pipeline(tmp_path: Path) -> None:
    """`g++ -###` prints the exact argv of cc1plus, as and collect2 on this machine."""
    source = tmp_path / "widget.cc"
    source.write_text("int main() { return 0; }\n")
    result = subprocess.run(
        [
            "g++",
            "-###",
            "-O2",
            "-MD",
            "-MT",
            "w.o",
            "-MF",
            "w.d",
            "-o",
            "CMakeFiles/t.dir/widget.cc.o",
            "-c",
            str(source),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    commands = [shlex.split(line) for line in result.stderr.splitlines() if line.startswith(" ")]
    by_tool = {
        classify(argv[0].rpartition("/")[2], argv).tool: classify("", argv) for argv in commands
    }
    assert by_tool["cc1plus"].file == str(source)
    assert by_tool["cc1plus"].kind is K.COMPILER
    assert by_tool["as"].file == "CMakeFiles/t.dir/widget.cc"
    link = subprocess.run(
        ["g++", "-###", "-o", "prog", "a.o", "b.o"], capture_output=True, text=True, check=True
    ).stderr
    collect = next(shlex.split(line) for line in link.splitlines() if "collect2" in line)
    what = classify("collect2", collect)
    assert (what.kind, what.file) == (K.LINKER, "prog")


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("x86_64-linux-gnu-gcc-12", "gcc"),
        ("aarch64-unknown-linux-gnu-ld.gold", "ld.gold"),
        ("gcc-ar-12", "ar"),
        ("clang-tidy", None),
        ("python3.12", "python3.12"),
        ("", None),
    ],
)
def test_tool_name(name: str, tool: str | None) -> None:
    assert tool_name(name) == tool


def test_parse_stat_with_an_awkward_name() -> None:
    data = (
        b"42 (a) (b c) S 1 42 42 0 -1 4194304 76 0 0 0 7 3 11 13 20 0 2 0 5755 2990080 413 "
        b"18446744073709551615 0"
    )
    stat = parse_stat(data)
    assert stat is not None
    assert stat.comm == "a) (b c"
    assert (stat.state, stat.ppid, stat.utime, stat.stime, stat.cutime, stat.cstime) == (
        "S",
        1,
        7,
        3,
        11,
        13,
    )
    assert (stat.threads, stat.starttime, stat.rss_pages) == (2, 5755, 413)
    assert parse_stat(b"garbage") is None
    assert parse_stat(b"1 (x) S 1 2") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.lists(st.text(max_size=30), max_size=12))
def test_classify_never_crashes(comm: str, argv: list[str]) -> None:
    what = classify(comm, argv)
    assert isinstance(what.kind, ProcessKind)
    assert what.file is None or isinstance(what.file, str)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_parse_stat_never_crashes(data: bytes) -> None:
    parse_stat(data)
