"""The log's line index: growing files, partial lines, search, truncation, severity."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.logs.line_index import LineIndex, severity


def test_grows_with_the_file_and_shows_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_bytes(b"[1/3] Building CXX object a.o\n[2/3] Building CXX")
    index = LineIndex(path)
    assert index.refresh() == 2
    assert index.lines(0, 5) == ["[1/3] Building CXX object a.o", "[2/3] Building CXX"]
    with path.open("ab") as log:
        log.write(b" object b.o\n[3/3] Linking\n")
    assert index.refresh() == 1
    assert index.lines(0, 5) == [
        "[1/3] Building CXX object a.o",
        "[2/3] Building CXX object b.o",
        "[3/3] Linking",
    ]


def test_search_forwards_backwards_and_first_error(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    lines = [f"[{n}/100] Building CXX object f{n}.o" for n in range(1, 101)]
    lines[40] = "src/f41.cc:12:3: warning: unused variable 'x'"
    lines[70] = "src/f71.cc:9:1: error: expected ';' before '}' token"
    path.write_text("\n".join(lines) + "\n")
    index = LineIndex(path)
    index.refresh()
    assert len(index) == 100
    assert index.first_error() == 70
    assert index.search("f50.o") == 49
    assert index.search("BUILDING", 60) == 60
    assert index.search("f50.o", 80, backwards=True) == 49
    assert index.search("no such text") is None
    assert severity(lines[40]) == "warning" and severity(lines[70]) == "error"
    assert severity(lines[0]) is None
    assert severity("g++ -Werror -c x.cc") is None


def test_truncated_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("one\ntwo\nthree\n")
    index = LineIndex(path)
    index.refresh()
    path.write_text("new\n")
    index.refresh()
    assert index.lines(0, 10) == ["new"]


def test_bounded_refresh_takes_a_big_file_in_steps(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(100_000)))
    index = LineIndex(path)
    steps = 0
    while index.refresh(limit_bytes=64 * 1024):
        steps += 1
    assert steps > 5
    assert len(index) == 100_000
    assert index.line(99_999) == "line 99999"
    assert index.line(54_321) == "line 54321"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(min_value=1, max_value=64))
def test_any_bytes_in_any_pieces_index_like_splitlines(pieces: list[bytes], limit: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log"
        path.write_bytes(b"")
        index = LineIndex(path)
        written = b""
        for piece in pieces:
            with path.open("ab") as log:
                log.write(piece)
            written += piece
            while index.refresh(limit_bytes=limit):
                pass
            index.refresh()
        expected = [line.decode("utf-8", "replace").rstrip("\r") for line in written.split(b"\n")]
        if written.endswith(b"\n") or written == b"":
            expected = expected[:-1]
        assert index.lines(0, len(index) + 1) == expected
        index.close()


def test_a_line_longer_than_the_refresh_limit_does_not_stall(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_bytes(b"x" * 10_000 + b"\nnext\n")
    index = LineIndex(path)
    index.refresh(limit_bytes=100)
    index.refresh(limit_bytes=100)
    assert index.lines(0, 5) == ["x" * 10_000, "next"]


def test_a_line_longer_than_a_read_hides_nothing_after_it_when_indexed_whole(
    tmp_path: Path,
) -> None:
    # A build screen opened on a log that already holds a line longer than one read (4 MiB):
    # the whole-file index (no limit, as the view's worker runs it) stopped at that line yet
    # recorded the file's whole size, so the lines after it, `FAILED: c.o` among them, never
    # came (the view said 26 lines until the build ended).
    path = tmp_path / "build.log"
    head = b"".join(b"line %d\n" % number for number in range(25))
    tail = b"".join(b"after %d\n" % number for number in range(5)) + b"FAILED: c.o\n"
    path.write_bytes(head + b"y" * 4_500_000 + b"\n" + tail)
    index = LineIndex(path)
    index.refresh()
    assert len(index) == 32
    assert index.line(31) == "FAILED: c.o"
    assert index.first_error() == 31
    # Nothing is left for a later refresh to find: it is all indexed now.
    assert index.refresh() == 0 and index.size == index.complete_size == path.stat().st_size
