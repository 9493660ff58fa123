"""Handing a build to its supervisor from a screen's worker thread, then showing it; for a Nix
build, after showing its exact command, jobs and memory estimate and asking."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from textual.screen import Screen

    from workbench.history.store import History
    from workbench.planning.plan import BuildPlan
    from workbench.supervision.control import Started


def hand_over(screen: Screen[Any], start: Callable[[], Started]) -> None:
    """Call `start` (in a worker thread: it forks a supervisor), then, on the event loop, say
    why it could not start or its warnings, and open the build screen."""
    app = screen.app
    try:
        started = start()
    except WorkbenchError as exc:
        app.call_from_thread(screen.notify, str(exc), severity="error", timeout=12)
        return
    # Shown on the build screen as one line with details on demand, not as toasts over it.
    notices = tuple(started.warnings)
    app.call_from_thread(app.open_build, started.record.id, notices)  # type: ignore[attr-defined]


def ask_and_build(screen: Screen[Any], config_directory: Path, names: list[str]) -> None:
    """In a worker: plan the Nix build of `names`, show the plan on the event loop and, if the
    user agrees, start exactly that plan (in another worker of `screen`)."""
    from workbench.history.store import History
    from workbench.planning.plan import prepare_build

    app = screen.app
    state = app.state_directory  # type: ignore[attr-defined]
    try:
        with History(state) as history:
            if len(names) > 1:  # several: the matrix build `workbench build A B` starts
                planned = plan_several(config_directory, state, history, names)
            else:
                planned = prepare_build(config_directory, history, names, ask_nix=True)
        if planned is None:
            said = f"all {len(names)} targets are in the store already: nothing to build"
            app.call_from_thread(screen.notify, said, timeout=12)
            return
        planned = with_push_to(planned, config_directory)
    except WorkbenchError as exc:
        app.call_from_thread(screen.notify, str(exc), severity="error", timeout=12)
        return

    def ask() -> None:
        from workbench.tui.screens.variants.confirm_build import ConfirmBuild

        def answered(yes: bool | None) -> None:
            if yes:
                screen.run_worker(
                    lambda: start_planned(screen, planned),
                    thread=True,
                    exclusive=True,
                    group="launch",
                )

        app.push_screen(ConfirmBuild(planned), answered)

    app.call_from_thread(ask)


def plan_several(
    config_directory: Path, state: Path, history: History, names: list[str]
) -> BuildPlan | None:
    """The matrix build of `names` over the hosts of hosts.toml, as `workbench build A B`
    plans it (hosts that cannot build left out, targets in the store not built again); None
    when every target is in the store already."""
    from dataclasses import replace

    from workbench.remote.matrix_build import prepare_matrix_build

    matrix = prepare_matrix_build(config_directory, state, history, names, ask_nix=True)
    if matrix.plan is None or matrix.daemon is None:
        return matrix.plan
    from workbench.remote.daemon_builders import local_only_warning

    daemon = local_only_warning(list(matrix.daemon_rows), matrix.daemon) or (
        "the nix-daemon builds this, not `nix build`, and may not build on every host "
        "(`workbench build NAMES --dry-run` shows how it treats each)"
    )
    return replace(matrix.plan, notes=(*matrix.plan.notes, f"warning: {daemon}"))


def with_push_to(planned: BuildPlan, config_directory: Path) -> BuildPlan:
    """The previewed plan asking its supervisor to push it where hosts.toml's push_to says
    (the same request `workbench build` makes), and the preview saying so."""
    from dataclasses import replace

    from workbench.remote.config import with_push_request
    from workbench.supervision.pushing import requested_in

    build = with_push_request(planned.build, config_directory)
    asked = requested_in(build.settings)
    if asked is None:
        return planned
    line = f"then pushed to {asked[0]} (push_to in hosts.toml)"
    return replace(planned, build=build, release_notes=(*planned.release_notes, line))


def start_planned(screen: Screen[Any], planned: BuildPlan) -> None:
    """In a worker: hand exactly the previewed plan to a supervisor, then show the build."""
    from workbench.history.store import History
    from workbench.supervision import control

    state = screen.app.state_directory  # type: ignore[attr-defined]

    def start() -> Started:
        with History(state) as history:
            return control.start(state, history, planned.build, False, list(planned.warnings))

    hand_over(screen, start)
