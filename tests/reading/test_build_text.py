"""The build screen's words with no Textual in them: the title line quotes the command as a shell
reads it."""

from __future__ import annotations

from pathlib import Path

from recorded_builds import new_build, running_build

from workbench.history.records import NewBuild
from workbench.history.store import History
from workbench.planning.shell_command import display
from workbench.reading.build_text import head_lines, progress_line


def _run_build(name: str, argv: tuple[str, ...], where: Path) -> NewBuild:
    """A `workbench run` build of `argv` in `where`, as the CLI records it."""
    return new_build(name, argv=argv, cwd=str(where), eta_key=name)


def test_the_title_shows_the_command_as_a_shell_reads_it_on_one_line(tmp_path: Path) -> None:
    argv = ("sh", "-c", "echo 'a b'\necho c", "it's")
    with History(tmp_path) as history:
        record = history.create(_run_build("quoted", argv, tmp_path))
    title, _ = head_lines(record)
    # The debug screen's sub-title and the CLI quote with the same function: one line, pasteable.
    assert title.endswith(": " + display(argv))
    assert "\n" not in title and "sh -c $'echo \\'a b\\'\\necho c' 'it'\"'\"'s'" in title


def test_a_long_progress_line_puts_what_the_eta_rests_on_after_the_peak(tmp_path: Path) -> None:
    # The build screen cuts a line too long for its width at its end (ellipsis): at 160x48 a
    # first build's basis ("extrapolated from this run's edges so far, ...") stood between the
    # ETA and the peak, so the build's peak was cut off the line (seen on fmt's first build).
    with History(tmp_path) as history:
        record = running_build(history, _run_build("fmt", ("ninja", "-j2"), tmp_path), started=1.0)
        basis = "extrapolated from this run's edges so far, by source and kind of edge"
        live = {
            "t": 2.0,
            "eta_s": 153.0,
            "eta_low_s": 53.7,
            "eta_high_s": 337.0,
            "eta_basis": basis,
            "eta_first_build": True,
            "peak": {"rss": 1092964352, "rss_at": 1.0, "cpu_cores": 2.0, "compile_jobs": 2},
        }
        progress = {"step": {"tool": "ninja", "done": 13, "total": 77, "description": "x"}}
        history.update_live(record.id, 13, progress, live)
        record = history.get(record.id)
    line = progress_line(record, basis=True)
    assert line.startswith("ninja 13/77 (16%) · ETA 2m33s"), line  # 16.9%: cut down
    peak, said = line.index("peak 1.02 GiB"), line.index(f"ETA basis: {basis}")
    assert peak < said and line.endswith(basis), line
    assert "basis" not in progress_line(record, basis=False)
