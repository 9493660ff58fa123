"""What a newcomer is told (issue 14), in the core: no-op runs do not feed the ETA, times read
naturally, commands are whole and shell-quoted in the report and on the build screen."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from recorded_builds import end, new_build

from workbench.history.records import EarlierRun
from workbench.history.store import History
from workbench.reading import report
from workbench.reading.build_text import head_lines
from workbench.supervision import live_eta
from workbench.tui.screens.variants.variants_screen import last_build_text
from workbench.tui.table_names import ago, took

NIX_ARGV = (
    "nix",
    "--extra-experimental-features",
    "nix-command flakes",
    "build",
    ".#onnxruntime-cpu",
    "-L",
    "--log-format",
    "internal-json",
    "--cores",
    "32",
    "--max-jobs",
    "1",
)


def test_a_no_op_rebuild_does_not_feed_the_eta() -> None:
    real = EarlierRun(1, 100.0, ((0.0, 0.0), (40.0, 0.5), (100.0, 1.0)))
    no_op = EarlierRun(2, 0.1, ())  # "ninja: no work to do"
    cached = EarlierRun(3, 0.8, ((0.0, 1.0),))  # complete from its first sample
    estimate = live_eta.estimate(elapsed_s=50.0, fraction=0.5, earlier=[real, no_op, cached])
    assert estimate is not None
    assert estimate.remaining_s == pytest.approx(60.0)  # from #1 alone, not a median with 0
    assert "#1" in estimate.basis and "#2" not in estimate.basis and "#3" not in estimate.basis
    # Only no-ops before: no ETA from them, the extrapolation speaks instead.
    alone = live_eta.estimate(elapsed_s=60.0, fraction=0.25, earlier=[no_op, cached])
    assert alone is not None and alone.basis == "extrapolated from progress so far"
    short_but_real = EarlierRun(4, 2.0, ((0.0, 0.0), (1.0, 0.5), (2.0, 1.0)))
    assert live_eta.did_work(short_but_real)


def test_relative_times_read_naturally() -> None:
    now = 1_767_258_000.0
    assert last_build_text("failed", now - 30, 20.0, now) == "failed 20s, just now"
    assert last_build_text("succeeded", now - 2 * 3600, 12 * 60, now) == "ok 12m, 2h ago"
    assert last_build_text("failed", now - 30 * 3600, 0.1, now) == "failed 0.1s, yesterday"
    assert last_build_text("succeeded", now - 5 * 86400, 7300, now) == "ok 2h02m, 5d ago"
    assert last_build_text("running", None, None, now) == "running"
    assert (ago(59), ago(61), took(None)) == ("just now", "1m ago", "-")


def test_the_report_shows_each_command_whole_and_shell_quoted(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        record = history.create(new_build("cpu", backend="nix", argv=NIX_ARGV, cwd="/s"))
        end(history, record.id, duration_s=10.0)
        text = report.markdown([report.load(history, record.id)])
    assert shlex.join(NIX_ARGV) in text
    assert "'nix-command flakes'" in text


def test_the_build_screen_title_quotes_the_command(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        record = history.create(new_build("cpu", backend="nix", argv=NIX_ARGV, cwd="/s"))
    title, _ = head_lines(record)
    assert title.endswith(shlex.join(NIX_ARGV))
    assert shlex.split(title.split("nix: ", 1)[1]) == list(NIX_ARGV)  # pastes back as it ran
