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


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


@pytest.fixture
def checkout(tmp_path) -> dict:
    """A fresh committed copy of the checkout on the stand-in nixpkgs, for each test alone (the
    builds are cached in the Nix store, so a test that builds again pays little)."""
    pytest.importorskip("onnxruntime", reason="the smoke check needs the onnxruntime wheel")
    pytest.importorskip("onnx", reason="the smoke model is built with the onnx package")
    base = tmp_path
    repo = flake_on_the_standin(base)
    git = {**os.environ, **GIT_IDENTITY}
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


def test_a_flavours_debug_output_is_linked_and_sized_apart_by_both_backends(checkout) -> None:
    # nixpkgs' recipe sets separateDebugInfo = true: a flavour (outputs = [ "out" ]) is a
    # derivation with outputs out and debug. `nix build .#ATTR` links only out; the workbench
    # links the debug output too, as flox (DRV^*) does, so `workbench bt` keeps finding it.
    repo = checkout["repo"]
    links = ["result-onnxruntime-cpu", "result-onnxruntime-cpu-debug"]
    nix = workbench(checkout, "build", "cpu", "--jobs", "2")
    assert nix.returncode == 0, nix.stderr[-3000:]
    assert sorted(p.name for p in repo.glob("result-*")) == links
    out, debug = (os.path.realpath(repo / link) for link in links)
    assert os.path.basename(debug)[33:] == os.path.basename(out)[33:] + "-debug"
    assert (repo / links[1] / "lib" / "debug" / ".build-id").is_dir()
    for link in links:
        (repo / link).unlink()
    flox = workbench(checkout, "build", "cpu", "--backend", "flox", "--jobs", "2")
    assert flox.returncode == 0, flox.stderr[-3000:]
    assert [os.path.realpath(repo / link) for link in links] == [out, debug]
    history = json.loads(workbench(checkout, "history", "--json").stdout)["builds"]
    assert len(history) == 2
    for build in history:
        recorded = build["artefacts"]["outputs"]
        assert [o["link"] for o in recorded] == links
        assert [o["path"] for o in recorded] == [out, debug]
        assert all(o["nar_size"] > 0 for o in recorded)
    # The sizes the report compares are the installed output's; the debug output is apart.
    from workbench.artefacts.sizes import from_json

    produced = from_json(history[0]["artefacts"])
    assert produced.nar_size == history[0]["artefacts"]["outputs"][0]["nar_size"]
    assert produced.debug_nar_size == history[0]["artefacts"]["outputs"][1]["nar_size"]


def test_smoke_runs_the_built_variant_and_says_which_build(checkout) -> None:
    built = workbench(checkout, "build", CPU, "--jobs", "2")
    assert built.returncode == 0, built.stderr[-3000:]
    smoke = workbench(checkout, "smoke", CPU)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert f"smoking result-{CPU} ->" in smoke.stdout and "build #1 (nix, " in smoke.stdout
    assert f"in its environment result-{CPU}-env" in smoke.stdout
    assert "PASSED" in smoke.stdout


def test_smoke_right_after_a_flox_build_says_it_smoked_the_flox_build(checkout) -> None:
    repo = checkout["repo"]
    flox = workbench(checkout, "build", CPU, "--backend", "flox", "--jobs", "2")
    assert flox.returncode == 0, flox.stderr[-3000:]
    # Flox left its log beside the result; it is not an output and is not recorded as one.
    assert (repo / f"result-{CPU}-log").is_symlink()
    [recorded] = json.loads(workbench(checkout, "history", "--json").stdout)["builds"]
    assert [o["link"] for o in recorded["artefacts"]["outputs"]] == [f"result-{CPU}"]
    smoke = workbench(checkout, "smoke", CPU)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    said = smoke.stdout.splitlines()[0]
    assert said.startswith(f"smoking result-{CPU} -> {os.path.realpath(repo / f'result-{CPU}')}")
    assert f"build #{recorded['id']} (flox, " in said, said
    # The same store path built by Nix afterwards: the newest build is the one said.
    nix = workbench(checkout, "build", CPU, "--jobs", "2")
    assert nix.returncode == 0, nix.stderr[-3000:]
    again = workbench(checkout, "smoke", CPU).stdout.splitlines()[0]
    assert f"build #{recorded['id'] + 1} (nix, " in again, again


def test_a_cuda_variant_without_its_cuda_provider_fails_the_smoke(checkout) -> None:
    built = workbench(checkout, "build", CUDA, "--jobs", "2")
    assert built.returncode == 0, built.stderr[-3000:]
    smoke = workbench(checkout, "smoke", CUDA)
    assert smoke.returncode == 1
    assert "FAILED" in smoke.stdout
    assert "a CUDA variant without CUDAExecutionProvider" in smoke.stdout


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **GIT_IDENTITY},
        capture_output=True,
        text=True,
        check=True,
    )


def test_flox_publish_in_the_checkout(checkout, tmp_path) -> None:
    repo, env = checkout["repo"], checkout["env"]

    def publish() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["flox", "publish", CPU],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    # Flox publishes a revision its remote has: without an upstream there is none.
    refused = publish()
    assert refused.returncode == 1 and "has no upstream remote configured" in refused.stderr
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "-u", "origin", "HEAD")
    # `nix build` wrote flake.lock and git-added it with --intent-to-add (Nix does that in a
    # git flake): a tracked change, so publishing is refused until it is committed and pushed.
    assert workbench(checkout, "build", CPU, "--jobs", "2").returncode == 0
    assert git(repo, "status", "--porcelain").stdout == " A flake.lock\n"
    locked = publish()
    assert locked.returncode == 1 and "has dirty tracked files" in locked.stderr
    git(repo, "add", "flake.lock")
    git(repo, "commit", "-qm", "lock")
    git(repo, "push", "-q")
    # Untracked files outside .flox/ do not matter (Flox checks tracked files only).
    (repo / "notes.txt").write_text("mine\n")
    published = publish()
    assert published.returncode == 0, published.stderr
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert f"would publish {CPU} (" in published.stdout and f"at {head}" in published.stdout
    # A changed tracked file is refused; committed but not pushed, too.
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\nchanged\n")
    dirty = publish()
    assert dirty.returncode == 1 and "has dirty tracked files" in dirty.stderr
    git(repo, "commit", "-qam", "readme")
    unpushed = publish()
    assert unpushed.returncode == 1 and "not present on remote 'origin/" in unpushed.stderr
    git(repo, "push", "-q")
    assert publish().returncode == 0
    # An untracked file under .flox/ would be missing from the clean checkout: refused.
    (repo / ".flox" / "pkgs" / "extra.nix").write_text("{ }: null\n")
    untracked = publish()
    assert untracked.returncode == 1
    assert "environment files are not tracked by git:\n- .flox/pkgs/extra.nix" in untracked.stderr
