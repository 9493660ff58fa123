"""The memory-bound CUDA build recorded on the real H100 host, checked again without a GPU
(issue 16, item 7).

benchmarks/gpu_memory_bound.py built a CUDA project whose units each take ~0.7 GiB in nvcc's
tools, inside a cgroup v2 memory limit of three such units, with `-j16`: the OOM killer struck
and the supervisor named it from the cgroup's own numbers; `ninja_jobs = "auto"` then chose the
jobs from that run's largest job and the cgroup's limit, and that build completed in the same
cgroup. These tests read that record, and ask today's recommendation for the same inputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import load_settings
from workbench.host.parallelism import JobMemory
from workbench.planning.tuning import choose_jobs

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "benchmarks" / "results" / "h100-x1-memory-bound.json"
GIB = 1024**3


def _record() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def test_the_host_and_the_calibration_are_recorded() -> None:
    record = _record()
    assert "H100" in record["machine"]["nvidia_smi"]
    calibration = record["calibration"]["build"]
    assert calibration["state"] == "succeeded"
    (job,) = calibration["slowest"]
    assert job["tool"] == "nvcc" and job["file"].endswith("table_0.cu")
    assert record["unit_peak_rss"] == job["peak_rss"] > 0.5 * GIB
    assert record["cgroup"]["limit"] == int(3 * record["unit_peak_rss"])


def test_minus_j16_is_killed_by_the_cgroups_oom_killer_and_named_with_its_numbers() -> None:
    record = _record()
    limit, directory = record["cgroup"]["limit"], record["cgroup"]["directory"]
    run = record["oom_run"]
    assert "-j16" in run["argv"] and run["exit"] == 137
    build = run["build"]
    assert build["state"] == "killed"
    # More units compiled together than the limit holds: the sampler saw it happen.
    assert build["most_jobs"] * record["unit_peak_rss"] > limit
    note = build["note"]
    said = re.match(
        r"killed \(OOM\) while compiling (table_\d+\.cu[^;]*); (\d+) jobs x ([\d.]+) G\w+ peak = "
        r"([\d.]+) G\w+ > the ([\d.]+) G\w+ limit of memory cgroup (\S+) \(v2\); "
        r"the OOM killer killed (\d+) process",
        note,
    )
    assert said, note
    assert float(said.group(5)) == round(limit / GIB, 2)
    assert said.group(6) == directory
    killed = int(said.group(7))
    events = dict(line.split() for line in record["cgroup"]["after"].splitlines())
    assert killed > 0 and int(events["oom_kill"]) >= killed


def test_auto_chooses_jobs_that_fit_the_limit_and_that_build_completes() -> None:
    record = _record()
    limit = record["cgroup"]["limit"]
    auto = record["auto"]
    assert auto["ninja_jobs"] == "auto"
    assert auto["source"].startswith(f"measured: build #{record['oom_run']['build']['id']} ")
    assert 1 <= auto["jobs"] < record["units"]
    assert auto["jobs"] * auto["per_job_gb"] * GIB <= limit
    done = record["auto_run"]
    assert f"-j{auto['jobs']}" in done["argv"] and done["exit"] == 0
    assert done["build"]["state"] == "succeeded"
    assert done["build"]["most_jobs"] <= auto["jobs"]
    assert done["build"]["peak_rss"] <= limit
    assert len(done["build"]["slowest"]) == record["units"]  # every unit compiled


def test_todays_recommendation_for_the_recorded_inputs_is_the_same() -> None:
    """The same per-job figure, the host's 16 cores and the cgroup's room (at most its limit):
    the recommendation the code makes now is the one that completed there."""
    record = _record()
    settings = load_settings(REPO / "configs", load_matrix(REPO / "configs"))
    job_memory = JobMemory(record["auto"]["per_job_gb"], record["auto"]["source"])
    for room in (record["cgroup"]["limit"], int(record["cgroup"]["limit"] * 0.9)):
        choice = choose_jobs(settings, None, job_memory, 16, room, True)
        assert choice.jobs == record["auto"]["jobs"], choice
        assert "limited by memory" in choice.source
