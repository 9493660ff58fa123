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
command's own `--json` timings: interpreter start, argument parsing and the process's exit
(wall minus the command's total), configs, workspace (git, the flake's fingerprint), the rest
of the CLI's work before the launch (the cycle's imports, the history opened, the plan) and
after the build (git status, the log's ninja lines, the note), supervisor start and end (the
CLI waits for the supervisor's own exit), the build as the supervisor measured it, and the
rest (the command's total less configs, workspace, launch and follow: the two CLI items above,
the summary and its JSON).

CPU: this process is the child subreaper of everything it starts, so the supervisor (which
outlives the CLI by a moment) and the build it reaps are counted too: cpu overhead = a cycle's
CPU seconds (all its processes) - bare ninja's. On a shared machine, other load stretches wall
times a lot and CPU times little: read the CPU figure beside the load averages.

--versus DIR: another checkout of the workbench (e.g. `git worktree add /tmp/before HEAD~3`)
whose `workbench iterate` runs in the same workspace, interleaved with this checkout's cycles
and bare ninja: a before/after comparison under the same load.

Run: python benchmarks/iterate_cycle.py [--units 36] [--cycles 7] [--jobs 2] [--keep DIR]
                                        [--versus DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import resource
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
    # The stand-in flake's builders are /bin/bash and /bin/sh, which Nix's sandbox (on by
    # default on Linux) does not hold: its settings go after any inherited ones, which they
    # override (the test suite's conftest sets NIX_CONFIG too, and the benchmark then built in
    # the sandbox unless an earlier test had already built the same derivation).
    env["NIX_CONFIG"] = (env.get("NIX_CONFIG", "") + "\n" + NIX_CONFIG).strip()
    env.setdefault("XDG_CACHE_HOME", str(root / "nix-cache"))
    return env


def _become_subreaper() -> None:
    """Orphans of what this process starts (the supervisor, once the CLI has exited) become
    its children, so that their CPU time reaches RUSAGE_CHILDREN when they are reaped."""
    PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


def _reap_all(timeout_s: float = 60.0) -> None:
    """Wait for every orphan re-parented here (a supervisor writing its build's last row)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)
    raise SystemExit(f"processes left running {timeout_s:.0f} s after a cycle")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _iterate(
    root: Path, configs: Path, state: Path, jobs: int, tree: Path = REPO
) -> tuple[float, float, dict]:
    """One `workbench iterate` of the checkout `tree`: (wall until it exits, CPU seconds of
    all its processes, its JSON). `-m workbench` from `tree` runs that checkout's package, and
    the supervisor it starts runs from there too (control.spawn_supervisor)."""
    argv = [sys.executable, "-m", "workbench", "--config", str(configs), "--state-dir"]
    argv += [str(state), "iterate", "cpu", "--json", "--no-smoke", "-j", str(jobs)]
    cpu_before = _children_cpu()
    began = time.monotonic()
    done = subprocess.run(
        argv, cwd=tree, env=_env(root), capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - began
    _reap_all()
    cpu = _children_cpu() - cpu_before
    if done.returncode != 0:
        raise SystemExit(f"workbench iterate failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return wall, cpu, json.loads(done.stdout)


_EDITS = itertools.count()


def _edit(path: Path) -> None:
    """A new local variable: the file compiles to a new object (each name used once)."""
    counter = next(_EDITS)
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
    before = timings.get("before_launch_s")
    after = timings.get("after_build_s")
    split = {}
    if before is not None and after is not None:  # checkouts before these timings lack them
        split = {
            # imports of the cycle's modules, the history opened, jobs chosen, the plan
            "cli_before_launch_rest_s": round(
                before - timings.get("configs", 0) - timings.get("workspace", 0), 3
            ),
            "cli_after_build_s": after,
        }
    return {
        "interpreter_start_parser_and_exit_s": round(wall - inside, 3),
        "configs_s": timings.get("configs", 0.0),
        "workspace_git_and_fingerprint_s": timings.get("workspace", 0.0),
        **split,
        "supervisor_start_and_end_s": round(timings["launch_and_follow_s"] - build, 3),
        "build_under_supervisor_s": build,
        "rest_s": round(inside - known, 3),
    }


def _unit(workspace: Path, units: int, counter: int) -> Path:
    return workspace / f"light_{2 + (counter % (units - 2))}.cc"


def run(
    units: int,
    cycles: int,
    jobs: int,
    optimization: str,
    keep: Path | None,
    versus: Path | None = None,
) -> dict:
    _become_subreaper()
    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="workbench-iterate-bench-"))
    try:
        repo = write_standin_repo(root / "repo", units=units, optimization=optimization)
        state = root / "state"
        full_wall, _, full = _iterate(root, repo.configs, state, jobs)
        assert len(full["ninja"]["sources"]) == units + 1, full["ninja"]
        workspace = Path(full["workspace"]["src"])
        build = Path(full["workspace"]["build"])
        recorded = _recorded_env(Path(full["workspace"]["root"]))

        def cycle_of(tree: Path, counter: int) -> tuple[float, float, dict]:
            unit = _unit(workspace, units, counter)
            _edit(unit)
            wall, cpu, document = _iterate(root, repo.configs, state, jobs, tree)
            assert document["ninja"]["sources"] == [unit.name], document["ninja"]
            assert document["steps"] == [], document["steps"]  # the fast path
            return wall, cpu, document

        measured, bare, other = [], [], []
        for cycle in range(cycles):
            # Each kind of run edits its own unit: every one compiles one file and links. The
            # other checkout goes first every other round, so that neither always follows the
            # bare build.
            if versus is not None and cycle % 2:
                other.append(cycle_of(versus, cycle + 3)[:2])
            measured.append(cycle_of(REPO, cycle))
            _edit(_unit(workspace, units, cycle + 7))
            cpu_before = _children_cpu()
            began = time.monotonic()
            subprocess.run(
                ["ninja", "-C", str(build), "-j", str(jobs)],
                env=recorded,
                capture_output=True,
                check=True,
            )
            bare.append((time.monotonic() - began, _children_cpu() - cpu_before))
            if versus is not None and not cycle % 2:
                other.append(cycle_of(versus, cycle + 3)[:2])
        walls = [wall for wall, _, _ in measured]
        median = statistics.median(walls)
        bare_median = statistics.median(wall for wall, _ in bare)
        cpu_median = statistics.median(cpu for _, cpu, _ in measured)
        bare_cpu_median = statistics.median(cpu for _, cpu in bare)
        middle = min(measured, key=lambda run: abs(run[0] - median))
        overhead = median - bare_median
        compared = {}
        if versus is not None:
            other_median = statistics.median(wall for wall, _ in other)
            other_cpu = statistics.median(cpu for _, cpu in other)
            compared = {
                "versus": {
                    "checkout": str(versus),
                    "cycle_s": round(other_median, 3),
                    "cycles_s": [round(wall, 3) for wall, _ in other],
                    "overhead_s": round(other_median - bare_median, 3),
                    "cycle_cpu_s": round(other_cpu, 3),
                    "overhead_cpu_s": round(other_cpu - bare_cpu_median, 3),
                }
            }
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
            "cycle_breakdown": _breakdown(middle[0], middle[2]),
            "cycle_compiled": middle[2]["ninja"]["sources"],
            "baseline_bare_ninja_one_file_s": round(bare_median, 3),
            "baseline_bare_ninja_runs_s": [round(wall, 3) for wall, _ in bare],
            "overhead_s": round(overhead, 3),
            "target_overhead_s": TARGET_OVERHEAD_S,
            "met": overhead <= TARGET_OVERHEAD_S,
            "cycle_cpu_s": round(cpu_median, 3),
            "baseline_bare_ninja_cpu_s": round(bare_cpu_median, 3),
            "overhead_cpu_s": round(cpu_median - bare_cpu_median, 3),
            "cycle_to_clean_build_ratio": round(median / full_wall, 4),
            **compared,
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
    parser.add_argument(
        "--versus",
        type=Path,
        metavar="DIR",
        help="another workbench checkout, timed in the same workspace, interleaved",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 16 units at -O0, one cycle (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.units, args.cycles, args.optimization = 16, 1, "-O0"
    if args.versus is not None and not (args.versus / "workbench" / "cli" / "main.py").is_file():
        parser.error(f"--versus {args.versus}: not a checkout of the workbench")
    if args.units < 16:
        parser.error("the fixture series needs at least 16 translation units")
    tools = ("git", "cmake", "ninja", "g++", "nix", "bash")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        print(json.dumps({"skipped": f"missing {', '.join(missing)}"}))
        return 1
    result = run(
        args.units,
        max(1, args.cycles),
        args.jobs,
        args.optimization,
        args.keep,
        args.versus.resolve() if args.versus else None,
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
