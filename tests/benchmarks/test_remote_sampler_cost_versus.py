"""benchmarks/remote_sampler_cost.py's side-by-side harness (`--versus DIR`) measures the two
trees' daemon samplers on equal terms: fresh worker processes each round, which one starts
first alternating by round, both pinned to one CPU (they take turns: the same core, clock and
caches for each), the forks started beside the build killed and reaped before the next round
(this process is their subreaper: where init is slow to reap, they would linger as young root
processes that one sampler watches and the other may not), and the spread of the rounds'
ratios reported, not one median. Before, one pair of workers ran once, unpinned, the same one
always started first, and the killed forks were left to init.

Run here this tree against itself (an A/A comparison): the structure and the fairness
properties are checked, never a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="running as a Nix build user needs root"),
    needs("runuser", debian="util-linux"),
]

REPO = Path(__file__).resolve().parents[2]


def test_versus_runs_fresh_pinned_workers_each_round_and_reaps_the_forks(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "remote_sampler_cost.py"),
            "--quick",
            *("--versus", str(REPO)),  # two rounds in quick mode
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    document = json.loads(run.stdout)
    versus = document["versus"]
    rounds = versus["by_round"]
    assert [r["started_first"] for r in rounds] == ["this", "versus"]
    pin = versus["pin"]
    if len(os.sched_getaffinity(0)) > 1:
        assert pin["this"] == pin["versus"] != "none"
        for r in rounds:
            for phase in ("build", "with_others"):
                assert r[phase]["cpus_ran_on"] == {
                    "this": [int(pin["this"])],
                    "versus": [int(pin["versus"])],
                }
    for r in rounds:
        assert r["others_left_after_60s"] == 0  # every fork reaped before the next round
    for phase in ("build", "with_others"):
        summary = versus[phase]
        assert len(summary["ratios_by_round"]) == 2
        ratio = summary["this_over_versus"]
        assert ratio["min"] <= ratio["q1"] <= ratio["median"] <= ratio["q3"] <= ratio["max"]
    host = document["host"]
    assert host["schedstat"] is True and host["nofile_soft"] > 0
