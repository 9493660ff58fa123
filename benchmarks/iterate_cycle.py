"""An iterate cycle after a one-file change against a clean full build, in the same run. JSON.

On the fixture (tests/patch_fixture.py: the sample project, 36 translation units with one
heavy, and its patch series against it; configs copied from the repository's, so -O2 and the
"auto" ninja jobs as shipped):

1. clean full build: `workbench iterate cpu --source SRC` with an empty state directory: the
   workspace copied and committed, the series applied as commits, cmake, the whole ninja build
   under the supervisor, the summary. Timed from spawn to exit.
2. cycles: one light translation unit edited in the workspace, then `workbench iterate cpu`;
   `--cycles` times, each a different file; the median is the figure.
3. baseline in the same run: the same one-file change built by bare `ninja -C build` (no
   workbench): the floor any cycle has to pay.

Target: cycle / full build <= 10%. The breakdown of the median cycle comes from the command's
own `--json` timings: interpreter start and argument parsing (wall minus the command's total),
configs, workspace (git), launch (supervisor start until the build runs, plus the end of it
being noticed), the build as the supervisor measured it, and the rest (summary, JSON).

Run: python benchmarks/iterate_cycle.py [--units 36] [--cycles 5] [--keep DIR]
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

from patch_fixture import write_fixture_series, write_fixture_source  # noqa: E402

TARGET_RATIO = 0.10


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: bytecode cached
    env.pop("WORKBENCH_STATE_DIR", None)
    return env


def _iterate(configs: Path, state: Path, *extra: str) -> tuple[float, dict]:
    argv = [
        sys.executable,
        "-m",
        "workbench",
        "--config",
        str(configs),
        "--state-dir",
        str(state),
        "iterate",
        "cpu",
        "--json",
        *extra,
    ]
    began = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"workbench iterate failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return wall, json.loads(done.stdout)


def _edit(path: Path, counter: int) -> None:
    text = path.read_text()
    path.write_text(
        text.replace("int digits", f"int unused_{counter} = {counter};\n    int digits")
    )


def _breakdown(wall: float, document: dict) -> dict[str, float]:
    timings = document["timings"]
    build = timings["build_s"]
    launch = timings["launch_and_follow_s"] - build
    inside = timings["total_s"]
    known = timings.get("configs", 0) + timings.get("workspace", 0) + timings["launch_and_follow_s"]
    return {
        "interpreter_and_parser_s": round(wall - inside, 3),
        "configs_s": timings.get("configs", 0.0),
        "workspace_git_s": timings.get("workspace", 0.0),
        "cmake_s": timings.get("configure", 0.0),
        "supervisor_start_and_end_s": round(launch, 3),
        "ninja_under_supervisor_s": build,
        "rest_s": round(inside - known, 3),
    }


def run(units: int, cycles: int, keep: Path | None) -> dict:
    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="workbench-iterate-bench-"))
    try:
        configs = root / "configs"
        shutil.copytree(REPO / "configs", configs)
        (root / "patches").mkdir()
        source = root / "source"
        write_fixture_source(source, units=units)
        write_fixture_series(configs, source)
        state = root / "state"

        full_wall, full = _iterate(configs, state, "--source", str(source))
        assert len(full["ninja"]["sources"]) == units + 1, full["ninja"]
        workspace = Path(full["workspace"]["src"])
        build = Path(full["workspace"]["build"])

        measured = []
        for cycle in range(cycles):
            unit = workspace / f"light_{1 + (cycle % (units - 1))}.cc"
            _edit(unit, cycle)
            wall, document = _iterate(configs, state)
            assert document["ninja"]["sources"] == [unit.name], document["ninja"]
            measured.append((wall, document))

        bare = []
        for cycle in range(cycles):
            _edit(workspace / f"light_{1 + (cycle % (units - 1))}.cc", 100 + cycle)
            began = time.monotonic()
            subprocess.run(["ninja", "-C", str(build)], capture_output=True, check=True)
            bare.append(time.monotonic() - began)
        walls = [wall for wall, _ in measured]
        median = statistics.median(walls)
        middle = min(measured, key=lambda pair: abs(pair[0] - median))
        ratio = median / full_wall
        return {
            "fixture": {
                "units": units,
                "heavy_units": 1,
                "patches": [patch["name"] for patch in full["patches"]],
                "jobs": _jobs(state, full["build"]["id"]),
                "optimization": "configs/settings.toml as shipped",
            },
            "host": {
                "cpus": os.cpu_count(),
                # Other work on the host slows both builds; this says how busy it was.
                "load_average_before": [round(value, 2) for value in load_before],
                "load_average_after": [round(value, 2) for value in os.getloadavg()],
            },
            "full_build_s": round(full_wall, 3),
            "full_build_breakdown": _breakdown(full_wall, full),
            "cycle_s": round(median, 3),
            "cycles_s": [round(wall, 3) for wall in walls],
            "cycle_breakdown": _breakdown(*middle),
            "cycle_compiled": middle[1]["ninja"]["sources"],
            "baseline_bare_ninja_one_file_s": round(statistics.median(bare), 3),
            "baseline_ratio": round(statistics.median(bare) / full_wall, 4),
            "ratio": round(ratio, 4),
            "target_ratio": TARGET_RATIO,
            "met": ratio <= TARGET_RATIO,
        }
    finally:
        if keep:
            shutil.copytree(root, keep, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)


def _jobs(state: Path, build_id: int) -> int | None:
    from workbench.supervision.history import History

    with History(state) as history:
        return history.get(build_id).jobs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=36, help="translation units (36+)")
    parser.add_argument("--cycles", type=int, default=5, help="one-file cycles measured")
    parser.add_argument("--keep", type=Path, help="copy the workspace and state here")
    args = parser.parse_args()
    if args.units < 36:
        parser.error("the fixture has at least 36 translation units")
    missing = [tool for tool in ("git", "cmake", "ninja", "g++") if shutil.which(tool) is None]
    if missing:
        print(json.dumps({"skipped": f"missing {', '.join(missing)}"}))
        return 1
    print(json.dumps(run(args.units, max(1, args.cycles), args.keep), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
