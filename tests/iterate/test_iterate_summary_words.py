"""The iterate summary in words counts what it compiled in plain English (issue 14: it said
"1 files compiled"). Real cycles on the stand-in flake: Nix, cmake, ninja and g++."""

from __future__ import annotations

import re

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix


def _build_line(loop: Loop) -> str:
    cycle = loop.iterate("--no-smoke", json=False)
    assert cycle.returncode == 0, cycle.stderr[-3000:]
    (line,) = [line for line in cycle.stdout.splitlines() if line.startswith("  build:     #")]
    return line


def _edit(loop: Loop, unit: int) -> None:
    source = loop.src / f"light_{unit}.cc"
    source.write_text(source.read_text().replace(f"+ {unit});", f"+ {unit}0);"))


@pytest.mark.slow
@needs_tools
@needs_nix[0]
@needs_nix[1]
def test_one_file_compiled_is_singular_and_more_are_plural(loop: Loop) -> None:
    loop.iterate_json("--no-smoke")  # the first cycle: the workspace, everything built
    _edit(loop, 11)
    one = _build_line(loop)
    assert ": 1 file compiled (light_11.cc), " in one, one
    _edit(loop, 12)
    _edit(loop, 13)
    two = _build_line(loop)
    assert re.search(r": 2 files compiled \(light_1[23]\.cc, light_1[23]\.cc\), ", two), two
    assert "nothing to do" in _build_line(loop)
