"""Two ONNX Runtime releases of one variant, built side by side by real Nix, through
`workbench build --ort`: each its own out-link, its own store path, its own history row, and
`report A B` saying which release each build was.

A copy of the checkout takes the STAND-IN nixpkgs (tests/nix/standin-nixpkgs.nix) as its flake's
nixpkgs: its packages are real derivations that write what they were given to
nix-support/workbench-standin.json (ORT itself cannot be built here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nix_testing import NIX_CONFIG, flake_on_the_standin, needs_nix

CPU = "onnxruntime-python313-cpu-avx2"
REPO = Path(__file__).resolve().parents[2]

pytestmark = [*needs_nix, pytest.mark.slow]

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


@pytest.fixture
def checkout(tmp_path) -> dict:
    repo = flake_on_the_standin(tmp_path)
    git = {**os.environ, **GIT_IDENTITY}
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(argv, cwd=repo, env=git, check=True, capture_output=True)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "flox").symlink_to(REPO / "tests" / "standins" / "standin-flox")
    env = {
        **os.environ,
        "NIX_CONFIG": NIX_CONFIG,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        # Flox's nixpkgs (the stand-in), and the STAND-IN flox (tests/standins/standin-flox).
        "NIX_PATH": f"workbench-nixpkgs={tmp_path / 'standin'}",
        "PATH": f"{tools}:{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    return {"repo": repo, "env": env, "state": tmp_path / "state"}


def workbench(checkout: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--config",
            str(checkout["repo"] / "configs"),
            "--state-dir",
            str(checkout["state"]),
            *args,
        ],
        cwd=checkout["repo"],
        env=checkout["env"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def recorded(link: Path) -> dict:
    return json.loads((link / "nix-support" / "workbench-standin.json").read_text())


def test_two_releases_of_one_variant_build_side_by_side_and_the_report_names_them(checkout):
    repo = checkout["repo"]
    pin = workbench(checkout, "build", CPU, "--jobs", "1")
    assert pin.returncode == 0, pin.stderr[-3000:]
    other = workbench(checkout, "build", CPU, "--ort", "1.24.2", "--jobs", "1")
    assert other.returncode == 0, other.stderr[-3000:]
    assert "note: ONNX Runtime 1.24.2: v1.24.2" in other.stderr

    pin_link, other_link = repo / f"result-{CPU}", repo / f"result-{CPU}-ort1_24_2"
    assert pin_link.is_symlink() and other_link.is_symlink()
    assert os.path.realpath(pin_link) != os.path.realpath(other_link)
    # What each store path was built from: the Python package over its C++ package.
    pin_cpp = recorded(pin_link)["passthru"]["cpp"]["attrs"]
    other_cpp = recorded(other_link)["passthru"]["cpp"]["attrs"]
    assert recorded(other_link)["passthru"]["workbench"]["ortVersion"] == "1.24.2"
    assert pin_cpp["version"] == "1.23.2"
    assert other_cpp["version"] == "1.24.2"
    assert other_cpp["src"]["args"]["tag"] == "v1.24.2"
    assert "FETCHCONTENT_SOURCE_DIR_ONNX:PATH=" in " ".join(other_cpp["cmakeFlags"])

    history = json.loads(workbench(checkout, "history", "--json").stdout)["builds"]
    rows = {b["name"]: b for b in history}
    assert set(rows) == {CPU, f"{CPU}-ort1_24_2"}
    assert rows[CPU]["settings"]["ort_version"] == "1.23.2"
    assert rows[f"{CPU}-ort1_24_2"]["settings"]["ort_version"] == "1.24.2"
    for name, row in rows.items():
        [output] = row["artefacts"]["outputs"]
        assert output["link"] == f"result-{name}"
    table = workbench(checkout, "history").stdout.splitlines()
    assert table[0].split()[:4] == ["id", "state", "name", "ORT"]
    assert any("1.24.2" in line for line in table[1:])

    first, second = sorted(row["id"] for row in rows.values())
    report = workbench(checkout, "report", str(first), str(second))
    assert report.returncode == 0, report.stderr
    assert "| ONNX Runtime | 1.23.2 | 1.24.2 | 1.23.2 → 1.24.2 |" in report.stdout
    print(report.stdout)  # the closing note shows it (pytest -s)


def test_a_releases_environment_reports_the_release_it_was_built_as(checkout, tmp_path):
    """The stand-in environment's Python (the build machine's, which has no wheel of that
    release) reports the release it was built as, as the real one's onnxruntime module does:
    what `workbench smoke` checks (artefacts.smoke_target.require_release)."""
    from workbench.artefacts.smoke_target import require_release

    link = tmp_path / "env-link"
    built = subprocess.run(
        ["nix", "build", f".#{CPU}-ort1_24_2.environment", "--out-link", str(link)],
        cwd=checkout["repo"],
        env=checkout["env"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    # Any onnxruntime module on the path stands for the wheel (none can be installed here).
    wheel = tmp_path / "wheel" / "onnxruntime"
    wheel.mkdir(parents=True)
    (wheel / "__init__.py").write_text('__version__ = "9.9.9"\n')
    said = subprocess.run(
        [str(link / "bin" / "python"), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
        env={**checkout["env"], "PYTHONPATH": str(wheel.parent)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert said.stdout.strip() == "1.24.2", said.stderr
    assert require_release({"onnxruntime": said.stdout.strip()}, "1.24.2") is None
    why = require_release({"onnxruntime": "9.9.9", "onnxruntime_file": "/x"}, "1.24.2")
    assert why is not None and "built as ONNX Runtime 1.24.2" in why and "9.9.9" in why


def test_flox_builds_a_release_as_the_flake_does_once_synced_for_it(checkout):
    repo = checkout["repo"]
    name = f"{CPU}-ort1_24_2"
    missing = workbench(checkout, "build", CPU, "--ort", "1.24.2", "--backend", "flox")
    assert missing.returncode == 2
    assert "`workbench flox sync --ort 1.24.2` writes .flox/" in missing.stderr
    synced = workbench(checkout, "flox", "sync", "--ort", "1.24.2")
    assert synced.returncode == 0, synced.stderr
    assert (repo / ".flox" / "pkgs" / f"{name}.nix").is_file()
    assert not (repo / ".flox" / "pkgs" / "onnxruntime-cuda-hybrid-ort1_24_2.nix").exists()
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    flox = workbench(checkout, "build", CPU, "--ort", "1.24.2", "--backend", "flox", "--jobs", "1")
    assert flox.returncode == 0, flox.stderr[-3000:]
    link = repo / f"result-{name}"
    flox_path = os.path.realpath(link)
    assert recorded(link)["passthru"]["workbench"]["ortVersion"] == "1.24.2"
    link.unlink()
    nix = workbench(checkout, "build", CPU, "--ort", "1.24.2", "--jobs", "1")
    assert nix.returncode == 0, nix.stderr[-3000:]
    assert os.path.realpath(link) == flox_path  # one store path, whichever backend built it
    # A plain sync (the pin's release) takes the release's generated files away again.
    workbench(checkout, "flox", "sync", "--ort", "1.23.2")
    assert not (repo / ".flox" / "pkgs" / f"{name}.nix").exists()
