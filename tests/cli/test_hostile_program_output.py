"""A program's own output shown by `smoke` and `debug-bt` is data: its escapes do not act.

Before, both printed the tail of the program's output as it was: an OSC title write and a
screen clear from the program reached the user's terminal.
"""

from __future__ import annotations

from workbench_cli import run_workbench

HOSTILE = r"printf 'before\033]0;owned\007\033[2Jafter\n'"


def _no_escapes(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text)


def test_smoke_shows_a_failed_programs_output_without_its_escapes() -> None:
    done = run_workbench("smoke", "--", "sh", "-c", f"{HOSTILE}; exit 3")
    assert done.returncode == 1, done.stderr
    _no_escapes(done.stdout + done.stderr)
    assert "before^[]0;owned^Gafter" in done.stdout, done.stdout


def test_debug_bt_shows_a_program_that_ended_first_without_its_escapes() -> None:
    done = run_workbench("debug-bt", "--after", "3", "--", "sh", "-c", HOSTILE)
    assert done.returncode == 1, done.stderr
    assert "it did not hang" in done.stdout
    _no_escapes(done.stdout + done.stderr)
    assert "before^[]0;owned^Gafter" in done.stdout, done.stdout
