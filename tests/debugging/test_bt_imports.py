"""`workbench bt` imports what it uses: its report prints a process's text through
`workbench.progress.visible`, and that no longer loads the build-progress tracker and the Nix
log parser with it (workbench/progress/__init__.py loads its names when first used). Before,
they came with it: ~8 ms of bt_report's ~20 ms of imports (the fastest of 25 fresh interpreters
on the loaded 2-core VM; `python -X importtime`)."""

from __future__ import annotations

import subprocess
import sys

import workbench.progress

HEAVY = ("workbench.progress.tracker", "workbench.progress.nix_log", "workbench.progress.steps")


def _loaded_after(code: str) -> set[str]:
    """The workbench.progress modules loaded in a fresh interpreter after running `code`."""
    shown = "import sys; print(*(m for m in sys.modules if m.startswith('workbench.progress')))"
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{shown}"], capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


def test_the_bt_report_does_not_load_the_progress_tracker() -> None:
    code = (
        "import workbench.cli.main, workbench.cli.debug_command\n"
        "from workbench.debugging.bt_report import bt_document, render_text\n"
        "from workbench.debugging.capture.loop import capture"
    )
    loaded = _loaded_after(code)
    assert "workbench.progress.visible" in loaded  # what it uses
    assert not loaded & set(HEAVY), sorted(loaded)


def test_the_progress_package_still_gives_every_name_it_lists() -> None:
    """Each name in its __all__, from the module it lives in; and a first use loads it."""
    from workbench.progress import nix_log, steps, tracker

    homes = {"nix_log": nix_log, "steps": steps, "tracker": tracker}
    for name in workbench.progress.__all__:
        value = getattr(workbench.progress, name)
        assert any(getattr(module, name, None) is value for module in homes.values()), name
    assert _loaded_after("from workbench.progress import ProgressTracker") >= set(HEAVY)
    try:
        workbench.progress.not_a_name  # noqa: B018
    except AttributeError as error:
        assert "not_a_name" in str(error)
    else:
        raise AssertionError("an unknown name was given")
