"""The environment a Rust or C++ program sets to link a built flavour (the ort crate's names).

Static and hybrid cores link from ORT_LIB_LOCATION; a shared build is loaded from
ORT_DYLIB_PATH; CUDA flavours need cuDNN (copied into lib/cudnn) on LD_LIBRARY_PATH at run time.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from workbench.configs.matrix import Flavour


def consumer_environment(output: Path, flavour: Flavour) -> dict[str, str]:
    """Variable -> value for a consumer of `output`, the built flavour."""
    lib = output.resolve() / "lib"
    env: dict[str, str] = {}
    if flavour.linkage == "shared":
        env["ORT_DYLIB_PATH"] = str(lib / "libonnxruntime.so")
    else:
        env["ORT_LIB_LOCATION"] = str(lib)
    if (lib / "pkgconfig").is_dir():
        env["PKG_CONFIG_PATH"] = str(lib / "pkgconfig")
    if flavour.cuda:
        env["LD_LIBRARY_PATH"] = str(lib / "cudnn")
    return env


def as_shell(env: dict[str, str], keep_existing: tuple[str, ...] = ("LD_LIBRARY_PATH",)) -> str:
    """`export NAME=VALUE` lines for `eval "$(workbench env FLAVOUR)"`, path lists prepended."""
    lines = []
    for name, value in env.items():
        quoted = shlex.quote(value)
        if name in keep_existing or name == "PKG_CONFIG_PATH":
            lines.append(f'export {name}={quoted}"${{{name}:+:${name}}}"')
        else:
            lines.append(f"export {name}={quoted}")
    return "\n".join(lines)
