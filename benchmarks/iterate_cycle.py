"""An iterate cycle after a one-file change against bare ninja in the same workspace. JSON.

On the stand-in flake of the tests (tests/iterate/standin_flake: a STAND-IN for the builder
flake's onnxruntime-cpu, built by real Nix; its fixture source has 36 translation units, one
heavy, and the fixture series; configs copied from the repository's, -O2 by default):

1. clean build: `workbench iterate cpu` with an empty state directory: the derivation's
   environment recorded (`nix print-dev-env`), unpackPhase, patchPhase, the series as commits,
   configurePhase, the whole ninja build under the supervisor, the summary. Spawn to exit.
2. cycles: one light translation unit edited in the workspace, then `workbench iterate cpu`;
   `--cycles` times, each a different file; the median is the figure.
3. baseline, interleaved with the cycles: the same kind of one-file change built by bare
   `ninja -C BUILD` in the same workspace, in the same recorded environment (env.json's
   exported variables), with the same jobs: the floor any cycle has to pay.

Figures: overhead = median cycle - median bare ninja (target <= 0.25 s on the 2-core machine),
and the cycle's ratio to the clean build. The breakdown of the median cycle comes from the
command's own `--json` timings: interpreter start and argument parsing (wall minus the
command's total), configs, workspace (git, the flake's fingerprint), supervisor start and end,
the build as the supervisor measured it, and the rest (summary, JSON).

Run: python benchmarks/iterate_cycle.py [--units 36] [--cycles 7] [--jobs 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "iterate"))

from nix_testing import NIX_CONFIG  # noqa: E402
from standin_repo import write_standin_repo  # noqa: E402

TARGET_OVERHEAD_S = 0.25


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: bytecode cached
    env.pop("WORKBENCH_STATE_DIR", None)
    env.setdefault("NIX_CONFIG", NIX_CONFIG)
    env.setdefault("XDG_CACHE_HOME", str(root / "nix-cache"))
    return env


def _iterate(root: Path, configs: Path, state: Path, jobs: int) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "workbench", "--config", str(configs), "--state-dir"]
    argv += [str(state), "iterate", "cpu", "--json", "--no-smoke", "-j", str(jobs)]
    began = time.monotonic()
    done = subprocess.run(
        argv, cwd=REPO, env=_env(root), capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"workbench iterate failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return wall, json.loads(done.stdout)


def _edit(path: Path, counter: int) -> None:
    text = path.read_text()
    path.write_text(
        text.replace("int digits", f"int unused_{counter} = {counter};\n    int digits")
    )


def _recorded_env(workspace_root: Path) -> dict[str, str]:
    """The environment the cycle's build tool gets: env.json's exported variables (outputs
    rewritten as env-build.sh does), the derivation's PATH before ours."""
    from workbench.iterate import dev_env

    env = dev_env.load(workspace_root / dev_env.ENV_JSON).exported()
    env["out"] = str(dev_env.output_directory(workspace_root))
    return {**os.environ, **env, "PATH": f"{env.get('PATH', '')}:{os.environ['PATH']}"}


def _breakdown(wall: float, document: dict) -> dict[str, float]:
    timings = document["timings"]
    build = timings["build_s"]
    inside = timings["total_s"]
    known = timings.get("configs", 0) + timings.get("workspace", 0) + timings["launch_and_follow_s"]
    return {
        "interpreter_and_parser_s": round(wall - inside, 3),
        "configs_s": timings.get("configs", 0.0),
        "workspace_git_and_fingerprint_s": timings.get("workspace", 0.0),
        "supervisor_start_and_end_s": round(timings["launch_and_follow_s"] - build, 3),
        "build_under_supervisor_s": build,
        "rest_s": round(inside - known, 3),
    }


def run(units: int, cycles: int, jobs: int, optimization: str, keep: Path | None) -> dict:
    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="workbench-iterate-bench-"))
    try:
        repo = write_standin_repo(root / "repo", units=units, optimization=optimization)
        state = root / "state"
        full_wall, full = _iterate(root, repo.configs, state, jobs)
        assert len(full["ninja"]["sources"]) == units + 1, full["ninja"]
        workspace = Path(full["workspace"]["src"])
        build = Path(full["workspace"]["build"])
        recorded = _recorded_env(Path(full["workspace"]["root"]))

        measured, bare = [], []
        for cycle in range(cycles):
            unit = workspace / f"light_{2 + (cycle % (units - 2))}.cc"
            _edit(unit, cycle)
            wall, document = _iterate(root, repo.configs, state, jobs)
            assert document["ninja"]["sources"] == [unit.name], document["ninja"]
            assert document["steps"] == [], document["steps"]  # the fast path
            measured.append((wall, document))
            _edit(workspace / f"light_{2 + ((cycle + 7) % (units - 2))}.cc", 100 + cycle)
            began = time.monotonic()
            subprocess.run(
                ["ninja", "-C", str(build), "-j", str(jobs)],
                env=recorded,
                capture_output=True,
                check=True,
            )
            bare.append(time.monotonic() - began)
        walls = [wall for wall, _ in measured]
        median = statistics.median(walls)
        bare_median = statistics.median(bare)
        middle = min(measured, key=lambda pair: abs(pair[0] - median))
        overhead = median - bare_median
        return {
            "fixture": {
                "flake": "tests/iterate/standin_flake (stand-in onnxruntime-cpu, real Nix)",
                "units": units,
                "heavy_units": 1,
                "patches": [patch["name"] for patch in full["patches"]],
                "jobs": jobs,
                "optimization": optimization,
            },
            "host": {
                "cpus": os.cpu_count(),
                # Other work on the host slows both; this says how busy it was.
                "load_average_before": [round(value, 2) for value in load_before],
                "load_average_after": [round(value, 2) for value in os.getloadavg()],
            },
            "clean_build_s": round(full_wall, 3),
            "clean_build_breakdown": _breakdown(full_wall, full),
            "cycle_s": round(median, 3),
            "cycles_s": [round(wall, 3) for wall in walls],
            "cycle_breakdown": _breakdown(*middle),
            "cycle_compiled": middle[1]["ninja"]["sources"],
            "baseline_bare_ninja_one_file_s": round(bare_median, 3),
            "baseline_bare_ninja_runs_s": [round(value, 3) for value in bare],
            "overhead_s": round(overhead, 3),
            "target_overhead_s": TARGET_OVERHEAD_S,
            "met": overhead <= TARGET_OVERHEAD_S,
            "cycle_to_clean_build_ratio": round(median / full_wall, 4),
        }
    finally:
        if keep:
            shutil.copytree(root, keep, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=36, help="translation units (16+)")
    parser.add_argument("--cycles", type=int, default=7, help="one-file cycles measured")
    parser.add_argument("--jobs", type=int, default=2, help="ninja jobs, for both")
    parser.add_argument("--optimization", default="-O2", help="settings' optimization_flags")
    parser.add_argument("--keep", type=Path, help="copy the workspace and state here")
    args = parser.parse_args()
    if args.units < 16:
        parser.error("the fixture series needs at least 16 translation units")
    tools = ("git", "cmake", "ninja", "g++", "nix", "bash")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        print(json.dumps({"skipped": f"missing {', '.join(missing)}"}))
        return 1
    result = run(args.units, max(1, args.cycles), args.jobs, args.optimization, args.keep)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
