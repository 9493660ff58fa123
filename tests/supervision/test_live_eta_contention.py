"""Host contention is an input of the ETA: the pace so far was kept while other builds took
what they took on average; when they take more (or less) now, the rest of the build goes
slower (or faster), and the ETA says so."""

from __future__ import annotations

from pathlib import Path

from workbench.progress.live_view import Contention
from workbench.supervision.live_eta import CONTENTION_MIN_SAMPLES, Eta, LiveEta


def _first_build(jobs: int | None = 2) -> LiveEta:
    # 20 compiles of 60 s done in 600 s at -j2 on a quiet host; 20 more left: ~600 s.
    live = LiveEta(None, 1, jobs=jobs)
    live.learn("ninja:tree")
    live.plan([(f"CMakeFiles/t.dir/t{n}.cc.o", "CXX_COMPILER__t_Release") for n in range(40)])
    assert live.pace is not None
    live.pace.add((f"CMakeFiles/t.dir/t{n}.cc.o", 60.0, 30.0 * (n + 1)) for n in range(20))
    return live


def _contention(now: float, mean: float, samples: int) -> Contention:
    return Contention(now, mean, 3, "3 other build processes: 3 cc1plus", samples)


def test_other_builds_taking_cores_now_stretch_the_rest() -> None:
    quiet = _first_build()
    before = quiet.estimate_at(600.0, 0.5, (20, 40))
    assert before is not None and 500 < before.remaining_s < 700, before
    busy = _first_build()
    # 600 quiet seconds, then another build takes 1.5 of the 2 cores for the last 60 s: the
    # mean over the build's life is 0.15 cores, the recent figure follows the 1.5.
    for t in range(600):
        busy.observe(1000.0 + t, 2, _contention(0.0, 0.0, t + 1))
    for t in range(600, 660):
        mean = 1.5 * (t - 599) / (t + 1)
        busy.observe(1000.0 + t, 2, _contention(1.5, mean, t + 1))
    after = busy.estimate_at(600.0, 0.5, (20, 40))
    assert after is not None
    # 2 cores against about 0.55 now: the rest at most 3x as long; the range spans both.
    assert after.remaining_s > 2.0 * before.remaining_s, (before, after)
    assert after.low_s is not None and after.high_s is not None
    assert after.low_s <= before.low_s  # it may go back to the quiet pace
    assert after.high_s >= after.remaining_s
    assert "other builds now take" in after.basis and "of 2 cores" in after.basis
    # ...and the other build ending makes it shorter again.
    for t in range(660, 900):
        busy.observe(1000.0 + t, 2, _contention(0.0, 0.3, t + 1))
    eased = busy.estimate_at(600.0, 0.5, (20, 40))
    assert eased is not None and eased.remaining_s < before.remaining_s


def test_contention_keeps_a_range_with_no_upper_end_open() -> None:
    """A Nix builder's ninja with what follows it not counted has no upper end; the host's
    contention scales its figure and its low, and leaves it open (it had closed it at the
    figure itself, a range the fixup and the derivations after it then went past)."""
    busy = _first_build()
    for t in range(600):
        busy.observe(1000.0 + t, 2, _contention(0.0, 0.0, t + 1))
    for t in range(600, 660):
        busy.observe(1000.0 + t, 2, _contention(1.5, 1.5 * (t - 599) / (t + 1), t + 1))
    assert busy.host.factor() is not None
    open_above = busy.host.apply(Eta(100.0, "ninja (its install and fixup not counted)", 50.0))
    assert open_above.remaining_s > 100.0 and open_above.low_s == 50.0
    assert open_above.high_s is None
    # A figure with no range at all still gets one that spans both paces.
    bare = busy.host.apply(Eta(100.0, "by progress"))
    assert bare.low_s == 100.0 and bare.high_s == bare.remaining_s > 100.0


def test_steady_or_unmeasured_contention_changes_nothing() -> None:
    plain = _first_build().estimate_at(600.0, 0.5, (20, 40))
    steady = _first_build()
    for t in range(120):
        steady.observe(1000.0 + t, 2, _contention(1.0, 1.0, t + 1))
    said = steady.estimate_at(600.0, 0.5, (20, 40))
    assert plain is not None and said == plain
    few = _first_build()
    for t in range(CONTENTION_MIN_SAMPLES - 1):
        few.observe(1000.0 + t, 2, _contention(1.9, 0.0, t + 1))
    assert few.estimate_at(600.0, 0.5, (20, 40)) == plain
    # One job on an 8-core host: others taking 5 cores leave it its core (demand, not cpus).
    one_job = _first_build(jobs=1)
    for t in range(60):
        one_job.observe(1000.0 + t, 8, _contention(5.0 if t > 30 else 0.0, 0.5, t + 1))
    assert one_job.estimate_at(600.0, 0.5, (20, 40)) == plain


def test_the_contention_the_live_view_records_is_what_the_eta_reads() -> None:
    """The supervisor's `LiveWriter` measures other builds' CPU (host busy ticks less the
    build's own) for the report's advice and the build screen; each sample's view is handed
    to the ETA (`LiveEta.observe`, as the supervisor's `_live` does). A host that fills up
    halfway stretches the ETA by that figure."""
    from workbench.monitor.sampler import BuildSample, Sample
    from workbench.supervision.live_writer import LiveWriter

    busy = {"busy": 0, "total": 0}
    share = {"host": 1.0, "build": 2.0}  # the host's busy share (full); the build's cores

    def ticks() -> tuple[int, int]:
        return busy["busy"], busy["total"]

    writer = LiveWriter(census=lambda own: (1, "1 other build process: 1 cc1plus"), ticks=ticks)
    live = _first_build()
    calm = _first_build()
    calm.running = ()  # sampled, nothing running: as the views below say
    quiet = calm.estimate_at(600.0, 0.5, (20, 40))
    for second in range(1, 660):
        if second == 600:  # another build starts: it takes 1.5 of the 2 cores
            share["build"] = 0.5
        busy["total"] += 200
        busy["busy"] += int(200 * share["host"])
        cores = share["build"]
        build = BuildSample(
            t=1000.0 + second,
            interval=1.0,
            processes=3,
            cpus=2,
            cpu_percent=50.0 * cores,
            cpu_cores=cores,
            cpu_seconds=float(second),
            rss=1 << 30,
            memory_available=4 << 30,
            memory_total=8 << 30,
            compile_jobs=2,
            cuda_jobs=0,
            link_jobs=0,
        )
        view = writer.view(Sample(build, ()), None, {})
        live.observe(view.t or 0.0, view.cpus, view.other, view.running)
    assert view.other is not None and view.other.cpu_cores == 1.5
    loaded = live.estimate_at(600.0, 0.5, (20, 40))
    assert quiet is not None and loaded is not None
    assert loaded.remaining_s > 2.0 * quiet.remaining_s, (quiet, loaded)
    assert "other builds now take" in loaded.basis


def test_a_replay_reads_the_contention_kept_beside_a_recorded_run(tmp_path: Path) -> None:
    """benchmarks/eta_accuracy.py scores the contention input on recorded runs: the replay
    feeds the ETA the live view's contention second by second, as the supervisor did, and
    nothing after the moment it plays (before the other load came, both say the same)."""
    from recorded_builds import end, new_build, running_build

    from workbench.history.records import EdgeRow
    from workbench.history.store import History
    from workbench.supervision.live_eta import Replay

    start = 1_000_000.0
    with History(tmp_path) as history:
        plan = new_build("t", argv=("ninja",), cwd="/", eta_key="t")
        record = running_build(history, plan, started=start, created=start)
        rows = [
            EdgeRow((f"CMakeFiles/t.dir/t{n}.cc.o",), start + 15 * n, start + 15 * n + 30, 0, "0")
            for n in range(40)
        ]
        history.record_edges(record.id, None, rows, "ninja:t")
        progress = {"step": {"tool": "ninja", "done": 40, "total": 40}, "fraction": 1.0}
        end(history, record.id, ended=start + 615, duration_s=615.0, lines=0, progress=progress)
        # Quiet for 240 s, then other processes take 1.5 of the 2 cores.
        seen = [(float(t), 0.0, 0.0, t + 1) for t in range(240)]
        seen += [(float(t), 1.5, 1.5 * (t - 239) / (t + 1), t + 1) for t in range(240, 600)]
        kept = Replay.of(history, record.id, (2, seen), jobs=2)
        plain = Replay.of(history, record.id)
        early_kept, early_plain = kept.learned(200.0), plain.learned(200.0)
        late_kept, late_plain = kept.learned(300.0), plain.learned(300.0)
    assert early_kept == early_plain
    assert late_kept is not None and late_plain is not None
    assert late_kept.remaining_s > 1.5 * late_plain.remaining_s, (late_kept, late_plain)
    assert "other builds now take" in late_kept.basis
