"""The build screen's words with no Textual in them: the title line quotes the command as a shell
reads it."""

from __future__ import annotations

from pathlib import Path

from workbench.history.records import NewBuild
from workbench.history.store import History
from workbench.planning.shell_command import display
from workbench.reading.build_text import head_lines


def test_the_title_shows_the_command_as_a_shell_reads_it_on_one_line(tmp_path: Path) -> None:
    argv = ("sh", "-c", "echo 'a b'\necho c", "it's")
    with History(tmp_path) as history:
        record = history.create(
            NewBuild(
                name="quoted",
                backend="run",
                argv=argv,
                cwd=str(tmp_path),
                checkout=str(tmp_path),
                settings={},
                eta_key="quoted",
                nix=False,
            )
        )
    title, _ = head_lines(record)
    # The debug screen's sub-title and the CLI quote with the same function: one line, pasteable.
    assert title.endswith(": " + display(argv))
    assert "\n" not in title and "sh -c $'echo \\'a b\\'\\necho c' 'it'\"'\"'s'" in title
