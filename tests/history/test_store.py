"""The history store opening a history of an older schema: migrated in place, its builds kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def test_a_version_3_history_gains_the_matrix_targets_table_and_keeps_its_builds(
    tmp_path: Path,
) -> None:
    """build_targets joined History's schema in version 4: an older history is migrated in
    place (its builds kept), and a target row goes with its build when that is deleted."""
    from recorded_builds import new_build

    from workbench.history.records import BuildTarget
    from workbench.history.store import History

    with History(tmp_path) as history:
        plan = new_build(
            "matrix", backend="build", argv=("nix", "build"), cwd=str(tmp_path), nix=True
        )
        record = history.create(plan)
    database = tmp_path / "history.sqlite3"
    with sqlite3.connect(database) as db:
        db.execute("DROP TABLE build_targets")
        db.execute("PRAGMA user_version = 3")
    row = BuildTarget(
        "cpu-avx2",
        "onnxruntime-cpu-avx2",
        "/nix/store/a.drv",
        "/nix/store/a",
        "local",
        "built",
        "",
        1.0,
        2.0,
        10,
        20,
        "",
    )
    with History(tmp_path) as history:
        assert history.get(record.id).name == "matrix"
        history.record_targets(record.id, [row])
        assert history.targets(record.id) == [row]
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("DELETE FROM builds WHERE id = ?", (record.id,))
        assert db.execute("SELECT COUNT(*) FROM build_targets").fetchone()[0] == 0
