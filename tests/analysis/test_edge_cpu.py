"""CPU seconds per edge: a real ninja build of the sample project (real g++), sampled by the
real Sampler; each compile job's CPU (its processes' own, as /proc says) is matched to the exact
edge from `.ninja_log` that compiled the same source."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from monitor.cxx_project import needs_cxx_tools, started

from workbench.analysis.build_peaks import PeakTracker
from workbench.analysis.edges import assemble
from workbench.analysis.ninja_log import read_all
from workbench.analysis.recorder import SampledJob, match_cpu, match_peaks
from workbench.monitor import Sampler

pytestmark = needs_cxx_tools
INTERVAL = 0.2


def test_sampled_cpu_seconds_reach_the_edges_that_compiled_the_source(
    cxx_project: tuple[Path, Path],
) -> None:
    _, build = cxx_project
    peaks = PeakTracker()
    ninja_started = None
    argv = ["ninja", "-C", str(build), "-j2"]
    with started(argv, stdout=subprocess.DEVNULL) as ninja, Sampler(ninja.pid) as sampler:
        while ninja.poll() is None:
            sample = sampler.sample()
            peaks.add(sample)
            for process in sample.processes:
                if process.pid == ninja.pid:
                    ninja_started = process.started
            time.sleep(INTERVAL)
        build_cpu = sampler.cpu_seconds
    assert ninja.returncode == 0 and ninja_started is not None
    summary = peaks.summary()
    compiles = [job for job in summary.jobs if job.kind == "compiler"]
    assert compiles and all(job.cpu_seconds >= 0 for job in compiles)
    # The jobs' CPU is part of the build's: never more than the sampler saw in all.
    assert sum(job.cpu_seconds for job in summary.jobs) <= build_cpu + 0.05
    jobs = [
        SampledJob(job.file, job.started, job.seconds, job.peak_rss, job.cpu_seconds)
        for job in compiles
    ]
    edges = assemble(read_all(build / ".ninja_log"))
    cpu = match_cpu(edges, jobs, ninja_started)
    rss = match_peaks(edges, jobs, ninja_started)
    assert set(cpu) == set(rss)  # one match gives both
    by_output = {edge.output: edge for edge in edges}
    heavy = [output for output in cpu if "heavy_" in output]
    assert heavy, cpu  # the heavy units run for seconds: every sampler sees them
    for output, seconds in cpu.items():
        edge = by_output[output]
        # g++ runs cc1plus then as, one after the other, one thread each: its CPU fits in the
        # edge's exact wall time (a tick of slack for /proc's 10 ms clock).
        assert 0.0 <= seconds <= edge.duration_s + 0.02, (output, seconds, edge.duration_s)
    for output in heavy:
        assert cpu[output] > 0.1, (output, cpu[output], by_output[output].duration_s)
