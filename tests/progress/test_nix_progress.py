"""Nix internal-json: recorded stderr of real builds, then live builds with Debian's nix-bin."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import NIX_CONFIG

from workbench.progress import (
    NixMessage,
    NixResult,
    NixStart,
    NixStop,
    ProgressTracker,
    Step,
    derivation_name,
    parse_nix_line,
)

FIXTURES = Path(__file__).parent / "fixtures"
NIX_EXPRESSION = FIXTURES / "three-derivations.nix"

needs_nix = needs("nix-build", debian="nix-bin")


def _fold(lines: list[str]) -> tuple[ProgressTracker, list[str | None]]:
    """Feed every line; the shown lines as `nix build -L` prints them ("name> text")."""
    tracker = ProgressTracker()
    shown: list[str | None] = []
    for line in lines:
        tracker.feed(line)
        text = tracker.render_line(line)
        shown.append(text)
        if text is not None:
            assert tracker.last_line == text
    return tracker, shown


def _check_failed_build(tracker: ProgressTracker, shown: list[str | None]) -> None:
    progress = tracker.snapshot()
    assert progress.nix
    assert (progress.planned, progress.done, progress.failed, progress.running) == (3, 2, 1, 0)
    assert progress.failed_derivations == ("wb-fixture-c",)
    assert progress.derivations == ()
    assert tracker.planned_derivations() and all(
        path.endswith(".drv") for path in tracker.planned_derivations()
    )
    assert set(tracker.derivation_names()) == {"wb-fixture-a", "wb-fixture-b", "wb-fixture-c"}
    finished = {record.name: record.failed for record in tracker.finished()}
    assert finished == {"wb-fixture-a": False, "wb-fixture-b": False, "wb-fixture-c": True}
    # Builder lines come through like `nix build -L` shows them.
    assert "wb-fixture-a> [3/3] Linking CXX static library liba.a" in shown
    assert "wb-fixture-b> [100%] Linking CXX executable b" in shown
    assert "wb-fixture-c> c.cc:1:1: error: expected unqualified-id" in shown
    assert progress.step == Step("ninja", 1, 2, "Building CXX object CMakeFiles/c.dir/c.cc.o")
    assert progress.step_failures == ("CMakeFiles/c.dir/c.cc.o",)
    assert progress.last_line.startswith("error: builder for '/nix/store/")
    assert "\x1b" not in "".join(line for line in shown if line)


def test_recorded_failed_nix_build() -> None:
    lines = (FIXTURES / "nix-build-fail.stderr").read_text().splitlines()
    tracker, shown = _fold(lines)
    _check_failed_build(tracker, shown)


def test_recorded_nix_build_running_state() -> None:
    """Part way through: one derivation running, with its phase and its ninja step."""
    lines = (FIXTURES / "nix-build-fail.stderr").read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "[2/3] Building CXX" in line) + 1
    tracker, _ = _fold(lines[:cut])
    progress = tracker.snapshot()
    assert (progress.planned, progress.done, progress.running) == (3, 0, 1)
    (running,) = progress.derivations
    assert running.name == "wb-fixture-a"
    assert running.drv_path.endswith("-wb-fixture-a.drv")
    assert running.phase == "buildPhase"
    assert running.step == Step("ninja", 2, 3, "Building CXX object CMakeFiles/a.dir/two.cc.o")


def test_recorded_new_cli_build() -> None:
    lines = (FIXTURES / "nix-build-new-cli-ok.stderr").read_text().splitlines()
    tracker, shown = _fold(lines)
    progress = tracker.snapshot()
    assert (progress.planned, progress.done, progress.failed) == (3, 3, 0)
    assert "wb-fixture-c> [2/2] Linking CXX executable c" in shown
    assert progress.step == Step("ninja", 2, 2, "Linking CXX executable c")


def test_event_parsing() -> None:
    start = parse_nix_line(
        '@nix {"action":"start","fields":["/nix/store/0sf48fl259kd2pra8miw95c6ygqfmmpd-x-1.0.drv",'
        '"",1,1],"id":7,"level":3,"parent":0,"text":"building x","type":105}'
    )
    assert start == NixStart(
        7,
        105,
        "building x",
        3,
        0,
        ("/nix/store/0sf48fl259kd2pra8miw95c6ygqfmmpd-x-1.0.drv", "", 1, 1),
    )
    assert parse_nix_line('@nix {"action":"stop","id":7}') == NixStop(7)
    assert parse_nix_line(
        '@nix {"action":"result","fields":[1,3,0,0],"id":5,"type":105}'
    ) == NixResult(5, 105, (1, 3, 0, 0))
    assert parse_nix_line(
        '@nix {"action":"msg","level":0,"msg":"\\u001b[31;1merror:\\u001b[0m x"}'
    ) == NixMessage(0, "error: x")
    assert parse_nix_line('@nix {"action":"setPhase","phase":"buildPhase"}') == NixResult(
        0, 104, ("buildPhase",)
    )
    for junk in ("", "@nix", "@nix {", "@nix []", "@nix 1", '@nix {"action":"other"}', "plain"):
        assert parse_nix_line(junk) is None
    assert derivation_name(
        "/nix/store/0sf48fl259kd2pra8miw95c6ygqfmmpd-onnxruntime-1.23.2.drv"
    ) == ("onnxruntime-1.23.2")


def test_unknown_and_odd_events_are_ignored() -> None:
    tracker = ProgressTracker()
    lines = [
        '@nix {"action":"start","id":1,"type":999,"text":"future activity","level":3}',
        '@nix {"action":"result","id":1,"type":999,"fields":[1,2,3]}',
        '@nix {"action":"result","id":1,"type":105,"fields":["a","b","c","d"]}',
        '@nix {"action":"result","id":[1],"type":101,"fields":["list id"]}',
        '@nix {"action":"start","id":2,"type":105,"fields":[42]}',
        '@nix {"action":"stop","id":"2"}',
        '@nix {"action":"msg","msg":7}',
        '@nix {"action":"result","fields":["\\u00e9t\\u00e9 \\"quoted\\""],"id":3,"type":101}',
    ]
    for line in lines:
        tracker.feed(line)
    shown = [tracker.render_line(line) for line in lines]
    assert shown[0] == "future activity"
    assert shown[-1] == 'été "quoted"'
    progress = tracker.snapshot()
    assert (progress.planned, progress.running, progress.done, progress.failed) == (0, 0, 0, 0)


def _nix_env() -> dict[str, str]:
    env = dict(os.environ)
    env["NIX_CONFIG"] = NIX_CONFIG
    env.pop("NIX_REMOTE", None)
    return env


def _run_nix(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, env=_nix_env(), timeout=120, check=False
    )


@needs_nix
@pytest.mark.nix
def test_live_nix_build_failure() -> None:
    """Real single-user `nix-build` as root: the same counts as the recorded log."""
    result = _run_nix(
        [
            "nix-build",
            str(NIX_EXPRESSION),
            "--argstr",
            "salt",
            uuid.uuid4().hex,
            "--arg",
            "fail",
            "true",
            "--no-out-link",
            "--log-format",
            "internal-json",
        ]
    )
    assert result.returncode == 100, result.stderr[-2000:]
    tracker, shown = _fold(result.stderr.splitlines())
    _check_failed_build(tracker, shown)


@needs_nix
@pytest.mark.nix
def test_live_nix_build_new_cli() -> None:
    """`nix build -L --log-format internal-json`: -L first (Nix 2.8's -L resets the format)."""
    result = _run_nix(
        [
            "nix",
            "build",
            "-f",
            str(NIX_EXPRESSION),
            "--argstr",
            "salt",
            uuid.uuid4().hex,
            "--no-link",
            "-L",
            "--log-format",
            "internal-json",
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("@nix {") for line in lines)
    for line in lines:
        json.loads(line[5:])
    tracker, shown = _fold(lines)
    progress = tracker.snapshot()
    assert (progress.planned, progress.done, progress.failed, progress.running) == (3, 3, 0, 0)
    assert sum(1 for line in shown if line and line.startswith("wb-fixture-a> [")) == 3
    phases = [record.name for record in tracker.finished()]
    assert phases == ["wb-fixture-a", "wb-fixture-b", "wb-fixture-c"]


def test_fast_paths_agree_with_the_json_decoder() -> None:
    """The recorded log re-encoded in another key order (so no fast path applies) folds and
    renders exactly as Nix's own encoding does."""
    original = (FIXTURES / "nix-build-fail.stderr").read_text().splitlines()
    reencoded = []
    for line in original:
        value = json.loads(line[5:])
        reencoded.append("@nix " + json.dumps(dict(reversed(list(value.items())))))
    clock = iter(range(10**6)).__next__
    fast, slow = ProgressTracker(clock=clock), ProgressTracker(clock=clock)
    for nix_line, other_line in zip(original, reencoded, strict=True):
        fast.feed(nix_line)
        slow.feed(other_line)
        assert fast.render_line(nix_line) == slow.render_line(other_line)
    fast_progress, slow_progress = fast.snapshot(), slow.snapshot()
    assert fast_progress == slow_progress
    assert [r.name for r in fast.finished()] == [r.name for r in slow.finished()]
