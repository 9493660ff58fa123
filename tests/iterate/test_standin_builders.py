"""Why the stand-in flake's builders end with bash's own `exit`, and that each one does.

Nix 2.8 (Debian's nix-bin) takes the end of a builder's output (EOF on its log pipe) for the
end of the builder and SIGKILLs its process group to be sure (src/libstore/build/
local-derivation-goal.cc, getChildStatus -> Pid::kill). bash runs the last command of a `-c`
script in its own process (exec), and coreutils close stdout and stderr before they exit
(gnulib's close_stdout): between the two, Nix kills a builder that had succeeded, and on a
loaded machine that window is wide. The iterate tests' `standin-stdenv` (`mkdir; cp`) failed
"due to signal 9 (Killed)" in 7 of 7 iterate tests at load 14 on the 2-core machine, each
killed by its own `nix print-dev-env` (a perf trace of signal_generate named the sender);
NixOS/nix#2176.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import nix_env
from standin_repo import ATTR, write_standin_repo

pytestmark = [
    pytest.mark.nix,
    needs("nix", debian="nix-bin"),
]

CLOSES_ITS_OUTPUT = """derivation {{
  name = "closes-its-output";
  system = builtins.currentSystem;
  nonce = "{nonce}";
  builder = "/bin/sh";
  # What `cp` does at its end, made long: output closed, the process still running.
  args = [ "-c" "exec >&- 2>&-; /bin/sleep 60; echo done > $out" ];
}}
"""


def test_nix_kills_a_builder_that_closes_its_output_before_it_exits(tmp_path: Path) -> None:
    expression = tmp_path / "closes.nix"
    expression.write_text(CLOSES_ITS_OUTPUT.format(nonce=tmp_path.name))
    done = subprocess.run(
        ["nix-build", "--no-out-link", str(expression)],
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=50,  # killed at once, not after the builder's 60 s sleep
        check=False,
    )
    assert done.returncode != 0
    assert "closes-its-output.drv' failed due to signal 9 (Killed)" in done.stderr, done.stderr


def test_every_standin_builder_script_ends_with_a_command_bash_runs_itself(
    tmp_path: Path,
) -> None:
    repo = write_standin_repo(tmp_path / "repo")
    shown = subprocess.run(
        ["nix", "show-derivation", "-r", f"{repo.root}#{ATTR}"],
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    derivations = json.loads(shown.stdout)
    scripts = {
        path: drv["args"][1]
        for path, drv in derivations.items()
        if drv["builder"] in ("/bin/bash", "/bin/sh") and drv["args"][:1] == ["-c"]
    }
    assert len(scripts) >= 5, sorted(derivations)  # stdenv, cc wrapper, cmake, ninja, dep, ...
    for path, script in scripts.items():
        last = script.strip().splitlines()[-1].split(";")[-1].strip()
        # `exit` and `genericBuild` (a function of the stand-in setup) run in bash itself.
        assert last in ("exit $?", "genericBuild"), (path, script)
