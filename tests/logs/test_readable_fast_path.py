"""The readable form's fast path (blocks without control characters) writes what the general
path writes, byte for byte: builder lines cut out of their JSON by position (decoded by JSON's
scanner where they hold an escape), plain lines as they are, events rendered as before.

The map's writer renders every block of a Nix build's log as the supervisor pumps it (issue 23:
the supervisor ran 3x slower with the map on); the fast path drops the second tracker pass over
each builder line. Here both paths render the same recorded-style log, block by block, with
names learnt from start events, escapes, quotes, forged and malformed events mixed in.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from workbench.logs.readable_stream import ReadableStream, _no_controls

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from log_pipeline import generate


def _event(value: dict[str, object]) -> str:
    return "@nix " + json.dumps(value, separators=(",", ":"), sort_keys=True)


ODD_LINES = [
    _event({"action": "result", "fields": ['say "hi" \\ back'], "id": 7, "type": 101}),
    _event({"action": "result", "fields": ["\u001b[31mred\u001b[0m [3/9]"], "id": 7, "type": 101}),
    _event({"action": "result", "fields": ["tab\there é ü"], "id": 99, "type": 101}),
    _event({"action": "result", "fields": [""], "id": 7, "type": 101}),
    _event({"action": "result", "fields": ["x"], "id": 7, "type": 101}) + " ",
    '@nix {"action":"result","fields":["unterminated],"id":7,"type":101}',
    '@nix {"action":"result","fields":["a"],"id":x7,"type":101}',
    "@nix not json",
    _event({"action": "msg", "level": 0, "msg": "error: builder failed"}),
    _event({"action": "stop", "id": 7}),
    _event({"action": "result", "fields": [3, 9, 1, 0], "id": 5, "type": 105}),
    _event(
        {
            "action": "start",
            "fields": ["/nix/store/" + "b" * 32 + "-late-name.drv", "", 1, 1],
            "id": 7,
            "level": 3,
            "parent": 0,
            "text": "building late-name",
            "type": 105,
        }
    ),
    'plain line with "quotes" and a backslash \\',
    "",
    "   ",
]


def test_fast_path_writes_what_the_general_path_writes(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    generate(log, 20_000)
    lines = log.read_text().split("\n")[:-1]
    rng = random.Random(23)
    for _ in range(2_000):
        lines.insert(rng.randrange(len(lines)), rng.choice(ODD_LINES))
    fast, general = ReadableStream(), ReadableStream()
    position, blocks = 0, 0
    while position < len(lines):
        size = rng.randint(1, 400)
        block = ("\n".join(lines[position : position + size]) + "\n").encode()
        position += size
        text = block.decode("utf-8", "replace")
        expected = general._lines(text)
        if _no_controls(block):
            blocks += 1
            assert fast._plain_lines(text) == expected, block[:300]
        else:
            assert fast._lines(text) == expected
    assert blocks > 20, "no block took the fast path: the test saw nothing"
