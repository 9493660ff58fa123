"""What a first build's ETA could know of its units before they build: each compile unit's bytes
and its bytes with the tree's own headers it includes (`eta_recordings.source_bytes`, kept in
the recordings), the unit an object compiles (`eta_accuracy.unit_of_output`), and the costs
scaled by a slope fitted to the finished units (`eta_accuracy.SizedCosts`, scored in
`source_size_prior`, not shipped)."""

from __future__ import annotations

import io
import json
import math
import tarfile
from pathlib import Path
from typing import Any

import pytest

TREE = {
    # a.cc includes its header beside it, a header by the path an include directory gives it,
    # a system header and a generated one (neither in the tree); the headers include each other
    # (a cycle) and both include common.h (a diamond: counted once).
    "src/a.cc": b'#include "a.h"\n#include "lib/b.h"\n#include <vector>\n#include "gen.h"\n',
    "src/a.h": b'#include "lib/b.h"\n#include "common.h"\nint a();\n',
    "include/lib/b.h": b'  #  include "../../src/a.h"\n#include "common.h"\n',
    "include/common.h": b"// common\n",
    "src/alone.c": b"int main(void) { return 0; }\n",
    "tests/t.cpp": b'#include "lib/b.h"\n',
}


def test_a_unit_counts_its_own_bytes_and_each_header_of_the_tree_it_reaches_once(
    source_size_modules: tuple[Any, Any],
) -> None:
    _accuracy, recordings = source_size_modules
    found = recordings.source_bytes(TREE)
    assert set(found) == {"src/a.cc", "src/alone.c", "tests/t.cpp"}  # headers are no units
    size = {path: len(text) for path, text in TREE.items()}
    headers = size["src/a.h"] + size["include/lib/b.h"] + size["include/common.h"]
    assert found["src/a.cc"] == (size["src/a.cc"], size["src/a.cc"] + headers)
    assert found["src/alone.c"] == (size["src/alone.c"], size["src/alone.c"])
    # b.h reaches a.h by its path beside it (../../src/a.h from include/lib), and common.h.
    assert found["tests/t.cpp"] == (size["tests/t.cpp"], size["tests/t.cpp"] + headers)


def test_source_bytes_are_added_to_a_recording_from_its_tree_archive(
    source_size_modules: tuple[Any, Any], tmp_path: Path
) -> None:
    _accuracy, recordings = source_size_modules
    archives = tmp_path / "archives"
    archives.mkdir()
    # As `git archive --prefix=tree/` writes it: one top folder, the tree's name.
    with tarfile.open(archives / "tree.tar.xz", "w:xz") as tar:
        for path, text in [*TREE.items(), ("README.md", b"not C\n")]:
            member = tarfile.TarInfo(f"tree/{path}")
            member.size = len(text)
            tar.addfile(member, io.BytesIO(text))
    into = tmp_path / "runs"
    into.mkdir()
    for name, source in (("tree", "github:someone/tree@0123abc"), ("other", "github:a/other@1")):
        (into / f"{name}.json").write_text(json.dumps({"source": source, "runs": []}))
    written = recordings.add_source_bytes(archives, into)
    assert written == [into / "tree.json"]  # no archive of `other`: left as it was
    kept = json.loads((into / "tree.json").read_text())
    assert kept["source_bytes"] == {
        path: list(sizes) for path, sizes in recordings.source_bytes(TREE).items()
    }
    assert "source_bytes" not in json.loads((into / "other.json").read_text())


def test_an_object_is_traced_to_the_unit_it_compiles(source_size_modules: tuple[Any, Any]) -> None:
    accuracy, _recordings = source_size_modules
    units = {
        "lib/common/debug.c": [1, 1],
        "programs/util.c": [1, 1],
        "src/format.cc": [1, 1],
        "test/format-test.cc": [1, 1],
        "test/gtest/gmock-gtest-all.cc": [1, 1],
    }
    find = accuracy.unit_of_output(units)
    # zstd's objects name the source's absolute path; fmt's its path in the target's folder.
    assert find("lib/CMakeFiles/z.dir/tmp/eta-record-1/src/zstd/lib/common/debug.c.o") == (
        "lib/common/debug.c"
    )
    assert find("programs/CMakeFiles/zstd.dir/__/programs/util.c.o") == "programs/util.c"
    assert find("CMakeFiles/fmt.dir/src/format.cc.o") == "src/format.cc"
    assert find("test/CMakeFiles/format-test.dir/format-test.cc.o") == "test/format-test.cc"
    assert find("test/gtest/CMakeFiles/gtest.dir/gmock-gtest-all.cc.o") == (
        "test/gtest/gmock-gtest-all.cc"
    )
    assert find("bin/format-test") is None
    assert find("CMakeFiles/fmt.dir/src/generated.cc.o") is None


def _sized(accuracy: Any, costs_of: dict[str, float], sizes: dict[str, int]) -> Any:
    outputs = [f"CMakeFiles/t.dir/src/{name}.cc.o" for name in sizes]
    costs = accuracy.SizedCosts.of(outputs)
    for name, size in sizes.items():
        # Headers of a tenth of the unit: the two sizes say the same.
        costs.features[f"CMakeFiles/t.dir/src/{name}.cc.o"] = (
            math.log(size + 1.0),
            math.log(1.1 * size + 1.0),
        )
    for name, seconds in costs_of.items():
        costs.add(f"CMakeFiles/t.dir/src/{name}.cc.o", seconds)
    return costs


def test_a_unit_not_started_is_costed_by_its_bytes_as_the_finished_ones_were(
    source_size_modules: tuple[Any, Any],
) -> None:
    accuracy, _recordings = source_size_modules
    # Finished: a second per thousand bytes. Left: a unit of 16,000 bytes and one of 1,000.
    sizes = {"a": 1000, "b": 2000, "c": 4000, "d": 8000, "big": 16000, "small": 1000}
    costs = _sized(accuracy, {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0}, sizes)
    costs.fit(0.0)
    assert sum(costs.slope) == pytest.approx(1.0, abs=0.01)
    big = costs.cost("CMakeFiles/t.dir/src/big.cc.o")
    small = costs.cost("CMakeFiles/t.dir/src/small.cc.o")
    assert not big[1] and not small[1]
    # The group's mean (3.75 s) times the unit's bytes against the finished ones' (geometric
    # mean 2,828): 16,000 bytes is 5.66x that, 1,000 bytes 0.35x.
    assert big[0] == pytest.approx(3.75 * 16000 / 2828.4, rel=0.01)
    assert small[0] == pytest.approx(3.75 * 1000 / 2828.4, rel=0.01)
    assert costs.work_left() == pytest.approx(big[0] + small[0], rel=1e-6)
    # The shipped costs: both at the group's mean.
    plain = accuracy.eta_model.EdgeCosts.of(costs.planned)
    for output, seconds in costs.finished.items():
        plain.add(output, seconds)
    assert plain.work_left() == pytest.approx(2 * 3.75)


def test_with_no_relation_in_the_finished_units_the_bytes_change_nothing(
    source_size_modules: tuple[Any, Any],
) -> None:
    accuracy, _recordings = source_size_modules
    sizes = {"a": 1000, "b": 2000, "c": 4000, "d": 8000, "big": 16000}
    costs = _sized(accuracy, {"a": 3.0, "b": 3.0, "c": 3.0, "d": 3.0}, sizes)
    costs.fit(5.0)
    assert costs.slope == pytest.approx((0.0, 0.0), abs=1e-9)
    assert costs.cost("CMakeFiles/t.dir/src/big.cc.o") == (pytest.approx(3.0), False)
    # A ridge shrinks a slope the finished units do show towards none.
    shown = _sized(accuracy, {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0}, sizes)
    shown.fit(20.0)
    assert 0.0 < sum(shown.slope) < 0.5
