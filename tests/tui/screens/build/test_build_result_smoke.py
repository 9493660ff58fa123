"""A finished variant build on the build screen: its sizes, and `k` runs its smoke check.

The build is recorded in a real history as the supervisor records one (state, artefacts with
the sizes `nix path-info` gave), and its result-NAME links to this suite's virtual environment,
whose bin/python has the onnxruntime wheel: what `k` runs is the real smoke probe.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from driving import open_screen, wait_until
from recorded_builds import ended_build
from textual.widgets import Static

from workbench.history.store import History

VARIANT = "onnxruntime-python313-cpu-avx2"


def _recorded_build(state: Path, checkout: Path) -> int:
    link = checkout / f"result-{VARIANT}"
    link.symlink_to(sys.prefix, target_is_directory=True)
    with History(state) as history:
        argv = ("nix", "build", f".#{VARIANT}", "--out-link", f"result-{VARIANT}")
        record = ended_build(
            history,
            VARIANT,
            backend="nix",
            argv=argv,
            cwd=str(checkout),
            variant=VARIANT,
            lines=10,
        )
        history.record_artefacts(
            record.id,
            {
                "outputs": [
                    {
                        "link": link.name,
                        "path": str(Path(sys.prefix).resolve()),
                        "nar_size": 300 * 1024 * 1024,
                        "closure_size": 3 * 1024**3,
                    }
                ],
                "sass": [],
                "ptx": [],
                "warnings": [],
            },
        )
    return record.id


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_sizes_shown_and_k_smokes_the_built_variant(tmp_path, bench, tui, size) -> None:
    pytest.importorskip("onnxruntime", reason="the smoke check needs the onnxruntime wheel")
    pytest.importorskip("onnx", reason="the smoke model is built with the onnx package")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    build_id = _recorded_build(bench.state, checkout)
    app = tui()
    async with app.run_test(size=size) as pilot:
        screen = await open_screen(app, pilot, build_id)
        detail = screen.query_one("#build-detail", Static)
        await wait_until(pilot, "the sizes", lambda: "closure 3.0 GiB" in str(detail.render()), 20)
        assert f"result-{VARIANT}: NAR 300.0 MiB" in str(detail.render())
        assert screen.check_action("smoke", ()) is True
        await pilot.press("k")
        line = screen.query_one("#build-smoke", Static)
        await wait_until(
            pilot, "the smoke verdict", lambda: "smoke PASSED" in str(line.render()), 120
        )
        assert f"smoking result-{VARIANT}" in str(line.render())
        assert line.has_class("-passed")
