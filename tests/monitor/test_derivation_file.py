"""Reading what a `.drv` builds: real derivations made by Debian's nix-instantiate, and the
ATerm forms Nix writes that this machine's Nix does not (fixed outputs, floating content
addressed ones, dynamic derivations' versioned header)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from nix_testing import needs_nix, nix_env

from workbench.monitor.derivation_file import (
    derivation_name,
    parse_outputs,
    read_outputs,
    scratch_path,
)

# Two outputs, and an argument full of what ATerm escapes (quotes, backslashes, newline, tab).
EXPRESSION = r"""{ salt }:
derivation {
  name = "wb-drv-reader";
  system = builtins.currentSystem;
  builder = "/bin/sh";
  args = [ "-c" "echo \"q\\ \n\t\" > $out; echo > $dev" ];
  outputs = [ "out" "dev" ];
  inherit salt;
}
"""


@needs_nix[0]
@needs_nix[1]
@pytest.mark.skipif(os.geteuid() != 0, reason="nix-instantiate writes /nix/store: root here")
def test_the_outputs_of_a_real_derivation_are_those_nix_says(tmp_path: Path) -> None:
    expression = tmp_path / "reader.nix"
    expression.write_text(EXPRESSION)
    env = nix_env(tmp_path)
    env.pop("NIX_REMOTE", None)
    argv = ["nix-instantiate", str(expression), "--argstr", "salt", uuid.uuid4().hex]
    made = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    drv = made.stdout.strip()
    assert drv.startswith("/nix/store/") and drv.endswith("-wb-drv-reader.drv")
    asked = subprocess.run(
        ["nix-store", "--query", "--outputs", drv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    outputs = read_outputs(drv)
    assert outputs is not None
    assert set(outputs) == {"out", "dev"}
    assert sorted(outputs.values()) == sorted(asked.stdout.split())
    assert outputs["out"].endswith("-wb-drv-reader")
    assert outputs["dev"].endswith("-wb-drv-reader-dev")
    assert derivation_name(drv) == "wb-drv-reader"


# The builder says the store path it writes (`out`), on stderr.
SAYS_OUT = """{ salt }:
derivation {
  name = "wb-drv-scratch";
  system = builtins.currentSystem;
  builder = "/bin/sh";
  args = [ "-c" "echo out=$out >&2; echo $salt > $out" ];
  inherit salt;
}
"""


@needs_nix[0]
@needs_nix[1]
@pytest.mark.skipif(os.geteuid() != 0, reason="single-user Nix writes /nix/store: root here")
def test_a_build_again_beside_the_output_writes_where_scratch_path_says(tmp_path: Path) -> None:
    """`nix-build --check` of a built derivation (no sandbox: Debian's Nix): its builder's `out`
    is Nix's fallback path for the output, which `scratch_path` computes."""
    expression = tmp_path / "scratch.nix"
    expression.write_text(SAYS_OUT)
    env = nix_env(tmp_path)
    env.pop("NIX_REMOTE", None)
    drv = _nix(["nix-instantiate", str(expression), "--argstr", "salt", uuid.uuid4().hex], env)
    out = _nix(["nix-store", "--query", "--outputs", drv], env)
    said = []
    for again in ([], ["--check"]):
        built = subprocess.run(
            ["nix-build", drv, "--no-out-link", *again],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert built.returncode == 0, built.stderr
        said += [line[4:] for line in built.stderr.splitlines() if line.startswith("out=")]
    assert said == [out, scratch_path(drv, out)]
    assert scratch_path(drv, out) != out and scratch_path(drv, out).endswith("-wb-drv-scratch")


def _nix(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_fixed_floating_and_versioned_outputs() -> None:
    fixed = (
        'Derive([("out","/nix/store/1s3ihxk6sqw8w8hpr7gk3q8sl8jb6c4p-src.tar.gz","sha256",'
        '"0a1b"),("doc","/nix/store/7fdh0gdh0qkzv8vv6wz5pqn1q2qg3bf6-src.tar.gz-doc","r:sha256",'
        '"ff")],[],[],"x86_64-linux","builtin:fetchurl",[],[("name","src.tar.gz")])'
    )
    assert parse_outputs(fixed) == {
        "out": "/nix/store/1s3ihxk6sqw8w8hpr7gk3q8sl8jb6c4p-src.tar.gz",
        "doc": "/nix/store/7fdh0gdh0qkzv8vv6wz5pqn1q2qg3bf6-src.tar.gz-doc",
    }
    # A floating content-addressed output: its path is known only once built.
    floating = 'Derive([("out","","r:sha256","")],[],[],"x86_64-linux","/bin/sh",[],[])'
    assert parse_outputs(floating) == {"out": ""}
    versioned = (
        'DrvWithVersion("xp-dyn-drv",[("out","/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x",'
        '"","")],[],[],"x86_64-linux","/bin/sh",[],[])'
    )
    assert parse_outputs(versioned) == {"out": "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x"}
    # Escapes in a string, as Nix's parseString reads them; only the outputs list is read.
    escaped = r'Derive([("o\"ut","/nix/store/q\\x\ny\tz","","")],[cut here'
    assert parse_outputs(escaped) == {'o"ut': "/nix/store/q\\x\ny\tz"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a derivation",
        'Derive([],[],[],"x86_64-linux","/bin/sh",[],[])',  # no output at all
        'Derive([("out","/nix/store/x',  # cut inside a string
        'Derive([("out","/nix/store/x","")],',  # a field short
        'Derive([("out","relative/path","","")],',
    ],
)
def test_what_is_no_derivation_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_outputs(text)


def test_an_unreadable_or_malformed_file_has_no_outputs(tmp_path: Path) -> None:
    assert read_outputs(str(tmp_path / "missing.drv")) is None
    (tmp_path / "bad.drv").write_bytes(b"\xff\xfe garbage")
    assert read_outputs(str(tmp_path / "bad.drv")) is None
    assert derivation_name("/nix/store/" + "a" * 32 + "-ort-1.23.2.drv") == "ort-1.23.2"
