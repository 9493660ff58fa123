"""The log view's building blocks: sliced and bounded searches, coloured errors, Nix names."""

from __future__ import annotations

from pathlib import Path

from workbench.logs.line_index import LineIndex, severity
from workbench.logs.readable import DerivationNames, readable_line

START = (
    b'@nix {"action":"start","fields":["/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-ort-1.23.drv",'
    b'"",1,1],"id":42,"level":3,"text":"building ort","type":105}'
)


def test_bounded_searches_and_the_last_line(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(100)) + "last one")
    index = LineIndex(path)
    index.refresh()
    assert len(index) == 101
    assert index.search("last one", 100, backwards=True) is None  # before line 100 only
    assert index.search("last one", 101, backwards=True) == 100  # from the end: included
    assert index.search("line 9", 0, stop_line=5) is None
    assert index.search("line 9", 0, stop_line=10) == 9
    assert index.search("line 1", 50, backwards=True, stop_line=20) is None
    assert index.search("line 2", 50, backwards=True, stop_line=20) == 29
    assert index.complete_size == path.stat().st_size - len("last one")


def test_coloured_errors_are_errors() -> None:
    assert severity("\x1b[0;1;31merror: \x1b[0mexpected ';'") == "error"
    assert severity('"msg":"\\u001b[31;1merror:\\u001b[0m builder failed"') == "error"
    assert severity("g++ -Werror -Wfatal-errors -c x.cc") is None


def test_derivation_names_come_from_whole_start_lines() -> None:
    names = DerivationNames()
    assert names.scan(START) == 0  # no newline yet: still being written
    assert names.scan(START + b"\n") == 1
    assert names == {"42": "ort-1.23"}
    line = '@nix {"action":"result","fields":["[1/9] Building x.o"],"id":42,"type":101}'
    assert readable_line(line, names) == ("ort-1.23> [1/9] Building x.o", None)
    assert readable_line('@nix {"action":"stop","id":42}', names) == ("■ ort-1.23 finished", "dim")


def test_control_characters_never_reach_the_terminal() -> None:
    text, _ = readable_line("a\x07b\x00c\tend\r")
    assert text == "a^Gb^@c\tend"  # as `cat -v` shows them
    text, _ = readable_line("[1/2] one\r[2/2] two")
    assert text == "[2/2] two"
