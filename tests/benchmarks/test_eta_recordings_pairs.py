"""`benchmarks/eta_recordings.py record --part 3` builds pairs: a tree's earlier release, then
at once the tree at its recorded commit in a fresh build directory, both under the real
`workbench run` in one state directory, so that the second build's history holds the first
(another tree of the same sources, as a user's history holds the release built before). Each
build is its own recording; the two name each other (`pair`), and `import` keeps the names
paired. The quick plan: a small generated C tree and its "earlier release" (one unit fewer, one
named otherwise)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from needed_tools import needs

from workbench.history.store import History
from workbench.supervision import live_eta

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@needs("cmake", "ninja", "cc")
@pytest.mark.slow(reason="two real builds")
def test_record_quick_part_3_keeps_a_pair_in_one_history(tmp_path: Path) -> None:
    out = tmp_path / "out"
    work = tmp_path / "work"
    script = str(BENCHMARKS / "eta_recordings.py")
    argv = [sys.executable, script, "record", "--quick", "--part", "3"]
    done = subprocess.run(
        [*argv, "--work", str(work), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((out / "eta-recordings-quick3.json").read_text())
    assert not [e for e in document["log"] if "skipped" in e or "failed" in e], document["log"]
    assert [(e["step"], e["kind"]) for e in document["log"]] == [
        ("quick-j2-earlier-release", "earlier"),
        ("quick-j2-after-earlier-release", "later"),
    ]
    earlier, later = document["recordings"]
    assert earlier["project"] == later["pair"] == "quick-j2-earlier-release"
    assert later["project"] == earlier["pair"] == "quick-j2-after-earlier-release"
    assert earlier["pair_order"].startswith("1 of 2") and later["pair_order"].startswith("2 of 2")
    assert (earlier["archive"], later["archive"]) == ("quick-earlier.tar.xz", "quick.tar.xz")
    assert earlier["host"] == later["host"] and earlier["build"] == later["build"]
    assert "quick-earlier" in earlier["source"] and "quick-earlier" not in later["source"]
    (first,) = earlier["runs"]
    (second,) = later["runs"]
    assert first["label"].startswith("first build of quick-earlier (no history)")
    assert "the history holds quick-earlier's first build" in second["label"]
    # Two trees of the same sources: most units kept their names, one is gone, one is new.
    names = {e[2] for e in first["edges"]}
    later_names = {e[2] for e in second["edges"]}
    assert "CMakeFiles/quick_static.dir/u0_old.c.o" in names - later_names
    assert "CMakeFiles/quick_static.dir/u5.c.o" in later_names - names
    assert len(names & later_names) >= 10
    for recording, run in ((earlier, first), (later, second)):
        assert run["edge_total"] == len(run["edges"]), run
        assert len(recording["dependencies"]) == run["edge_total"]

    # One history: the later build ran after the earlier one ended, in another build directory
    # (another work key: no earlier run of its own tree).
    with History(work / "state") as history:
        builds = sorted(history.builds(limit=10), key=lambda b: b.id)
        assert [b.name for b in builds] == [earlier["project"], later["project"]]
        keys = [history.edge_build_info(b.id)[1] for b in builds]
        assert None not in keys and keys[0] != keys[1], keys
        assert builds[0].ended is not None and builds[1].started is not None
        assert builds[0].ended <= builds[1].started
        assert history.runs_of_work(str(keys[1]), builds[1].id) == []

    into = tmp_path / "eta_runs"
    into.mkdir()
    recordings = str(out / "eta-recordings-quick3.json")
    subprocess.run(
        [sys.executable, script, "import", recordings, "--tag", "vm", "--into", str(into)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    split = {path.name: json.loads(path.read_text()) for path in into.iterdir()}
    assert sorted(split) == [
        "vm-quick-j2-after-earlier-release.json",
        "vm-quick-j2-earlier-release.json",
    ]
    imported = split["vm-quick-j2-after-earlier-release.json"]
    assert imported["project"] == "vm quick-j2-after-earlier-release"
    assert imported["pair"] == "vm quick-j2-earlier-release"
    assert split["vm-quick-j2-earlier-release.json"]["pair"] == imported["project"]


def _module(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module(name)


def test_a_pair_replays_its_second_build_with_the_first_as_another_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The VM's json-c pair (benchmarks/data/eta_runs/), played as recorded
    (`eta_accuracy.load_as_recorded`): in one history, the second build has no earlier run of
    its own tree, the first is another tree of the same sources on this host, and the shipped
    ETA learns from it; the first, played as recorded, has nothing before it."""
    recordings = _module(monkeypatch, "eta_recordings")
    accuracy = _module(monkeypatch, "eta_accuracy")
    kept = recordings.recordings()
    by_name = {r["project"]: r for r in kept}
    first = by_name["vm json-c-j2-earlier-release"]
    second = by_name["vm json-c-j2-after-earlier-release"]
    assert accuracy.built_before(second, by_name) is first
    assert accuracy.built_before(first, by_name) is None
    [(later_id, run)] = accuracy.load_as_recorded(second, tmp_path, kept)
    with History(tmp_path) as history:
        later_key = history.edge_build_info(later_id)[1]
        assert later_key is not None
        assert history.runs_of_work(later_key, later_id) == []
        [earlier_id] = history.runs_of_other_work(later_key, later_id)
        assert history.get(earlier_id).name == first["project"]
        replay = live_eta.Replay.of(history, later_id, None, run["jobs"], second["dependencies"])
        said = replay.learned(0.5 * replay.duration_s)
        assert said is not None and "another tree" in said.basis, said
    [(alone_id, _)] = accuracy.load_as_recorded(first, tmp_path / "alone", kept)
    with History(tmp_path / "alone") as history:
        assert history.runs_of_other_work(str(history.edge_build_info(alone_id)[1]), alone_id) == []
