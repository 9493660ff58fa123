"""From a built variant to a verified, measured artefact, through both backends, under real Nix.

A copy of the checkout takes the STAND-IN nixpkgs (tests/nix/standin-nixpkgs.nix, whose
packages are real derivations here) as its flake's nixpkgs and as Flox's `<workbench-nixpkgs>`;
`flox` is the STAND-IN tests/standins/standin-flox (Flox cannot be installed here), which calls
the generated .flox/pkgs/NAME.nix with callPackage as Flox does. Both backends leave
result-NAME; the supervisor records sizes with the real `nix path-info`; `smoke NAME` runs the
built variant's environment (its bin/python runs this suite's Python, which has the onnxruntime
wheel) and fails a CUDA variant, whose CUDA provider the wheel lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nix_testing import NIX_CONFIG, flake_on_the_standin, needs_nix

REPO = Path(__file__).resolve().parents[2]
CPU = "onnxruntime-python313-cpu-avx2"
CUDA = "onnxruntime-python313-cuda12_9-sm90-avx512"

pytestmark = [*needs_nix, pytest.mark.slow]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> dict:
    pytest.importorskip("onnxruntime", reason="the smoke check needs the onnxruntime wheel")
    pytest.importorskip("onnx", reason="the smoke model is built with the onnx package")
    base = tmp_path_factory.mktemp("e2e")
    repo = flake_on_the_standin(base)
    git = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(argv, cwd=repo, env=git, check=True, capture_output=True)
    tools = base / "bin"
    tools.mkdir()
    (tools / "flox").symlink_to(REPO / "tests" / "standins" / "standin-flox")
    env = {
        **os.environ,
        "NIX_CONFIG": NIX_CONFIG,
        "XDG_CACHE_HOME": str(base / "cache"),
        # Flox's nixpkgs, and the interpreter the stand-in environments run (with onnxruntime).
        "NIX_PATH": f"workbench-nixpkgs={base / 'standin'}",
        "PATH": f"{tools}:{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    return {"repo": repo, "env": env, "state": base / "state"}


def workbench(checkout: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
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
        timeout=timeout,
        check=False,
    )


def test_flox_sync_files_are_what_the_generator_writes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "flox", "sync", "--check", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    document = json.loads(result.stdout)
    assert document["in_sync"] and document["unchanged"] == 36 + 4 + 2
    assert len(document["skipped"]) == 30  # CUDA 12.4: not offered by the flake either


def test_both_backends_leave_result_name_and_record_sizes(checkout) -> None:
    repo = checkout["repo"]
    flox = workbench(checkout, "build", CPU, "--backend", "flox", "--jobs", "2")
    assert flox.returncode == 0, flox.stderr[-3000:]
    # flox takes no job count: they reach the Nix it runs through NIX_CONFIG, after the user's.
    command = next(line for line in flox.stderr.splitlines() if "flox build" in line)
    assert "env $'NIX_CONFIG=experimental-features" in command
    assert "\\ncores = 2\\nmax-jobs = 1' flox build " + CPU in command
    link = repo / f"result-{CPU}"
    assert link.is_symlink()
    record = json.loads((link / "nix-support" / "workbench-standin.json").read_text())
    assert record["pname"] == CPU  # the flake's own package, built through Flox's file
    flox_path = os.path.realpath(link)
    link.unlink()
    nix = workbench(checkout, "build", CPU, "--jobs", "2")
    assert nix.returncode == 0, nix.stderr[-3000:]
    assert os.path.realpath(link) == flox_path  # exactly what the flake builds: one store path
    history = json.loads(workbench(checkout, "history", "--json").stdout)["builds"]
    built = [b for b in history if b["name"] == CPU]
    assert {b["backend"] for b in built} == {"nix", "flox"}
    for build in built:
        [output] = build["artefacts"]["outputs"]
        assert output["link"] == f"result-{CPU}" and output["path"] == flox_path
        assert output["nar_size"] > 0 and output["closure_size"] >= output["nar_size"]
    table = workbench(checkout, "history").stdout
    assert "closure" in table.splitlines()[0]
    first, second = sorted(b["id"] for b in built)
    report = workbench(checkout, "report", str(first), str(second)).stdout
    assert "Output size (NAR)" in report and "Closure size" in report


def test_smoke_runs_the_built_variant_and_says_which_build(checkout) -> None:
    smoke = workbench(checkout, "smoke", CPU)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert f"smoking result-{CPU} ->" in smoke.stdout and "build #" in smoke.stdout
    assert f"in its environment result-{CPU}-env" in smoke.stdout
    assert "PASSED" in smoke.stdout


def test_a_cuda_variant_without_its_cuda_provider_fails_the_smoke(checkout) -> None:
    built = workbench(checkout, "build", CUDA, "--jobs", "2")
    assert built.returncode == 0, built.stderr[-3000:]
    smoke = workbench(checkout, "smoke", CUDA)
    assert smoke.returncode == 1
    assert "FAILED" in smoke.stdout
    assert "a CUDA variant without CUDAExecutionProvider" in smoke.stdout


def test_flox_publish_in_the_checkout(checkout) -> None:
    repo, env = checkout["repo"], checkout["env"]
    refused = subprocess.run(
        ["flox", "publish", CPU], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    # The first `nix build` wrote flake.lock: Flox publishes what is committed, so commit it.
    assert refused.returncode == 1 and "not clean" in refused.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert status.split()[-1] == "flake.lock" and len(status.splitlines()) == 1, status
    git = {
        **env,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", "add", "flake.lock"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "lock"], cwd=repo, env=git, check=True)
    published = subprocess.run(
        ["flox", "publish", CPU],
        cwd=checkout["repo"],
        env=checkout["env"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert published.returncode == 0, published.stderr
    assert f"would publish {CPU}" in published.stdout
