"""The pump with the readable map on parses each line once for both sides (issue 23 item 4):
what comes out must be what the two sides made on their own.

The reference is the pump before the shared pass: the readable map's writer fed the bytes
(`ReadableMapWriter.feed`, which cuts, decodes and renders on its own, here every block by the
general path, `ReadableStream._lines`) and a tracker fed every complete line by `feed`, one call
a line, each ninja status parsed as it comes. The shared pass (`ReadableMapWriter.feed_folding`,
`ReadableStream.render_folding`, `ProgressTracker.feed_lines`) must give the same
`build.readable`, the same map records and the same progress, derivations and last line, on the
benchmark's generated Nix log with hostile and odd lines mixed in, on the plain log, and on the
recorded Nix logs, cut into reads of every size. The pump with the map off (the tracker's own
pass over a block, `ProgressTracker.feed_lines`) must leave the same tracker too.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.logs.readable_map import ReadableMapWriter, readable_paths
from workbench.logs.readable_stream import ReadableStream
from workbench.progress import Progress, ProgressTracker
from workbench.supervision.pipeline import LogPipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from log_pipeline import generate, generate_plain

FIXTURES = Path(__file__).resolve().parents[1] / "progress" / "fixtures"


def _event(value: dict[str, object]) -> str:
    return "@nix " + json.dumps(value, separators=(",", ":"), sort_keys=True)


def _start(activity: int, name: str, kind: int = 105) -> str:
    path = f"/nix/store/{'c' * 32}-{name}.drv"
    return _event(
        {
            "action": "start",
            "fields": [path, "", 1, 1],
            "id": activity,
            "level": 3,
            "parent": 0,
            "text": f"building '{path}'",
            "type": kind,
        }
    )


def _log(activity: object, text: str, kind: int = 101) -> str:
    return _event({"action": "result", "fields": [text], "id": activity, "type": kind})


ODD_LINES = [
    _start(7, "seven"),
    _start(8, "eight\u001b]0;title\u0007"),  # a forged name with controls: shown visible
    _start(-3, "negative"),
    _start(9, "lone\udc80surrogate"),  # a forged name that UTF-8 cannot encode: "?" for it
    _log(9, "[1/2] a line of nine"),
    _log(9, 'a "quoted" line of nine'),
    _start(7, "seven-again"),  # the same id named again: its lines take the new name
    _event({"action": "start", "id": 104, "level": 5, "parent": 0, "text": "", "type": 104}),
    _event({"action": "result", "fields": [2, 9, 1, 0], "id": 104, "type": 105}),
    _event({"action": "result", "fields": [104, 9], "id": 104, "type": 106}),
    _event({"action": "stop", "id": 8}),
    _event({"action": "stop", "id": 7}),
    _event({"action": "msg", "level": 0, "msg": "error: builder for '/nix/store/x.drv' failed"}),
    _event({"action": "msg", "level": 3, "msg": "these 2 derivations will be built:"}),
    _event({"action": "msg", "level": 3, "msg": f"  /nix/store/{'d' * 32}-planned.drv"}),
    _log(7, "[3/9] Building CXX object a.o"),
    _log(7, "[ 45%] Building CXX object b.o"),
    _log(7, "[ 12%] Building CXX object c.o"),
    _log(8, "FAILED: d.o"),
    _log(7, "make[2]: *** [Makefile:3: all] Error 1"),
    _log(7, "Running phase: installPhase"),
    _log(7, "x.cc:3:1: error: no member named 'y'"),
    _log(-3, "[4/9] Linking"),
    _log(7, 'say "hi" \\ back'),
    _log(7, "\u001b[31mred\u001b[0m [5/9]"),
    _log(7, "\r[6/9] rewritten"),
    _log(7, "[7/9]\there with a tab"),  # escaped by JSON; raw below
    _log(7, "tab\there é ü"),
    _log(99, "unnamed id"),
    _log(7, ""),
    _log(7, "post-build", kind=107),
    _log("7", "a string id"),
    _log(7, "x") + " ",
    '@nix {"action":"result","fields":["unterminated],"id":7,"type":101}',
    '@nix {"action":"result","fields":["a"],"id":x7,"type":101}',
    '@nix {"action":"result","fields":["a"b"],"id":7,"type":101}',
    # the prefix's last quote is the tail's first: no TEXT at all, not an empty one
    '@nix {"action":"result","fields":["],"id":7,"type":101}',
    '@nix {"action":"result","fields":["x"],"id":7,"type":101}"],"id":7,"type":101}',
    '@nix {"action":"result","fields":["x\\"],"id":7,"type":101}',
    'plain"],"id":7,"type":101}',
    '@nix {"action":"result","fields":[4,9,1,0],"id":104,"type":105} ',
    '@nix {"action":"result","fields":[5,9,1,0],"id":00104,"type":105}',
    '@nix {"action":"result","fields":[2,"9",1,0],"id":104,"type":105}',
    '@nix {"action":"result","fields":[6,9,1,0],"id":\u0661,"type":105}',
    '@nix {"action":"result","fields":["[9/9] a"],"id":007,"type":101}',
    '@nix {"action":"result","fields":["x"],"id":7,"type":101,"type":105}',
    '@nix {"action":"result","fields":[1],"id":7,"action":"start","text":"hi","level":0,'
    '"type":105}',
    '@nix {"action":"result","fields":[1,,2],"id":7,"type":105}',
    '@nix {"action":"result","fields":["\\u001b[K[2/9] escaped first"],"id":7,"type":101}',
    # counts that end like those of an activity whose counts are not kept (kept by their
    # tail from one line to the next) but are not counts alone
    '@nix {"action":"result","fields":[1,"x"],"id":7,"type":105}',
    '@nix {"action":"result","fields":[1,2]],"id":7,"type":105}',
    '@nix {"action":"result","fields":[],"id":7,"type":105}',
    # id 7 started as a Builds activity: its counts are kept from here on
    _event({"action": "start", "id": 7, "level": 5, "parent": 0, "text": "", "type": 104}),
    _log(7, "lone \udc80 surrogate in TEXT"),
    _log(99, "lone \udc80 surrogate of an unnamed id"),
    _log(7, 'caf\u00e9 "quoted" [3/9]'),
    _log(7, "[5/9] 100% of a percentage"),
    # escaped controls in TEXT that folds: shown visible, folded as they are
    _log(7, "FAILED: bell\u0007.o"),
    _log(7, "[7/9] a bell \u0007 in a status"),
    _log(7, "two\nlines in one TEXT"),  # a newline, the only control: shown as ^J
    "[6/9] 50% plain, a percentage",
    "@nix not json",
    "@nix ",
    "@nixos is not an event",
    # a digit that is not ASCII: make's percentage to the tracker (its pattern's \\d), where
    # the 5th and 6th bytes are not the 5th and 6th characters (the shared pass reads bytes)
    "[  \u0663%] plain make, an Arabic-Indic digit",
    '@nix {"action":"result","fields":["[  \u0663%] raw, an Arabic-Indic digit"],"id":7,'
    '"type":101}',
    "[\u00e9 5/9] not ninja's",
    '@nix {"action":"result","fields":["\u00e9[1/9] \u00fc"],"id":7,"type":101}',
    # the same escaped TEXT under another id (its decoding is kept by TEXT, its name is not)
    _log(9, 'say "hi" \\ back'),
    # TEXT that holds the tail itself, escaped
    _log(7, 'x"],"id":7,"type":101}'),
    # lines that end as the counts of id 7 (not kept, until it starts as Builds) but are not
    'x],"id":7,"type":105}',
    '@x],"id":7,"type":105}',
    '1,2],"id":7,"type":105}',
    '@nix {"action":"result","fields":["1"],"id":7,"type":105}',
    "[10/20] plain ninja",
    "[ 50%] plain make",
    "FAILED: plain.o",
    "plain.cc:1:1: error: plain",
    "an error word: rror",
    'plain line with "quotes" and a backslash \\',
    "",
    "   ",
]
# A raw tab (JSON refuses one in a string) and raw control characters: a block holding one is
# rendered by the general path (each side on its own), so these go into logs of their own.
TAB_LINES = [
    '@nix {"action":"result","fields":["[8/9]\there raw"],"id":7,"type":101}',
    '@nix {"action":"result","fields":["a\tplain raw tab"],"id":7,"type":101}',
    "[9/9]\tplain with a tab",
]
CONTROL_LINES = ["\x1b[32mcoloured plain\x1b[0m", "bell \x07 and \x9b C1", "\r[3/4] rewritten"]


def _feed_eagerly(tracker: ProgressTracker, line: str) -> None:
    """`feed`, then parse the ninja status it may have kept (the tracker parses the latest of a
    run of them only when read): each line's step in turn, as before."""
    tracker.feed(line)
    if tracker._unparsed:
        tracker._parse_steps()


def _reference(directory: Path, chunks: list[bytes], tracker: ProgressTracker) -> list[Progress]:
    """The pump before the shared pass: the writer fed bytes, the tracker fed line by line."""
    path = directory / "build.log"
    readable_path, map_path = readable_paths(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fds = [os.open(p, flags, 0o600) for p in (path, readable_path, map_path)]
    writer = ReadableMapWriter(fds[1], fds[2], 0, settle=4096, record_every=1 << 16)
    # Every block rendered by the general path, line by line through the tracker's render
    # (the fast paths are what is checked).
    stream = writer._stream
    stream._plain_lines = stream._lines  # type: ignore[method-assign]
    pending = b""
    seen = []
    for index, chunk in enumerate(chunks):
        if index % 37 == 0:  # what the supervisor reads now and then, midway
            seen.append(tracker.snapshot())
        os.write(fds[0], chunk)
        writer.feed(chunk)
        data = pending + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            pending = data
            continue
        pending = data[cut + 1 :]
        for line in data[:cut].decode("utf-8", "replace").split("\n"):
            _feed_eagerly(tracker, line)
    if pending:
        for line in pending.decode("utf-8", "replace").split("\n"):
            _feed_eagerly(tracker, line)
    writer.close()
    for fd in fds:
        os.close(fd)
    return seen


def _pumped(
    directory: Path, chunks: list[bytes], tracker: ProgressTracker, readable: bool = True
) -> list[Progress]:
    """Today's pump: `LogPipeline` with the readable map on (or off: the tracker's own pass,
    `ProgressTracker.feed_lines`)."""
    path = directory / "build.log"
    readable_path, map_path = readable_paths(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fds = [os.open(p, flags, 0o600) for p in (path, readable_path, map_path)]
    writer = ReadableMapWriter(fds[1], fds[2], 0, settle=4096, record_every=1 << 16)
    pipeline = LogPipeline(fds[0], tracker, readable=writer if readable else None)
    seen = []
    for index, chunk in enumerate(chunks):
        if index % 37 == 0:
            seen.append(tracker.snapshot())
        pipeline.feed(chunk)
    pipeline.close()
    for fd in fds:
        os.close(fd)
    return seen


def _pump_once(
    directory: Path,
    data: bytes,
    tracker: ProgressTracker,
    readable: bool,
    say: Callable[[str], None] | None = None,
    rng: random.Random | None = None,
) -> LogPipeline:
    """`LogPipeline` (the readable map on or off) fed `data` whole, or cut by `rng` into reads
    of every size, into a new `directory`; closed."""
    directory.mkdir()
    path = directory / "build.log"
    readable_path, map_path = readable_paths(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fds = [os.open(p, flags, 0o600) for p in (path, readable_path, map_path)]
    writer = ReadableMapWriter(fds[1], fds[2], 0) if readable else None
    pipeline = LogPipeline(fds[0], tracker, say=say, readable=writer)
    for chunk in [data] if rng is None else _chunks(data, rng):
        pipeline.feed(chunk)
    pipeline.close()
    for fd in fds:
        os.close(fd)
    return pipeline


def _state(tracker: ProgressTracker) -> tuple[object, ...]:
    return (
        tracker.snapshot(),
        tracker.finished(),
        tracker.planned_derivations(),
        tracker.derivation_names(),
        tracker.activity_names,
    )


def _chunks(data: bytes, rng: random.Random) -> list[bytes]:
    chunks, position = [], 0
    while position < len(data):
        size = rng.choice((1, 7, 100, 4096, 65536, 1 << 18))
        chunks.append(data[position : position + size])
        position += size
    return chunks


def _logs(tmp_path: Path) -> dict[str, bytes]:
    mixed, plain = tmp_path / "mixed.log", tmp_path / "plain.log"
    generate(mixed, 20_000)
    generate_plain(plain, 5_000)
    logs = {"mixed": mixed.read_bytes()}
    for name, odd in (
        ("odd", ODD_LINES),
        ("tabs", ODD_LINES + TAB_LINES),
        ("controls", ODD_LINES + TAB_LINES + CONTROL_LINES),
    ):
        lines = mixed.read_bytes().decode().split("\n")[:-1]
        rng = random.Random(name)
        for _ in range(3_000):
            lines.insert(rng.randrange(len(lines)), rng.choice(odd))
        text = "\n".join(lines) + "\n"
        logs[f"mixed-with-{name}"] = text.encode() + b"\xff\xfe invalid \xe2\x82\n[1/2] end"
    # each odd line right after a builder line of id 7: the tail the pass keeps of the id seen
    # last ('"],"id":7,"type":101}') meets every odd line
    after = [_start(7, "seven")]
    for odd in ODD_LINES:
        after += [_log(7, "warm"), odd]
    logs["odd-after-id-7"] = ("\n".join(after) + "\n").encode()

    # progress counts of one activity, kept by their tail from one line to the next, across
    # the start that makes their counts kept and the stop that ends it, between other lines
    def counts(activity: int, done: int) -> str:
        return _event({"action": "result", "fields": [done, 9, 1, 0], "id": activity, "type": 105})

    seven = [_start(8, "eight"), counts(7, 1), _log(8, "[1/9] x"), counts(7, 2), counts(7, 3)]
    seven += [ODD_LINES[ODD_LINES.index('@nix {"action":"result","fields":[],"id":7,"type":105}')]]
    seven += [
        _event({"action": "start", "id": 7, "level": 5, "parent": 0, "text": "", "type": 104})
    ]
    seven += [counts(7, 4), _log(8, "[2/9] y"), counts(7, 5), _event({"action": "stop", "id": 7})]
    seven += [counts(7, 6), "plain", counts(7, 7), _log(8, "[3/9] z")]
    # last, right after counts of 7 not kept: a line that ends as they do but is a start
    # (JSON's last "action" wins), a line a person reads
    forged = (
        '@nix {"action":"result","fields":[1],"action":"start","text":"started in counts",'
        '"level":0,"fields":[2],"id":7,"type":105}'
    )
    logs["counts-kept-by-their-tail"] = ("\n".join(seven * 3 + [forged]) + "\n").encode()
    # each odd line the last one (what it leaves, a step or a last line, is what is read)
    for index, odd in enumerate(ODD_LINES):
        last = [_start(7, "seven"), _log(7, "[1/9] warm"), "[2/9] warm", odd]
        logs[f"odd-line-{index}-last"] = ("\n".join(last) + "\n").encode()
    plain_lines = plain.read_bytes().split(b"\n")
    for index in range(0, len(plain_lines), 997):  # invalid UTF-8 and a real U+FFFD, no event
        plain_lines[index] += b" \xff\xfe \xe2\x82" if index % 2 else " \ufffd".encode()
    return {
        **logs,
        "plain": plain.read_bytes(),
        "plain-with-invalid-utf-8": b"\n".join(plain_lines),
        **{path.name: path.read_bytes() for path in sorted(FIXTURES.glob("*.stderr"))},
    }


@pytest.mark.slow
@pytest.mark.parametrize("ninja_status", [None, "[%p %f/%t] "])
def test_the_shared_pass_makes_what_each_side_made_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ninja_status: str | None
) -> None:
    shared_blocks = itertools.count()
    render_folding = ReadableStream.render_folding

    def counted(self: ReadableStream, *args: object, **kwargs: object) -> object:
        next(shared_blocks)
        return render_folding(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ReadableStream, "render_folding", counted)
    for name, data in _logs(tmp_path).items():
        chunks = _chunks(data, random.Random(name))
        old_dir, new_dir = tmp_path / f"{name}-old", tmp_path / f"{name}-new"
        off_dir = tmp_path / f"{name}-off"
        for directory in (old_dir, new_dir, off_dir):
            directory.mkdir()
        old = ProgressTracker(ninja_status, clock=itertools.count().__next__)
        new = ProgressTracker(ninja_status, clock=itertools.count().__next__)
        off = ProgressTracker(ninja_status, clock=itertools.count().__next__)
        seen_before = _reference(old_dir, chunks, old)
        seen_now = _pumped(new_dir, chunks, new)
        assert seen_now == seen_before, name
        for part in ("build.log", "build.readable", "build.readable.map"):
            assert (new_dir / part).read_bytes() == (old_dir / part).read_bytes(), (name, part)
        assert _state(new) == _state(old), name
        assert new.last_line == old.last_line, name
        # the map off: the tracker's own pass over each block
        assert _pumped(off_dir, chunks, off, readable=False) == seen_before, (name, "off")
        assert (off_dir / "build.log").read_bytes() == (old_dir / "build.log").read_bytes()
        assert _state(off) == _state(old), (name, "off")
        assert off.last_line == old.last_line, (name, "off")
    assert next(shared_blocks) > 20, "the shared pass never ran: nothing was compared"


@pytest.mark.parametrize("readable", [True, False])
def test_a_compiler_killed_is_kept_whole_lines_only(tmp_path: Path, readable: bool) -> None:
    """The pump keeps the lines that say a compiler was killed (SIGKILL, most often the OOM
    killer), a builder's or the build's own, whole; a line with only part of the phrase is not
    one, with the readable map on (the shared pass) or off."""
    killed = "g++: fatal error: Killed signal terminated program cc1plus"
    lines = [
        _start(7, "seven"),
        "[1/2] a.o",
        killed,
        "a line that only says: terminated program",
        _log(7, killed),
        _log(7, "terminated program, and no more"),
    ]
    data = ("\n".join(lines) + "\n").encode()
    pipeline = _pump_once(
        tmp_path / "pumped", data, ProgressTracker(), readable, rng=random.Random(7)
    )
    assert list(pipeline.killed_compilers) == [killed, _log(7, killed)]


# Escaped TEXTs the shared pass decodes once and keeps by their JSON bytes (a warning repeated):
# with a control (shown visible wherever it comes again), a C1 control, a newline, a lone
# surrogate, characters that are not printable but no control, a quote and a backslash; under
# two ids, so the name shown is the line's, not the one the TEXT was first seen with.
REPEATED_TEXTS = [
    'nvcc warning : The "compute_35" architecture is deprecated \u00e9',
    "\u001b[31mred\u001b[0m warning",
    "[1/9] \u001b[Kstatus, escaped",
    "a C1 \u009b control",
    "two\nlines",
    "lone \udc80 surrogate",
    "soft\u00adhyphen and a line\u2028separator",
    'FAILED: "quoted".o',
    "back \\ slash",
]


def _repeated_log(seed: int, lines: int) -> bytes:
    rng = random.Random(seed)
    out = [_start(7, "seven"), _start(9, "nine")]
    for index in range(lines):
        roll = rng.random()
        activity = 7 if rng.random() < 0.8 else 9
        if roll < 0.4:
            out.append(_log(activity, rng.choice(REPEATED_TEXTS)))
        elif roll < 0.5:
            out.append(_log(activity, f'a "distinct" TEXT {index}'))  # more than are kept
        elif roll < 0.52:
            out.append(_log(activity, '"long" ' + "x" * 2000))  # longer than kept
        elif roll < 0.55:
            out.append(rng.choice(ODD_LINES))
        elif roll < 0.8:
            out.append(_log(activity, f"[{index}/99999] plain TEXT"))
        else:
            out.append(f"plain line {index}")
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("seed", [1, 2])
def test_escaped_texts_repeated_come_out_as_each_side_made_them(tmp_path: Path, seed: int) -> None:
    """An escaped TEXT seen before is not decoded again (`ReadableStream.render_folding` keeps
    what JSON's scanner made of it, up to a bound): the same readable form, map and tracker as
    each side alone, wherever it comes again (its control made visible each time, under the
    line's own id), in reads of every size."""
    data = _repeated_log(seed, 6_000)
    chunks = _chunks(data, random.Random(seed))
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    old = ProgressTracker(clock=itertools.count().__next__)
    new = ProgressTracker(clock=itertools.count().__next__)
    assert _pumped(new_dir, chunks, new) == _reference(old_dir, chunks, old)
    for part in ("build.log", "build.readable", "build.readable.map"):
        assert (new_dir / part).read_bytes() == (old_dir / part).read_bytes(), part
    assert _state(new) == _state(old)
    assert new.last_line == old.last_line
    readable = (new_dir / "build.readable").read_bytes()
    # (the colour resolved as a terminal shows it, under each id's name, no escape left)
    assert b"\nseven> red warning\n" in readable
    assert b"\nnine> red warning\n" in readable
    assert b"\x1b" not in readable


def test_escaped_texts_kept_are_bounded() -> None:
    """What the shared pass keeps of escaped TEXTs stays bounded: at most `_UNESCAPED_KEPT`
    TEXTs, none longer than `_UNESCAPED_LENGTH` bytes."""
    from workbench.logs import readable_stream

    stream = ReadableStream()
    tracker = ProgressTracker()
    lines = [_start(7, "seven")]
    lines += [_log(7, f'"{index}"') for index in range(3 * readable_stream._UNESCAPED_KEPT)]
    lines += [_log(7, '"long" ' + "x" * readable_stream._UNESCAPED_LENGTH)] * 3
    block = ("\n".join(lines) + "\n").encode()
    rendered, error = stream.render_folding(block, block[:-1].decode(), tracker)
    assert error is None
    assert rendered.endswith(b'seven> "long" ' + b"x" * readable_stream._UNESCAPED_LENGTH + b"\n")
    assert 0 < len(stream._unescaped) <= readable_stream._UNESCAPED_KEPT
    assert max(map(len, stream._unescaped)) <= readable_stream._UNESCAPED_LENGTH


@pytest.mark.parametrize("readable", [True, False])
def test_a_line_the_tracker_raises_on_is_said_once_and_the_rest_folded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readable: bool
) -> None:
    """A parser bug on some line must not stop the pump: with the map on (the shared pass) or
    off (the same pass for the tracker alone, `ReadableStream.fold_lines`), the line is skipped,
    the failure said once, and the lines after it folded."""
    real_plain = ProgressTracker._plain

    def plain(self: ProgressTracker, text: str, drv: object) -> None:
        if text.startswith("FAILED: boom"):
            raise RuntimeError("a parser bug")
        real_plain(self, text, drv)  # type: ignore[arg-type]

    monkeypatch.setattr(ProgressTracker, "_plain", plain)
    lines = [_start(7, "seven"), _log(7, "FAILED: boom.o"), "FAILED: boom plain.o"]
    lines += [_log(7, "FAILED: after.o"), "[3/9] after"] * 2
    said: list[str] = []
    tracker = ProgressTracker()
    data = ("\n".join(lines) + "\n").encode()
    _pump_once(tmp_path / "pumped", data, tracker, readable, say=said.append)
    assert [line for line in said if "tracker failed" in line] == [
        "the progress tracker failed on a line (RuntimeError('a parser bug')); reading goes on"
    ]
    progress = tracker.snapshot()
    assert progress.step_failures == ("after.o", "after.o")
    assert progress.step is not None and (progress.step.done, progress.step.total) == (3, 9)
    assert progress.lines == len(lines)


@pytest.mark.parametrize("readable", [True, False])
def test_a_custom_ninja_status_not_in_brackets_is_progress(tmp_path: Path, readable: bool) -> None:
    """With a NINJA_STATUS whose lines do not start with "[" any line may be progress: the
    shared pass (which keeps only "[" lines as ninja's) leaves such a block to `feed_lines`,
    map on or off, plain lines or a builder's."""
    lines = ["3/9 compiling a.o", "plain", _start(7, "seven"), _log(7, "4/9 compiling b.o")]
    for index, done in ((2, 3), (4, 4)):  # a plain block, then one with events
        tracker = ProgressTracker("%f/%t ")
        data = ("\n".join(lines[:index]) + "\n").encode()
        _pump_once(tmp_path / f"{index}", data, tracker, readable)
        step = tracker.snapshot().step
        assert step is not None and (step.done, step.total) == (done, 9), (index, step)
