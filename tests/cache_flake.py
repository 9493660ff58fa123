"""A stand-in flake of two derivations for the plan, push and binary-cache tests.

`onnxruntime-cpu` (named standin-cache-top) writes its dependency's store path into its output,
so the dependency (standin-cache-dep, 300000 random bytes: xz cannot shrink it, so its download
size is known in advance) is in its runtime closure, as ORT's libraries are in a real one. Each
has its own nonce file: a new nonce gives a new derivation of one without touching the other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from nix_testing import NIX_CONFIG

REPO = Path(__file__).resolve().parent.parent
TOP = "standin-cache-top"
DEP = "standin-cache-dep"
DEP_BYTES = 300000

FLAKE = """{{
  outputs = {{ self }}: let
    dep = derivation {{
      name = "{dep}"; system = "{system}"; builder = "/bin/sh";
      args = [ "-c" "/usr/bin/head -c {dep_bytes} /dev/urandom > $out" ];
      nonce = builtins.readFile ./dep-nonce;
    }};
  in {{
    packages.{system}.onnxruntime-cpu = derivation {{
      name = "{top}"; system = "{system}"; builder = "/bin/sh";
      args = [ "-c" "echo ${{dep}} > $out" ];
      nonce = builtins.readFile ./nonce;
    }};
  }};
}}
"""


def make_cache_flake(directory: Path, system: str) -> Path:
    """The flake in `directory`, with configs/ beside it (so `-C` and the TUI read it)."""
    directory.mkdir(parents=True)
    (directory / "flake.nix").write_text(
        FLAKE.format(dep=DEP, top=TOP, system=system, dep_bytes=DEP_BYTES)
    )
    shutil.copytree(REPO / "configs", directory / "configs")
    (directory / "patches").mkdir()
    renew(directory, "dep-nonce")
    renew(directory)
    return directory


def renew(flake: Path, name: str = "nonce") -> None:
    """A new derivation of the top (or, with "dep-nonce", of the dependency too)."""
    (flake / name).write_text(uuid.uuid4().hex)


def nix(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run nix (flakes on) to its end; its stdout, or an AssertionError with its stderr."""
    done = subprocess.run(
        ["nix", "--extra-experimental-features", "nix-command flakes", *args],
        capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
        env=env or {**os.environ, "NIX_CONFIG": NIX_CONFIG},
    )  # fmt: skip
    assert done.returncode == 0, f"nix {args}: {done.stderr[-2000:]}"
    return done.stdout


def with_substituter(cache: str) -> str:
    """NIX_CONFIG whose one substituter is `cache` (unsigned paths accepted: a test cache)."""
    return NIX_CONFIG.replace("substituters =", f"substituters = {cache}") + (
        "\nrequire-sigs = false"
    )
