"""The variants screen's last-build column: a variant's newest build with the closure size its
result was recorded with (what per-architecture builds exist to shrink).

The builds are real History rows written through its API as the supervisor writes them; the
column is filled by the screen's own worker reading that history.
"""

from __future__ import annotations

import time

import pytest
from driving import wait_until
from recorded_builds import ended_build
from textual.widgets import DataTable

from workbench.history.records import FAILED, SUCCEEDED
from workbench.history.store import History
from workbench.tui.screens.variants.variants_screen import VariantsScreen

SIZED = "onnxruntime-python313-cpu-avx2"
UNSIZED = "onnxruntime-python313-cuda12_9-sm90-avx512"


def recorded(history: History, name: str, state: str, closure: int | None) -> int:
    argv = ("nix", "build", f".#{name}")
    record = ended_build(
        history,
        name,
        backend="nix",
        argv=argv,
        cwd="/c",
        variant=name,
        eta_key=name,
        state=state,
        duration_s=634.0,
        ended=time.time() - 120,
    )
    if closure is not None:
        history.record_artefacts(
            record.id,
            {
                "outputs": [
                    {
                        "link": f"result-{name}",
                        "path": f"/nix/store/{record.id:032d}-{name}",
                        "nar_size": 250 * 1024 * 1024,
                        "closure_size": closure,
                    }
                ],
                "sass": [],
                "ptx": [],
                "warnings": [],
            },
        )
    return record.id


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_last_build_column_shows_the_recorded_closure_size(bench, tui, size) -> None:
    with History(bench.state) as history:
        recorded(history, SIZED, SUCCEEDED, 1536 * 1024 * 1024)
        recorded(history, UNSIZED, FAILED, None)  # failed: nothing produced, nothing sized
    app = tui()
    async with app.run_test(size=size) as pilot:
        await wait_until(
            pilot, "the variants screen", lambda: isinstance(app.screen, VariantsScreen)
        )
        screen = app.screen
        table = screen.query_one("#variants", DataTable)

        def last(name: str) -> str:
            return str(table.get_cell(name, "last")) if name in table.rows else ""

        await wait_until(pilot, "the last builds", lambda: last(SIZED) != "", 30)
        assert last(SIZED) == "ok 11m, 2m ago, 1.5 GiB"
        assert last(UNSIZED).startswith("failed") and "GiB" not in last(UNSIZED)
        # And drawn: filtered to the CPU variants, its row on screen carries the size.
        await pilot.press("/", *"cpu avx2", "enter")
        await wait_until(pilot, "the filter", lambda: table.row_count < 10, 20)
        # Drawn once the table has redrawn (and widened the column) for the filtered rows.
        await wait_until(
            pilot,
            "the size drawn",
            lambda: "ok 11m, 2m ago, 1.5 GiB" in app.export_screenshot().replace("&#160;", " "),
            20,
        )
