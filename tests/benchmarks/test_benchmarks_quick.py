"""Every benchmark under benchmarks/ runs in its quick mode and prints its JSON.

The figures are not judged here (a loaded 2-core CI machine says nothing about them): what is
checked is that the script still runs against today's product, so that a benchmark can no longer
break unseen (issue 23: tui_log_growth.py had stopped running when memory figures became
"1.0Gi"). Each case runs the script as a user would, with `--quick`, in a temporary directory
for anything it writes, and parses the JSON it prints (the last JSON document on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"


def _needs(*tools: str) -> pytest.MarkDecorator:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups, nixbld users)")

# name -> (extra arguments, marks); {tmp} is the test's temporary directory.
CASES: dict[str, tuple[list[str], list[pytest.MarkDecorator]]] = {
    "bt_end_to_end.py": ([], [pytest.mark.slow, _needs("gdb", "g++")]),
    "build_screen_poll.py": ([], []),
    "eta_accuracy.py": (
        [],
        [pytest.mark.slow, pytest.mark.timeout(900), _needs("cmake", "ninja", "g++", "taskset")],
    ),
    "gdb_capture.py": ([], [pytest.mark.slow, _needs("gdb", "g++")]),
    "gpu_host.py": (
        ["--out-dir", "{tmp}", "--name", "quick", "--skip", "gdb", "cuda", "--jobs", "1,2"],
        [pytest.mark.slow, pytest.mark.timeout(900), _needs("cmake", "ninja", "g++")],
    ),
    "gpu_memory_bound.py": (
        ["--out-dir", "{tmp}", "--name", "quick"],
        [pytest.mark.slow, _root, _needs("nvcc", "cmake", "ninja")],
    ),
    "history_store.py": (["--pin"], [_needs("taskset")]),
    "iterate_cycle.py": ([], [pytest.mark.slow, _needs("git", "cmake", "ninja", "g++", "nix")]),
    "log_pipeline.py": ([], []),
    "logs_readable.py": ([], [pytest.mark.slow]),
    "ninja_log.py": ([], []),
    "remote_sampler_cost.py": ([], [_root, _needs("runuser")]),
    "sampler_cost.py": ([], [_needs("top")]),
    "startup.py": ([], [pytest.mark.slow]),
    "tui_log_growth.py": ([], [pytest.mark.slow]),
    "tui_terminal_cost.py": ([], [pytest.mark.slow, _needs("cmake", "ninja", "g++")]),
}


# Modules under benchmarks/ that are not benchmarks of their own, and the test that runs them.
HELPERS = {
    # The recordings' loader (and exporter) that `eta_accuracy.py --recordings` reads.
    "eta_recordings.py": "test_eta_accuracy_scores_the_recorded_third_party_builds",
}


def test_every_benchmark_has_a_case() -> None:
    scripts = {path.name for path in BENCHMARKS.glob("*.py")} - set(HELPERS)
    assert scripts == set(CASES), "a benchmark without a quick-mode case (or a stale case)"
    assert all(name in globals() for name in HELPERS.values()), "a helper's test is gone"


@pytest.mark.slow  # 20-30 s on the 2-core VM: every recording replayed in each section
def test_eta_accuracy_scores_the_recorded_third_party_builds(tmp_path: Path) -> None:
    """The recorded real builds (benchmarks/data/eta_runs/) load and are scored: coverage of
    the ETA's range and the point error at 25/50/75 %, per run."""
    document = _run([sys.executable, str(BENCHMARKS / "eta_accuracy.py"), "--recordings"], tmp_path)
    assert "eta_accuracy --recordings" in json.dumps(document), document
    # Per condition: every checkpoint is a first build's or a rebuild's, under one load.
    conditions = document["by_condition"]
    assert isinstance(conditions, dict)
    assert (
        conditions["first builds"]["checkpoints"] + conditions["rebuilds"]["checkpoints"]
        == conditions["all"]["checkpoints"]
        == document["all"]["checkpoints"]  # type: ignore[index]
    )
    assert "| first builds |" in str(document["conditions_table"])
    # By how long each run took: every checkpoint in one bin.
    lengths = [c for name, c in conditions.items() if name.startswith("all runs ")]
    assert len(lengths) == 3 and "all runs of 2 min or more" in conditions
    assert sum(c["checkpoints"] for c in lengths) == conditions["all"]["checkpoints"]
    # The second of each pair of releases recorded on one host is played with the first in its
    # history: its first build is one "after an earlier release", the others' have nothing.
    after = conditions["first builds, an earlier release built before on this host"]
    alone = conditions["first builds, nothing to learn from"]
    seconds = sum(1 for p in BENCHMARKS.glob("data/eta_runs/*-after-earlier-release.json"))
    assert seconds > 0 and after["checkpoints"] == 3 * seconds
    assert after["checkpoints"] + alone["checkpoints"] == conditions["first builds"]["checkpoints"]
    # The recordings that keep their ninja graph, scheduled with each edge's true seconds,
    # give the time left ninja took (the graph and the costs say it all).
    scheduled = document["scheduled_with_the_graph"]
    assert isinstance(scheduled, dict) and scheduled["checkpoints"] > 0
    assert scheduled["true_costs_scheduled_median_abs_error"] < 0.05, scheduled
    # The sampled schedule against the shipped estimate: every checkpoint in its set's rows,
    # first builds and rebuilds adding up; rebuilds rest on earlier runs, both say the same.
    sampled = document["sampled_schedule"]["by_set"]  # type: ignore[index]
    assert sampled["all, both"]["checkpoints"] == document["all"]["checkpoints"]  # type: ignore[index]
    assert (
        sum(
            sampled[f"{group}, both"]["checkpoints"]
            for group in ("VM, earlier six", "VM, later", "H100 host")
        )
        == sampled["all, both"]["checkpoints"]
    )
    assert sampled["all, rebuilds"]["shipped"] == sampled["all, rebuilds"]["sampled"]
    # The censored fit against the shipped estimate: its sets add up to every checkpoint, its
    # "shipped" is the conditions table's, its weight was chosen on the earlier six; with every
    # edge not started at its true cost the first builds' error falls below the shipped one's
    # (where the error is: the costs of the edges not started).
    fitted = document["censored_fit"]  # type: ignore[index]
    by_set = fitted["by_set"]
    assert by_set["all, all runs"]["checkpoints"] == document["all"]["checkpoints"]  # type: ignore[index]
    assert (
        sum(
            by_set[f"{group}, all runs"]["checkpoints"]
            for group in ("VM, earlier six", "VM, later", "H100 host")
        )
        == by_set["all, all runs"]["checkpoints"]
    )
    shipped = by_set["all, all runs"]["shipped"]
    assert shipped["median_abs_error"] == document["all"]["median_abs_error"]  # type: ignore[index]
    assert shipped["coverage"] == document["all"]["coverage"]  # type: ignore[index]
    weight = fitted["constants"]["weight_chosen_on_the_earlier_six"]
    assert weight in fitted["constants"]["weights_tried"]
    first = by_set["all, first builds"]
    assert (
        first[f"true costs not started, weight {weight}"]["median_abs_error"]
        < first["shipped"]["median_abs_error"]
    )
    # The rebuilds replayed with each rule of trusting their own pace: the shipped rule's are
    # the conditions table's rebuilds.
    trust = document["pace_trust"]  # type: ignore[index]
    rebuilds = trust["rebuilds"][trust["shipped"]]["all"]
    assert rebuilds == conditions["rebuilds"]
    chosen = trust["evidence_chosen_on_the_earlier_six"]
    assert trust["rebuilds"][f"share done, or evidence beyond {chosen:g}"]["all"] == rebuilds
    # The units' bytes as a prior (every recording keeps its tree's): every first build's
    # checkpoint in its set's rows, "shipped" the conditions table's first builds.
    sized = document["source_size_prior"]  # type: ignore[index]
    assert sized["by_set"]["all"]["checkpoints"] == conditions["first builds"]["checkpoints"]
    assert sized["by_set"]["all"]["checkpoints"] == sum(
        sized["by_set"][group]["checkpoints"]
        for group in ("VM, earlier six", "VM, later", "H100 host")
    )
    assert (
        sized["by_set"]["all"]["shipped"]["median_abs_error"]
        == (conditions["first builds"]["median_abs_error"])
    )
    assert sized["ridge_chosen_on_the_earlier_six"] in sized["ridges_tried"]
    # Another tree of the same sources in the history: every pairing in its set's rows, the
    # shipped figures those of first builds with nothing to learn from (each a first build's).
    other = document["other_tree_prior"]["by_set"]  # type: ignore[index]
    assert other["all"]["pairings_x_checkpoints"] == sum(
        other[group]["pairings_x_checkpoints"]
        for group in ("VM, earlier six", "VM, later", "H100 host")
    )
    assert 0 < other["all"]["first_builds"] <= conditions["first builds"]["checkpoints"] // 3
    # A rebuild played as the first run of its tree under workbench, the tree's .ninja_log
    # holding the run before: every such checkpoint learned from the log, and the same runs
    # with their history are the conditions table's rebuilds.
    own = document["own_log_prior"]  # type: ignore[index]
    assert own["runs"] > 0
    assert own["checkpoints_whose_eta_learned_from_the_log"] == 3 * own["runs"]
    assert own["history of the tree"]["checkpoints"] == 3 * own["runs"]
    assert own["own .ninja_log"]["with_eta"] == 3 * own["runs"]


def _last_json(text: str) -> object:
    """The last complete JSON document in the output (some print progress lines first)."""
    decoder = json.JSONDecoder()
    for start in reversed(
        [i for i, c in enumerate(text) if c == "{" and (i == 0 or text[i - 1] == "\n")]
    ):
        try:
            document, _end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        return document
    raise AssertionError(f"no JSON document in the output:\n{text[-2000:]}")


def _run(argv: list[str], tmp_path: Path, **extra_env: str) -> dict[str, object]:
    env = {**os.environ, "TMPDIR": str(tmp_path), **extra_env}
    for name in ("COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_DRIVER"):
        env.pop(name, None)
    done = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=900, check=False
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stderr[-4000:]}"
    document = _last_json(done.stdout)
    assert isinstance(document, dict) and document, done.stdout[-2000:]
    return document


@pytest.mark.parametrize(
    "script", [pytest.param(name, marks=marks) for name, (_args, marks) in sorted(CASES.items())]
)
def test_quick_mode_runs_and_prints_json(script: str, tmp_path: Path) -> None:
    extra = [arg.format(tmp=tmp_path) for arg in CASES[script][0]]
    _run([sys.executable, str(BENCHMARKS / script), "--quick", *extra], tmp_path)


@pytest.mark.slow
@_needs("gdb", "g++")
def test_installed_bt_benchmark_runs_quick(tmp_path: Path) -> None:
    """The shell wrapper lays out an install; pygdbmi comes from this environment's path."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    import pygdbmi

    site = str(Path(pygdbmi.__file__).parent.parent)
    argv = ["bash", str(BENCHMARKS / "bt_end_to_end_installed.sh"), str(wheels), "--quick"]
    document = _run(argv, tmp_path, PYTHONPATH=site, PYTHON=sys.executable)
    assert document["cases"], document
