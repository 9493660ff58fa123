"""The whole output pipeline under hostile input: pump → log file → `workbench logs`.

Whatever a build writes (terminal escapes, markup, invalid UTF-8, Nix events with any values,
numbers past 4300 digits, endless lines), the pump never raises and keeps it byte for byte,
`logs --raw` gives those bytes back, and the readable form (streamed) equals the line-by-line
reading, with no control character left but tab and newline.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from supervision.supervised import Bench, build_id_from

from workbench.logs.readable_map import (
    IN_READABLE,
    RECORD,
    ReadableMapWriter,
    copy_readable,
    readable_paths,
)
from workbench.logs.readable_stream import BLOCK, ReadableStream, readable_blocks
from workbench.progress import ProgressTracker
from workbench.reading.follow import LogReader
from workbench.supervision.pipeline import LogPipeline

# What no readable output may hold: C0 controls but tab and newline, DEL, C1 controls.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

HOSTILE_TEXT = st.sampled_from(
    [
        "\x1b]0;owned\x07",
        "\x1b]52;c;dG9rZW4=\x07",
        "\x1b[2J\x1b[H",
        "\x9b2J",
        "\r",
        "[@click=app.quit]x[/]",
        "[/",
        "[" + "9" * 5000 + "/" + "9" * 5000 + "] x",
        "\t",
        "é",
    ]
) | st.text(max_size=40)


def _nix(value: object) -> str:
    return "@nix " + json.dumps(value, separators=(",", ":"), sort_keys=True)


NIX_LINE = st.builds(
    lambda activity, text: _nix(
        {"action": "result", "fields": [text], "id": activity, "type": 101}
    ),
    st.integers(1, 3),
    HOSTILE_TEXT,
) | st.builds(
    lambda activity, name: _nix(
        {
            "action": "start",
            "fields": [f"/nix/store/{'a' * 32}-{name}.drv", "", 1, 1],
            "id": activity,
            "level": 3,
            "parent": 0,
            "text": f"building {name}",
            "type": 105,
        }
    ),
    st.integers(1, 3),
    HOSTILE_TEXT,
)
LINE = st.one_of(HOSTILE_TEXT, NIX_LINE).map(lambda text: text.encode("utf-8", "surrogatepass"))
CHUNKS = st.lists(st.lists(LINE, max_size=6).map(b"\n".join) | st.binary(max_size=60), max_size=12)


def _reference(path: Path) -> bytes:
    """The readable form line by line, as `attach` reads it (`LogReader`)."""
    reader = LogReader(path)
    lines: list[str] = []
    while True:
        before = reader.offset
        lines += reader.read()
        if reader.offset == before:
            break
    lines += reader.rest()
    return "".join(line + "\n" for line in lines).encode("utf-8", "replace")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHUNKS, st.integers(min_value=1, max_value=64))
def test_pipeline_and_logs_never_fail_and_agree(
    tmp_path_factory, chunks: list[bytes], block: int
) -> None:
    path = tmp_path_factory.mktemp("log") / "build.log"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    tracker = ProgressTracker()
    pipeline = LogPipeline(descriptor, tracker)
    for chunk in chunks:
        pipeline.feed(chunk)
    pipeline.close()
    os.close(descriptor)
    raw = path.read_bytes()
    assert raw == b"".join(chunks)  # the file is the output, byte for byte
    assert pipeline.loss.bytes == 0
    progress = tracker.snapshot()
    assert CONTROL.search(progress.last_line) is None
    # Streamed in tiny blocks too, so that lines and UTF-8 characters are cut anywhere.
    with open(path, "rb") as handle:
        streamed = b"".join(readable_blocks(handle, block))
    assert streamed == _reference(path)
    assert CONTROL.search(streamed.decode("utf-8")) is None


def test_a_line_longer_than_the_bound_is_shown_in_pieces() -> None:
    stream = ReadableStream()
    out = stream.feed(b"x" * (9 * BLOCK)) + stream.close()
    assert out == b"x" * (9 * BLOCK) + b"\n"


def test_plain_blocks_come_out_as_they_are() -> None:
    data = "".join(f"[{n}/900] Building CXX object é{n}.o\n" for n in range(900)).encode()
    assert b"".join(readable_blocks(io.BytesIO(data), 4096)) == data


def test_logs_attach_and_status_never_pass_escapes_to_the_terminal(
    bench: Bench, tmp_path: Path
) -> None:
    hostile = (
        "title\x1b]0;owned\x07 clipboard\x1b]52;c;dG9rZW4=\x07 clear\x1b[2J\x9b2J bell\x07\n"
        "[@click=app.quit]x[/]\n"
    )
    script = f"printf '%s' '{hostile}'; exit 3"
    result = bench.run("run", "--", "sh", "-c", script, cwd=tmp_path, timeout=120)
    assert result.returncode == 3, result.stderr
    build_id = build_id_from(result.stderr)
    for output in (result.stdout, result.stderr):
        assert "\x1b" not in output and "\x07" not in output and "\x9b" not in output
    assert "title^[]0;owned^G clipboard^[]52;c;dG9rZW4=^G clear" in result.stdout
    readable = bench.run("logs", str(build_id), timeout=60)
    assert readable.returncode == 0, readable.stderr
    # What `logs` copied was kept by the supervisor as the build wrote it: nothing rendered.
    log_path = next(bench.state.glob(f"builds/{build_id}/build.log"))
    readable_path, map_path = readable_paths(log_path)
    assert map_path.stat().st_size == RECORD.size  # one stretch, in build.readable
    assert oct(readable_path.stat().st_mode & 0o777) == "0o600"
    assert readable_path.read_bytes().decode() == readable.stdout
    assert CONTROL.search(readable.stdout) is None
    assert "[@click=app.quit]x[/]" in readable.stdout
    assert "M-^[2J bell^G" in readable.stdout
    raw = bench.start("logs", "--raw", str(build_id), text=False)
    out, _ = raw.communicate(timeout=60)
    assert out == hostile.encode()  # --raw: the exact bytes
    shown_by = (("attach", str(build_id)), ("status",), ("history",), ("report", str(build_id)))
    for command in shown_by:
        shown = bench.run(*command, timeout=60)
        assert CONTROL.search(shown.stdout + shown.stderr) is None, command


def _mapped_pipeline(
    directory: Path, chunks: list[bytes], settle: int, record_every: int, close: bool = True
) -> Path:
    """`chunks` through the pump with the readable form kept beside the log."""
    path = directory / "build.log"
    readable_path, map_path = readable_paths(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fds = [os.open(p, flags, 0o600) for p in (path, readable_path, map_path)]
    writer = ReadableMapWriter(fds[1], fds[2], 0, settle=settle, record_every=record_every)
    pipeline = LogPipeline(fds[0], ProgressTracker(), readable=writer)
    for chunk in chunks:
        pipeline.feed(chunk)
    if close:
        pipeline.close()
    for fd in fds:
        os.close(fd)
    return path


def _copied(path: Path) -> bytes:
    out = path.with_name("out")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        copy_readable(path, fd)
    finally:
        os.close(fd)
    return out.read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHUNKS, st.integers(1, 200), st.integers(1, 400), st.booleans())
def test_the_readable_form_kept_while_writing_equals_the_one_rendered_after(
    tmp_path_factory, chunks: list[bytes], settle: int, record_every: int, ended: bool
) -> None:
    """Stretches copied from the log and from build.readable, holes rendered: the same bytes.

    Tiny `settle` and `record_every` make the stretches switch and records come often; a
    build still running (`ended` false) leaves its tail to be rendered by the reader."""
    path = _mapped_pipeline(tmp_path_factory.mktemp("log"), chunks, settle, record_every, ended)
    assert path.read_bytes() == b"".join(chunks)
    assert _copied(path) == _reference(path)


def test_a_map_cut_short_or_torn_still_gives_the_whole_readable_form(tmp_path: Path) -> None:
    start = _nix(
        {
            "action": "start",
            "fields": [f"/nix/store/{'a' * 32}-ort.drv", "", 1, 1],
            "id": 7,
            "level": 3,
            "parent": 0,
            "text": "building ort",
            "type": 105,
        }
    )
    line = _nix({"action": "result", "fields": ["compiling \x1b[1mx\x1b[0m"], "id": 7, "type": 101})
    chunks = [f"{start}\nplain\n".encode()] + [f"{line}\nplain {n}\n".encode() for n in range(50)]
    path = _mapped_pipeline(tmp_path, chunks, settle=16, record_every=64)
    whole = _copied(path)
    assert whole == _reference(path)
    assert whole.count(b"ort> compiling x\n") == 50
    _, map_path = readable_paths(path)
    records = map_path.read_bytes()
    assert len(records) >= 4 * RECORD.size
    # A record torn by a full disk, and one pointing past the files: the rest is rendered, and
    # the builder lines after the cut still know their derivation's name.
    map_path.write_bytes(records[: 2 * RECORD.size + 5])
    assert _copied(path) == whole
    bogus = RECORD.pack(IN_READABLE, 0, 10, 1 << 40, 10)
    map_path.write_bytes(records[: RECORD.size] + bogus + records[2 * RECORD.size :])
    assert _copied(path) == whole
    map_path.unlink()  # a log from before maps
    assert _copied(path) == whole


def test_a_map_whose_writes_fail_stops_and_the_pump_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    readable_path, map_path = readable_paths(path)
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    map_fd = os.open(map_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    read_only = os.open(readable_path, os.O_RDONLY | os.O_CREAT, 0o600)  # writes fail: EBADF
    writer = ReadableMapWriter(read_only, map_fd, 0, settle=8, record_every=8)
    pipeline = LogPipeline(log_fd, ProgressTracker(), readable=writer)
    for n in range(20):
        pipeline.feed(f"line {n}\n".encode() + (b"\x1b[2J\n" if n == 10 else b""))
    pipeline.close()
    for fd in (log_fd, map_fd, read_only):
        os.close(fd)
    assert writer.failure.startswith("EBADF")
    assert path.read_bytes().count(b"\n") == 21
    assert map_path.stat().st_size > 0  # the plain stretch before the failure was recorded
    assert _copied(path) == _reference(path)
