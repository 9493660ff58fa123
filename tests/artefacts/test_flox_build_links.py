"""What `flox build NAME` leaves, as the STAND-IN flox (tests/standins/standin-flox) models
Flox's package-builder/flox-build.mk: `nix build DRV^*` links every output (result-NAME,
result-NAME-dev) and the build log is linked as result-NAME-log. The workbench records the
outputs' sizes from the real `nix path-info` and leaves the log link out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from nix_testing import NIX_CONFIG, needs_nix

from workbench.artefacts.sizes import collect

REPO = Path(__file__).resolve().parents[2]
FLOX = REPO / "tests" / "standins" / "standin-flox"
pytestmark = needs_nix

# Two outputs, as nixpkgs' onnxruntime has (out and dev); built by /bin/sh, nothing fetched.
TWO_OUTPUTS = """\
{ }:
derivation {
  name = "two-outputs";
  system = builtins.currentSystem;
  builder = "/bin/sh";
  outputs = [ "out" "dev" ];
  args = [ "-c" "echo library > $out; echo headers and more headers > $dev; echo built" ];
}
"""


def environment(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A git repository holding a Flox environment with .flox/pkgs/two.nix, and the env."""
    nixpkgs = tmp_path / "nixpkgs"
    nixpkgs.mkdir()
    shutil.copy(REPO / "tests" / "nix" / "standin-nixpkgs.nix", nixpkgs / "default.nix")
    repo = tmp_path / "project"
    (repo / ".flox" / "env").mkdir(parents=True)
    (repo / ".flox" / "pkgs").mkdir()
    (repo / ".flox" / "env" / "manifest.toml").write_text("version = 1\n")
    (repo / ".flox" / "pkgs" / "two.nix").write_text(TWO_OUTPUTS)
    env = {
        **os.environ,
        "NIX_CONFIG": NIX_CONFIG,
        "NIX_PATH": f"workbench-nixpkgs={nixpkgs}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo, env


def flox(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(FLOX), *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )


def test_flox_build_links_every_output_and_its_log_which_are_not_recorded(tmp_path) -> None:
    repo, env = environment(tmp_path)
    refused = flox(repo, env, "build", "two")
    # Flox builds expression files git knows (added, not necessarily committed).
    assert refused.returncode == 1 and "not tracked by git" in refused.stderr
    subprocess.run(["git", "add", ".flox"], cwd=repo, check=True)
    built = flox(repo, env, "build", "two")
    assert built.returncode == 0, built.stderr
    links = sorted(p.name for p in repo.iterdir() if p.name.startswith("result"))
    assert links == ["result-two", "result-two-dev", "result-two-log"]
    assert (repo / "result-two").read_text() == "library\n"
    assert (repo / "result-two-dev").read_text() == "headers and more headers\n"
    # The log is the builder's output, from `nix log DRV`, in the store.
    assert (repo / "result-two-log").read_text() == "built\n"
    assert os.path.realpath(repo / "result-two-log").startswith("/nix/store/")
    found = collect(repo, "two")
    assert found is not None
    assert [o.link for o in found.outputs] == ["result-two", "result-two-dev"]
    sizes = {o.link: o for o in found.outputs}
    for link in ("result-two", "result-two-dev"):
        output = sizes[link]
        assert output.path == os.path.realpath(repo / link)
        assert output.nar_size > 0 and output.closure_size >= output.nar_size
    # The dev output holds more bytes, so its NAR is larger; the total is both.
    assert sizes["result-two-dev"].nar_size > sizes["result-two"].nar_size
    assert found.nar_size == sizes["result-two"].nar_size + sizes["result-two-dev"].nar_size
