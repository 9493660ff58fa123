"""A build started right after another of its tree ended: the ended build's supervisor keeps the
tree's lock until it has exited (it records the end first, then starts a push it claimed, tells
its keeper and exits), so `workbench run A && workbench run B` could be refused in between. The
new build waits a few seconds for a holder whose row has ended (`control.ENDED_HOLDER_WAIT_S`),
and is refused at once by one still running. Real CLI and supervisor; the exiting supervisor is
stood for by this test holding the tree's lock in the ended build's name."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from supervised import Bench, build_id_from

from workbench.planning.launch import build_trees
from workbench.supervision.lock import BuildLock


def test_a_build_waits_for_the_lock_of_one_that_has_ended(bench: Bench, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)
    done = bench.run("run", "--name", "first", "--", "true", cwd=tree)
    assert done.returncode == 0, done.stderr
    first = build_id_from(done.stderr)
    assert not bench.record(first).active
    # The first build's supervisor, still exiting: the lock held in its name a second longer.
    lock = BuildLock.acquire(bench.state, build_trees(["true"], tree))
    lock.describe(build_id=first, name="first", pid=os.getpid())
    threading.Timer(1.0, lock.release).start()
    began = time.monotonic()
    second = bench.run("run", "--name", "second", "--", "true", cwd=tree, timeout=60)
    assert second.returncode == 0, second.stderr
    assert time.monotonic() - began >= 0.9  # it waited for the lock, not around it
    assert build_id_from(second.stderr) != first


def test_a_build_still_running_refuses_at_once(bench: Bench, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)
    started = bench.run("run", "-d", "--name", "long", "--", "sleep", "60", cwd=tree)
    assert started.returncode == 0, started.stderr
    running = build_id_from(started.stderr)
    try:
        refused = bench.run("run", "--name", "second", "--", "true", cwd=tree, timeout=60)
        assert refused.returncode == 2, refused.stderr
        assert f"build #{running} (long) is already building" in refused.stderr
    finally:
        assert bench.run("stop", str(running), timeout=60).returncode == 0
