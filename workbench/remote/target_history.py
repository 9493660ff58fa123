"""One history row per target of a matrix build: host, outcome, times, sizes, first error.

The rows live in the build history (table `build_targets`, in its schema and migrated with it,
deleted with the `builds` row of the build as a whole). They are worked out from what is never lost:
the build's log as the supervisor wrote it (hosts, failures, retries) and the supervisor's
`derivations` rows (times); so they can be written whenever the build has ended: by the
command that followed it, or later by `workbench hosts watch ID`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from workbench.history.records import BuildRecord, BuildTarget
from workbench.history.store import History
from workbench.remote.fleet import Fleet, target_states

# The rows are History's (table build_targets, in its schema since version 4).
TargetRow = BuildTarget


def matrix_of(record: BuildRecord) -> dict[str, Any] | None:
    """What a matrix build recorded at launch (targets, hosts), else None."""
    matrix = record.settings.get("matrix") if isinstance(record.settings, dict) else None
    return matrix if isinstance(matrix, dict) else None


def fleet_from_log(log_path: Path, hosts: dict[str, str]) -> Fleet:
    """The fleet's state from a build's whole log (no clock: times come from the history)."""
    fleet = Fleet(host_names=hosts, clock=lambda: None)
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fleet.feed(line.rstrip("\n"))
    except FileNotFoundError:
        pass
    return fleet


def work_out_rows(history: History, record: BuildRecord) -> list[TargetRow]:
    """The per-target rows of an ended matrix build."""
    from workbench.artefacts.sizes import path_sizes

    matrix = matrix_of(record)
    if matrix is None:
        return []
    targets = matrix.get("targets", [])
    fleet = fleet_from_log(Path(record.log_path), matrix.get("hosts", {}))
    times = {
        path: (started, ended) for path, _, started, ended, _ in history.derivations(record.id)
    }
    states = target_states(fleet, targets)
    outcomes = {"done": "built", "in store": "in store", "failed": "failed"}
    built_outs = [
        t["out"] for t, s in zip(targets, states, strict=True) if s.state in ("done", "in store")
    ]
    # A build whose stop event came without Nix's "builder for ... failed" (Nix 2.8 leaves it
    # out of the log when another target failed too) looks done: its output says otherwise.
    missing = invalid_paths(built_outs)
    sizes = path_sizes([out for out in built_outs if out not in missing])
    rows = []
    for target, state in zip(targets, states, strict=True):
        started, ended = times.get(target.get("drv", ""), (state.started, state.ended))
        nar, closure = sizes.get(target.get("out", ""), (None, None))
        outcome = outcomes.get(state.state, "not built")
        first_error = state.first_error
        if outcome == "built" and target.get("out", "") in missing:
            outcome = "failed"
            first_error = first_error or "its output is not in the store after the build"
        rows.append(
            TargetRow(
                name=target["name"],
                attr=target["attr"],
                drv_path=target.get("drv", ""),
                out_path=target.get("out", ""),
                host=state.host,
                outcome=outcome,
                tried_on=",".join(state.retried_from),
                started=started,
                ended=ended,
                nar_size=nar,
                closure_size=closure,
                first_error=first_error,
            )
        )
    return rows


def invalid_paths(paths: list[str]) -> set[str]:
    """Those of `paths` that are not valid in this machine's store (`nix-store
    --check-validity --print-invalid`); none when Nix cannot be asked."""
    if not paths:
        return set()
    try:
        check = subprocess.run(
            ["nix-store", "--check-validity", "--print-invalid", *paths],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(check.stdout.split()) & set(paths)


def record_rows(state_directory: Path, build_id: int, rows: list[TargetRow]) -> None:
    """Store (or replace) the rows of one build, in one transaction."""
    with History(state_directory) as history:
        history.record_targets(build_id, rows)


def stored_rows(state_directory: Path, build_id: int) -> list[TargetRow]:
    """The rows stored for a build (empty if none yet)."""
    with History(state_directory) as history:
        return history.targets(build_id)


def rows_as_json(rows: list[TargetRow]) -> str:
    return json.dumps([row.to_json() for row in rows], sort_keys=True)
