"""What a build process is (nix, ninja, a compiler, nvcc, a linker, ...) and which file it works on.

Pure functions of a process's name (its `comm`, at most 15 characters) and its command line, so
they are tested without processes. The tool is found in this order: the script an interpreter
runs (nixpkgs' cc-wrapper `g++` is a bash script), the program of argv[0], then `comm`.
Compiler names come with target prefixes and version suffixes ("x86_64-unknown-linux-gnu-g++",
"g++-12", "clang++-17"): both are taken off before the lookup, and so is the "-real" of a
wrapped compiler's real binary ("g++-real"). A compiler cache or distributor in front of a
compiler (`ccache g++ -c a.cc`, sccache, distcc, icecc) is classified as what it runs. nvcc's
host compile reads a temporary `tmpxft_…_conv.cudafe1.cpp`: it is named after its `.cu`.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass


class ProcessKind(str, enum.Enum):
    """The kinds of process a build runs; the value is what the history stores."""

    NIX = "nix"
    DRIVER = "driver"
    """A build driver: ninja, make, cmake."""
    COMPILER = "compiler"
    """C/C++ compiler driver or its passes: gcc, g++, clang, cc1plus, as."""
    CUDA = "cuda"
    """The CUDA toolchain: nvcc, cicc, ptxas, fatbinary, nvlink, cudafe++."""
    LINKER = "linker"
    PYTHON = "python"
    OTHER = "other"


_TOOLS: dict[str, ProcessKind] = {
    **dict.fromkeys(
        ("nix", "nix-daemon", "nix-build", "nix-store", "nix-shell", "nix-instantiate"),
        ProcessKind.NIX,
    ),
    **dict.fromkeys(("ninja", "samu", "make", "gmake", "cmake", "ctest"), ProcessKind.DRIVER),
    **dict.fromkeys(
        (
            "cc1plus",
            "cc1",
            "cc1obj",
            "gcc",
            "g++",
            "cc",
            "c++",
            "cpp",
            "clang",
            "clang++",
            "clang-cl",
            "as",
            "ccache",
            "sccache",
        ),
        ProcessKind.COMPILER,
    ),
    **dict.fromkeys(
        ("nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "cudafe++", "nvptxcompiler", "nvdisasm"),
        ProcessKind.CUDA,
    ),
    **dict.fromkeys(
        (
            "ld",
            "ld.bfd",
            "ld.gold",
            "ld.lld",
            "lld",
            "mold",
            "ld.mold",
            "collect2",
            "ar",
            "ranlib",
            "lto1",
            "lto-wrapper",
        ),
        ProcessKind.LINKER,
    ),
}

_INTERPRETERS = frozenset(("sh", "bash", "dash", "zsh", "env", "perl"))
# Programs that run the compiler named by their first argument: they are what they wrap.
_COMPILER_WRAPPERS = frozenset(("ccache", "sccache", "distcc", "icecc", "buildcache"))
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?[dmu]?$")
_VERSION_SUFFIX = re.compile(r"-\d+(\.\d+)*$")

SOURCE_SUFFIXES = (
    ".cc",
    ".cpp",
    ".cxx",
    ".c++",
    ".C",
    ".c",
    ".cu",
    ".m",
    ".mm",
    ".s",
    ".S",
    ".sx",
    ".i",
    ".ii",
    ".cppm",
    ".ixx",
)
_SOURCE_SUFFIXES = frozenset(SOURCE_SUFFIXES)

# Options of gcc/clang/cc1plus/nvcc whose value is the next argument: that argument is not an
# input file even when it ends in ".cc" ("-dumpbase a.cc", "-MT a.cc.o").
_TAKES_VALUE = frozenset(
    (
        "-o",
        "-x",
        "-I",
        "-D",
        "-U",
        "-MF",
        "-MT",
        "-MQ",
        "-MD",
        "-MMD",
        "-include",
        "-imacros",
        "-isystem",
        "-iquote",
        "-idirafter",
        "-iprefix",
        "-iwithprefix",
        "-iwithprefixbefore",
        "-isysroot",
        "-imultilib",
        "-imultiarch",
        "-dumpbase",
        "-dumpbase-ext",
        "-dumpdir",
        "-auxbase",
        "-auxbase-strip",
        "--param",
        "-Xlinker",
        "-Xassembler",
        "-Xpreprocessor",
        "-Xclang",
        "-target",
        "-arch",
        "-main-file-name",
        "-aux-info",
        "-L",
        "-T",
        "-u",
        "-z",
        "-e",
        # nvcc
        "-ccbin",
        "--compiler-bindir",
        "-Xcompiler",
        "--compiler-options",
        "-Xptxas",
        "--ptxas-options",
        "-Xnvlink",
        "-Xfatbin",
        "-Xarchive",
        "-code",
        "-gencode",
        "--generate-code",
        "-t",
        "--threads",
        "-odir",
        "-std",
        "--std",
        "-maxrregcount",
        "--output-file",
        "--x",
    )
)

# nvcc's temporary files carry the source's base name: /tmp/tmpxft_00001b4e_00000000-6_conv.ptx
_NVCC_TEMP = re.compile(r"tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_([^/\s,\"'=]+)")
# With several architectures, a per-architecture temporary has it too: k.compute_120.cudafe1.cpp
_NVCC_TEMP_SUFFIX = re.compile(
    r"(?:\.(?:sm|compute)_\w+)?\.(?:sm_\w+\.cubin|compute_\w+\.\w+|cpp\d\.ii|cudafe\d\.[\w.]+|fatbin(?:\.c)?|module_id"
    r"|ptx|cubin|reg\.c|stub\.c|ii|c|gpu|o)$"
)
# CMake names objects after their source: CMakeFiles/t.dir/src/conv.cc.o
_OBJECT = re.compile(r"^(.*\.(?:cc|cpp|cxx|c\+\+|C|c|cu|S|s))\.(?:o|obj)$")


@dataclass(frozen=True, slots=True)
class Classification:
    """What a process is."""

    kind: ProcessKind
    tool: str
    """The program's plain name: "g++", "cc1plus", "nvcc", "ninja", "python3", ..."""
    file: str | None
    """Compilers: the source file; linkers: the output; python: the script; else None."""


def tool_name(program: str) -> str | None:
    """The known tool a program name stands for, without target prefix and version, else None."""
    base = os.path.basename(program)
    if base in _TOOLS:
        return base
    if base.endswith("-real") and len(base) > 5:
        # A wrapper's real binary: nixpkgs' and Debian's wrappers exec "g++-real" and friends.
        base = base[:-5]
        if base in _TOOLS:
            return base
    if _PYTHON.match(base):
        return base
    trimmed = _VERSION_SUFFIX.sub("", base)
    if trimmed in _TOOLS:
        return trimmed
    # "x86_64-unknown-linux-gnu-g++" -> "unknown-linux-gnu-g++" -> ... -> "g++"
    rest = trimmed
    while "-" in rest:
        rest = rest.split("-", 1)[1]
        if rest in _TOOLS:
            return rest
    return None


def classify(name: str, cmdline: Sequence[str]) -> Classification:
    """Kind, tool and file of a process from its `comm` name and its argv."""
    tool, index = _find_tool(name, cmdline)
    if tool is None:
        program = os.path.basename(cmdline[0]) if cmdline and cmdline[0] else name
        return Classification(ProcessKind.OTHER, program or name, None)
    args = list(cmdline[index + 1 :]) if index >= 0 else []
    if _PYTHON.match(tool):
        script = next((arg for arg in args if not arg.startswith("-")), None)
        return Classification(ProcessKind.PYTHON, tool, script)
    kind = _TOOLS[tool]
    if tool in _DRIVERS and _links(args):
        # "g++ -o libfoo.so a.o b.o": the compiler driver runs a link step.
        return Classification(ProcessKind.LINKER, tool, linked_file(tool, args))
    if kind is ProcessKind.COMPILER or kind is ProcessKind.CUDA:
        return Classification(kind, tool, compiled_file(tool, args))
    if kind is ProcessKind.LINKER:
        return Classification(kind, tool, linked_file(tool, args))
    return Classification(kind, tool, None)


def _find_tool(name: str, cmdline: Sequence[str]) -> tuple[str | None, int]:
    if cmdline:
        first = os.path.basename(cmdline[0])
        if first in _INTERPRETERS or _PYTHON.match(first):
            # "bash /nix/store/...-gcc-wrapper/bin/g++ -c a.cc": the script is the tool.
            for index in range(1, min(len(cmdline), 4)):
                arg = cmdline[index]
                if arg == "-c":
                    break  # "sh -c 'g++ ...'": a command string, not a script
                if arg.startswith("-"):
                    continue
                tool = tool_name(arg)
                if tool is not None and not _PYTHON.match(tool):
                    return tool, index
                break
            if _PYTHON.match(first):
                return first, 0
        if first in _COMPILER_WRAPPERS:
            # "ccache g++ -c a.cc": the compiler it runs is the tool (its file follows it).
            for index in range(1, min(len(cmdline), 3)):
                wrapped = tool_name(cmdline[index])
                if wrapped is not None:
                    return wrapped, index
                if not cmdline[index].startswith("-"):
                    break
        tool = tool_name(cmdline[0])
        if tool is not None:
            return tool, 0
    tool = tool_name(name) if name else None
    # Without a usable argv (a zombie, or a process we may not read) the name is all there is.
    return tool, (0 if cmdline else -1)


_DRIVERS = frozenset(("gcc", "g++", "cc", "c++", "clang", "clang++", "nvcc"))
_STOP_BEFORE_LINK = frozenset(
    (
        "-c",
        "-S",
        "-E",
        "-M",
        "-MM",
        "-fsyntax-only",
        "--compile",
        "-cubin",
        "-ptx",
        "-fatbin",
        "--preprocess",
        "-dc",
        "-dw",
        "--version",
        "-v",
    )
)


def _links(args: Sequence[str]) -> bool:
    """Whether a compiler driver's argv links (no -c/-S/-E and no source file among inputs)."""
    if not args or any(arg in _STOP_BEFORE_LINK for arg in args):
        return False
    return not any(_is_source(path) for path in _inputs(args))


def _unquote(arg: str) -> str:
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "\"'":
        return arg[1:-1]
    return arg


def _option_value(args: Sequence[str], *names: str) -> str | None:
    for index, arg in enumerate(args):
        for option in names:
            if arg == option and index + 1 < len(args):
                return _unquote(args[index + 1])
            if arg.startswith(option + "="):
                return _unquote(arg[len(option) + 1 :])
    return None


def _inputs(args: Sequence[str]) -> list[str]:
    """Arguments that are input files: not options and not the values of options."""
    inputs: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            # "-MD" is a flag for the gcc driver but takes a file in cc1plus: an option that
            # follows is not a value.
            if not arg.startswith("-") or arg == "-":
                continue
        if arg.startswith("-") and arg != "-":
            skip = arg in _TAKES_VALUE
            continue
        inputs.append(_unquote(arg))
    return inputs


def _is_source(path: str) -> bool:
    dot = path.rfind(".")
    return dot > 0 and path[dot:] in _SOURCE_SUFFIXES


def _from_nvcc_temp(args: Sequence[str]) -> str | None:
    for arg in args:
        found = _NVCC_TEMP.search(arg)
        if found is not None:
            base = _NVCC_TEMP_SUFFIX.sub("", found.group(1))
            # nvcc names its temporaries after the .cu it compiles; the directory is lost.
            return base + ".cu" if base and not base.startswith("dlink") else None
    return None


def _from_object(args: Sequence[str]) -> str | None:
    output = _option_value(args, "-o", "--output-file")
    if output is None:
        return None
    found = _OBJECT.match(output)
    return found.group(1) if found else None


def compiled_file(tool: str, args: Sequence[str]) -> str | None:
    """The source file a compiler-like process works on, as precisely as its argv tells."""
    if tool in ("cicc", "cudafe++"):
        # nvcc passes the real source name along to its passes.
        named = _option_value(args, "--orig_src_path_name", "--orig_src_file_name")
        if named:
            return named
        return _from_nvcc_temp(args)
    if tool in ("ptxas", "fatbinary", "nvlink", "nvdisasm"):
        return _from_nvcc_temp(args)
    if tool == "as":
        # The assembler reads a temporary .s; the object it writes is named after the source.
        return _from_object(args)
    inputs = _inputs(args)
    sources = [path for path in inputs if _is_source(path)]
    if sources:
        # nvcc's host compile: cc1plus/g++ on its tmpxft_..._conv.cudafe1.cpp, named as the .cu
        return _from_nvcc_temp(sources[-1:]) or sources[-1]
    temp = _from_nvcc_temp(args)
    if temp is not None:
        return temp
    return _from_object(args)


def linked_file(tool: str, args: Sequence[str]) -> str | None:
    """The file a linker or archiver writes."""
    output = _option_value(args, "-o", "--output")
    if output is not None:
        return output
    if tool in ("ar", "ranlib"):
        # "ar qc libfoo.a a.o b.o": the archive follows the operation letters.
        operands = [arg for arg in args if not arg.startswith("-")]
        if tool == "ar" and len(operands) >= 2:
            return operands[1]
        if tool == "ranlib" and operands:
            return operands[0]
    return None


def is_compile_kind(kind: ProcessKind) -> bool:
    """Whether processes of this kind make up a compile job (C/C++ or CUDA)."""
    return kind is ProcessKind.COMPILER or kind is ProcessKind.CUDA
