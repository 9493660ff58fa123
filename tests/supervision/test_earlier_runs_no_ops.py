"""No-op rebuilds and the ETA (issue 14): `ninja: no work to do` runs, as an iterate loop's
unchanged cycles leave them, are passed over before the latest few earlier runs are counted, so
they never push the real build out of the ETA. Real ninja under the real supervisor."""

from __future__ import annotations

from pathlib import Path

from needed_tools import needs_ninja
from supervised import Bench

from workbench.history.records import NO_OP_S
from workbench.supervision import live_eta

pytestmark = needs_ninja


def test_five_no_op_rebuilds_leave_the_real_build_in_the_eta(bench: Bench, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # Two edges of 3 s each at -j1: a real build of 6 s, longer than any no-op could take.
    (work / "build.ninja").write_text(
        "rule nap\n  command = sleep 3 && : > $out\nbuild a: nap\nbuild b: nap\n"
    )
    built = []
    for _ in range(6):  # the real build, then five with nothing to do (same command)
        done = bench.run("run", "--", "ninja", "-C", str(work), "-j1", cwd=work)
        assert done.returncode == 0, done.stderr
        built.append(bench.latest_id())
    real, no_ops = built[0], built[1:]
    assert bench.record(real).duration_s >= NO_OP_S
    assert all(bench.record(n).duration_s < NO_OP_S for n in no_ops)
    with bench.history() as history:
        key = bench.record(real).eta_key
        assert all(bench.record(n).eta_key == key for n in no_ops)
        # What the next build with this key is given: the real build, not five no-ops.
        runs = history.earlier_runs(key, built[-1] + 1)
    assert [run.build_id for run in runs] == [real]
    estimate = live_eta.estimate(elapsed_s=3.0, fraction=0.5, earlier=runs)
    assert estimate is not None and estimate.basis.startswith(f"earlier builds #{real} ")
