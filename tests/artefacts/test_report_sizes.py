"""`workbench report A B` compares what two builds produced: both sizes and the change.

The two builds are real History rows, written through its API as the supervisor writes them
(create, running, finished, then the artefacts `nix path-info --json -S` gave); the report is
the real CLI reading that history.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recorded_builds import ended_build

from workbench.history.store import History

VARIANT = "onnxruntime-python313-cuda12_9-sm90-avx512"
MiB, GiB = 1 << 20, 1 << 30


def recorded_build(history: History, outputs: list[tuple[str, int, int]]) -> int:
    """A finished build of VARIANT whose result links are `outputs` (link suffix, NAR size,
    closure size)."""
    argv = ("nix", "build", f".#{VARIANT}", "--out-link", f"result-{VARIANT}")
    record = ended_build(
        history,
        VARIANT,
        backend="nix",
        argv=argv,
        cwd="/checkout",
        variant=VARIANT,
        eta_key="sizes",
        lines=10,
    )
    history.record_artefacts(
        record.id,
        {
            "outputs": [
                {
                    "link": f"result-{VARIANT}{suffix}",
                    "path": f"/nix/store/{record.id:032d}-{VARIANT}{suffix}",
                    "nar_size": nar,
                    "closure_size": closure,
                }
                for suffix, nar, closure in outputs
            ],
            "sass": ["90"],
            "ptx": [],
            "warnings": [],
        },
    )
    return record.id


def report(state: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", str(state), "report", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_report_shows_both_builds_sizes_and_the_change(tmp_path) -> None:
    state = tmp_path / "state"
    with History(state) as history:
        before = recorded_build(history, [("", 300 * MiB, 3 * GiB)])
        # All architectures to one: a smaller library, and a -dev output beside it.
        after = recorded_build(history, [("", 100 * MiB, 2 * GiB), ("-dev", 20 * MiB, 2 * GiB)])
    table = report(state, str(before), str(after))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # NAR: the outputs' sum; closure: the largest output's closure.
    assert rows["Output size (NAR)"] == "| Output size (NAR) | 300.0 MiB | 120.0 MiB | -60% |"
    assert rows["Closure size"] == "| Closure size | 3.0 GiB | 2.0 GiB | -33% |"
    document = json.loads(report(state, str(before), str(after), "--format", "json"))
    sizes = {row["key"]: row for row in document["table"] if row["key"].endswith("_size")}
    assert sizes["nar_size"]["values"] == [300 * MiB, 120 * MiB]
    assert sizes["nar_size"]["change"] == "-60%"
    assert sizes["closure_size"]["values"] == [3 * GiB, 2 * GiB]
    # Swapped, the change is the growth.
    grown = report(state, str(after), str(before))
    assert "| Output size (NAR) | 120.0 MiB | 300.0 MiB | +150% |" in grown
