"""The workbench installed the ways users install tools, used from outside any checkout.

The wheel and the sdist are built from this repository with `python -m build` (hatchling, from
PyPI), then each install path gets a fresh environment: pip from the wheel, pip from the sdist,
`uv tool install` and `pipx install` from the wheel (build, uv and pipx come from PyPI into a
tools venv of the test's own). From a directory outside any checkout, with a home of its own,
each installed `workbench` runs --version, doctor, variants --json, a refused build that says
how to get a flake, `init`, a per-user setting that leaves the new checkout clean, a sample
build under the supervisor, its report, and the TUI's first screen in tmux. Needs PyPI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from needed_tools import needs

REPO = Path(__file__).resolve().parents[2]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    needs("git", "tmux", "cmake", "ninja", "g++"),
]


def run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout=900):
    result = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, check=False
    )
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tools venv (build, uv, pipx from PyPI) and the wheel and sdist built from the repo."""
    base = tmp_path_factory.mktemp("install-paths")
    tools = base / "tools"
    made = run([sys.executable, "-m", "venv", str(tools)])
    assert made.returncode == 0, made.stderr
    fetched = run([str(tools / "bin" / "pip"), "install", "-q", "build", "uv", "pipx"])
    if fetched.returncode != 0:
        pytest.skip(f"PyPI is not reachable here: {fetched.stderr.strip().splitlines()[-1:]}")
    out = base / "dist"
    built = run([str(tools / "bin" / "python"), "-m", "build", "-o", str(out), str(REPO)])
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("ort_workbench-*.whl")
    (sdist,) = out.glob("ort_workbench-*.tar.gz")
    return {"tools": tools / "bin", "wheel": wheel, "sdist": sdist, "base": base}


def install(path: str, dist: dict[str, Path], home: Path, env: dict[str, str]) -> Path:
    """Install by `path`; the installed `workbench` command."""
    tools = dist["tools"]
    venv = home / "venv"
    if path in ("pip-wheel", "pip-sdist"):
        assert run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
        artefact = dist["wheel" if path == "pip-wheel" else "sdist"]
        done = run([str(venv / "bin" / "pip"), "install", "-q", str(artefact)], env=env)
        assert done.returncode == 0, done.stderr
        return venv / "bin" / "workbench"
    if path == "uv-tool":
        done = run([str(tools / "uv"), "tool", "install", str(dist["wheel"])], env=env)
    else:
        done = run([str(tools / "pipx"), "install", str(dist["wheel"])], env=env)
    assert done.returncode == 0, done.stderr
    return home / "bin" / "workbench"


def interpreter_of(command: Path) -> str:
    """The Python the installed console script runs (its shebang's program; pipx adds -E)."""
    return command.read_text().splitlines()[0].removeprefix("#!").split()[0]


@pytest.mark.parametrize("path", ["pip-wheel", "pip-sdist", "uv-tool", "pipx"])
def test_an_installed_workbench_works_outside_any_checkout(
    path: str, dist: dict[str, Path], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("WORKBENCH_") and key not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        UV_TOOL_DIR=str(home / "uv-tools"),
        UV_TOOL_BIN_DIR=str(home / "bin"),
        PIPX_HOME=str(home / "pipx"),
        PIPX_BIN_DIR=str(home / "bin"),
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        PATH=f"{home / 'bin'}:{os.environ['PATH']}",
        **GIT_IDENTITY,
    )
    workbench = install(path, dist, home, env)
    outside = home / "work"  # no checkout here or above (tmp_path is not in one)
    outside.mkdir()

    def bench(*args: str, cwd: Path = outside) -> subprocess.CompletedProcess[str]:
        return run([str(workbench), *args], env=env, cwd=cwd, timeout=600)

    version = bench("--version")
    assert version.returncode == 0 and version.stdout.startswith("workbench 0.1.0 (commit ")
    doctor = bench("doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert "/site-packages/workbench/_data/configs" not in doctor.stderr
    variants = json.loads(bench("variants", "--json").stdout)
    assert variants["schema"] == "workbench-variants/1" and len(variants["variants"]) > 10
    refused = bench("build", "cpu", "--dry-run")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "needs a checkout: run `workbench init DIR`" in refused.stderr

    made = bench("init", "ck")
    assert made.returncode == 0 and "committed" in made.stdout, made.stderr
    checkout = outside / "ck"
    jobs = bench("config", "set", "ninja_jobs", "2", cwd=checkout)
    assert jobs.returncode == 0 and str(home / ".config" / "workbench") in jobs.stdout
    status = run(["git", "-C", str(checkout), "status", "--porcelain"])
    assert status.stdout == ""  # the per-user setting left the checkout clean
    plan = bench("build", "onnxruntime-python313-cpu-avx2", "--dry-run", cwd=checkout)
    assert plan.stdout.startswith("nix ") and "--cores 2" in plan.stdout, plan.stderr

    state = ["--state-dir", str(home / "state")]
    sample = bench(
        *state,
        "run",
        "--name",
        "sample-project",
        "--",
        interpreter_of(workbench),
        "-m",
        "workbench.samples.sample_project",
        "build",
        str(home / "sample"),
        "--jobs",
        "2",
    )
    assert sample.returncode == 0, sample.stderr
    report = bench(*state, "report", "1")
    assert report.returncode == 0 and "sample-project" in report.stdout, report.stderr

    session = f"install-{uuid.uuid4().hex[:8]}"
    started = run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40"]
        + [
            arg
            for key in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
            for arg in ("-e", f"{key}={env[key]}")
        ]
        + ["-c", str(outside), str(workbench), *state]
    )
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 120
        screen = ""
        # The title comes first; the matrix once the host is detected.
        while "onnxruntime-python313-" not in screen:
            if time.monotonic() > deadline:
                raise AssertionError(f"the TUI's first screen never came:\n{screen}")
            time.sleep(0.5)
            screen = run(["tmux", "capture-pane", "-p", "-t", session]).stdout
        assert "workbench — ONNX Runtime" in screen
    finally:
        run(["tmux", "kill-session", "-t", session])
