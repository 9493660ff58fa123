"""The workbench app: `make_app` builds it for the CLI and for the tests.

Start-up is kept to what the first screen needs (`benchmarks/startup.py` times it): the other
screens are imported when they are opened, and detecting the host and reading the history
(reattaching to a running build, the variants' last builds) run in workers once the first
screen is on the terminal.
"""

from __future__ import annotations

import gc
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding
from textual.worker import WorkerFailed, get_current_worker

from workbench.configs.matrix import Matrix, load_matrix
from workbench.configs.paths import config_dir, state_dir
from workbench.configs.user_settings import REFRESH_DEFAULT_S
from workbench.errors import WorkbenchError
from workbench.tui.clock import Clock
from workbench.tui.commands import ScreenCommands
from workbench.tui.screens.variants.variants_screen import FIRST_FRAME_WAIT_S, VariantsScreen
from workbench.tui.terminal_model import TerminalModel, WrittenUpdate, enabled

if TYPE_CHECKING:
    from textual.screen import Screen

    from workbench.configs.settings import BuildSettings
    from workbench.debugging.model import Capture
    from workbench.reading.doctor import DoctorReport

Doctor = Callable[["Matrix", "BuildSettings"], "DoctorReport"]


# Python's cyclic garbage collector, as a long-running app needs it (see `steady_collector`).
GC_FIRST_THRESHOLD = 10_000


def steady_collector() -> None:
    """Tune the cyclic garbage collector for watching a build: what exists once the first
    screen is up (the modules, Textual's CSS, the app) is frozen out of its passes, and the
    youngest generation is collected every GC_FIRST_THRESHOLD net allocations instead of 700.

    Each frame makes thousands of short-lived objects (strips, segments, styles), and some live
    a few frames (the widgets' kept lines): at Python's thresholds, watching a quiet build ran
    five young collections a second and promoted enough to run a full pass over the ~115,000
    objects of the app (about 100 ms, a frame lost and a key answered late) every 20-30 s: 6 ms
    a second of GC, an eighth of the TUI's CPU (VM, a -j16 build). Frozen and at 10,000: 2 ms a
    second, a young pass every few seconds of ~5 ms, a full one over ~25,000 objects. Memory
    stays bounded: a cycle waits at most GC_FIRST_THRESHOLD allocations to be freed. Done once:
    what a screen opened later makes is collected as usual when that screen goes."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_FIRST_THRESHOLD, middle, oldest)


def detect_this_host(matrix: Matrix, settings: BuildSettings) -> DoctorReport:
    """`workbench doctor` on this host (imported when first called: it is not cheap)."""
    from workbench.reading.doctor import diagnose

    return diagnose(matrix, settings, nvidia_smi="nvidia-smi")


class WorkbenchApp(App[None]):
    """ONNX Runtime build workbench."""

    TITLE = "workbench"
    CSS_PATH = "styles/workbench.tcss"
    COMMANDS = App.COMMANDS | {ScreenCommands}
    BINDINGS = [
        Binding(
            "q", "quit", "Quit", id="quit", tooltip="Leave the workbench (builds keep running)"
        ),
        Binding(
            "question_mark,f1",
            "help",
            "Help",
            id="help",
            tooltip="Every key of this screen and what it does",
        ),
        Binding(
            "h",
            "history",
            "History",
            id="history",
            tooltip="Past builds: open one, its report, compare two",
        ),
        Binding(
            "s",
            "settings",
            "Settings",
            id="settings",
            tooltip="Edit ninja jobs, nvcc threads, CUDA architectures, linkage, ccache, patches",
        ),
        Binding(
            "p",
            "patches",
            "Patches",
            id="patches",
            tooltip="The patch series for the highlighted variant (else the linkage flavour)",
        ),
        Binding(
            "m",
            "matrix",
            "Matrix",
            id="matrix",
            tooltip="A matrix build's targets x state and what each build host builds now",
        ),
    ]

    def __init__(
        self,
        config_directory: Path,
        state_directory: Path,
        matrix: Matrix,
        doctor: Doctor,
        clock: Clock = time.time,
    ) -> None:
        super().__init__()
        self.config_directory = config_directory
        self.state_directory = state_directory
        self.matrix = matrix
        self.doctor = doctor
        self.clock = clock  # what "ago" is measured against (frozen in snapshots)
        self.report: DoctorReport | None = None  # the last detection, shared by the screens
        self.user_errors: list[str] = []  # shown on the error screen; quitting then exits 2
        # Seconds between redraws of the build screen's panes (the per-user `refresh`).
        self.panes_refresh_s: float = REFRESH_DEFAULT_S
        # What the terminal shows, so a frame writes only the cells that changed (over SSH the
        # bytes are the cost of watching); None: every frame as Textual writes it.
        self.terminal_model: TerminalModel | None = TerminalModel() if enabled() else None

    def _display(self, screen: Screen[Any], renderable: object) -> None:
        model = self.terminal_model
        if (
            model is not None
            and renderable is not None
            and self._running
            and not self._closed
            and not self._batch_count
            and not self.is_headless
            and self._driver is not None
            and not self._driver.is_inline
        ):
            width, height = self.size
            if (width, height) != (model.width, model.height):
                model.reset(width, height)
            written = model.render(renderable, self.console._color_system)
            if written is not None:
                renderable = WrittenUpdate(written)
        super()._display(screen, renderable)  # type: ignore[arg-type]

    async def on_mount(self) -> None:
        if self.terminal_model is not None:
            # Another program had the terminal: nothing on it is known any more.
            self.app_resume_signal.subscribe(self, lambda _app: self._forget_terminal())
        self.sub_title = f"ONNX Runtime {self.matrix.ort_version}"
        screen = VariantsScreen(
            self.matrix, self.config_directory, self.doctor, self.state_directory
        )
        await self.push_screen(screen)
        self.reattach(screen)
        if not self.is_headless:
            # Not in tests (headless, in the test runner's process): a real terminal only.
            self.call_after_refresh(steady_collector)

    @work(thread=True, exclusive=True, group="reattach")
    def reattach(self, first: VariantsScreen) -> None:
        """A build already running (from the CLI, another terminal, or before) is shown live.

        Looked up once the first screen is drawn (see `VariantsScreen.drawn`).
        """
        first.drawn.wait(FIRST_FRAME_WAIT_S)
        # Imported only now: importing holds the interpreter's lock, which the first frame needs.
        from workbench.history.store import History, database_path
        from workbench.supervision.liveness import check

        if get_current_worker().is_cancelled or not database_path(self.state_directory).exists():
            return
        with History(self.state_directory) as history:
            running = check(history, history.active())
        running = [record for record in running if record.active]
        if running:
            self.call_from_thread(self._show_running, first, running[0].id)

    def _show_running(self, first: VariantsScreen, build_id: int) -> None:
        # Only over the first screen: a user who already went elsewhere is not interrupted.
        if self.screen is first:
            self.open_build(build_id)

    def _forget_terminal(self) -> None:
        if self.terminal_model is not None:
            self.terminal_model.reset()

    # -- user errors, help, quitting ------------------------------------------------------------

    def show_user_error(self, error: Exception) -> None:
        """A config or history error as one screen (what, where, what to do), never a traceback;
        the app exits 2 when left after one."""
        from workbench.tui.screens.error.error_screen import ErrorScreen, explain

        self.user_errors.append(str(error))
        self.push_screen(ErrorScreen(explain(error, self.config_directory, self.state_directory)))

    def _handle_exception(self, error: Exception) -> None:
        # A WorkbenchError in a worker is a message for the user (a malformed settings.toml read
        # while detecting the host, an unreadable history). Handlers on the event loop catch
        # theirs (`_opening`). Anything else is a bug: Textual's traceback.
        if isinstance(error, WorkerFailed) and isinstance(error.error, WorkbenchError):
            self.show_user_error(error.error)
            return
        super()._handle_exception(error)

    def action_help(self) -> None:
        """The keys of the screen shown, with what each does."""
        from workbench.tui.screens.help.help_screen import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    async def action_quit(self) -> None:
        """Leave; a build still running goes on, and the message says how to come back to it.
        A screen with unsaved edits (settings) asks first."""
        ask = getattr(self.screen, "ask_before", None)
        if callable(ask):
            ask(self._quit_now)
            return
        self._quit_now()

    def _quit_now(self) -> None:
        code = 2 if self.user_errors else 0
        self.exit(return_code=code, message=self._running_message())

    def _running_message(self) -> Text | None:
        """ "build #N (name) goes on under its supervisor: `workbench attach N`" when one runs."""
        from workbench.history.store import History, database_path
        from workbench.supervision.liveness import check

        if not database_path(self.state_directory).exists():
            return None
        try:
            with History(self.state_directory) as history:
                running = [record for record in check(history, history.active()) if record.active]
        except WorkbenchError:
            return None
        command = "workbench"
        if self.state_directory.resolve() != state_dir(None).resolve():
            command += f" --state-dir {shlex.quote(str(self.state_directory))}"
        lines = [
            f"workbench: build #{record.id} ({record.name}) goes on under its supervisor; "
            f"follow it with `{command} attach {record.id}`, stop it with "
            f"`{command} stop {record.id}`"
            for record in running
        ]
        return Text("\n".join(lines)) if lines else None  # Text: a build's name is not markup

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The key of the screen already shown leaves the footer (and its room) to the others.
        # By name: importing those screens here would slow the first one down.
        shown = (action, type(self.screen).__name__)
        return shown not in (
            ("history", "HistoryScreen"),
            ("settings", "SettingsScreen"),
            ("patches", "PatchesScreen"),
            ("matrix", "MatrixScreen"),
        )

    def open_debug(self, pid: int | None = None, capture: Capture | None = None) -> None:
        """Show the debug screen: capture PID live, or show a capture already taken."""
        from workbench.tui.screens.debug.debug_screen import DebugScreen

        self.push_screen(DebugScreen(pid=pid, capture=capture))

    def open_build(self, build_id: int, notices: tuple[str, ...] = ()) -> None:
        """Show build `build_id` live (or as it ended), with what its launch had to say about
        the host (`notices`: other builds running, memory)."""
        from workbench.tui.screens.build.build_screen import BuildScreen

        screen = self.screen
        if isinstance(screen, BuildScreen) and screen.build_id == build_id:
            return  # already shown
        self.push_screen(BuildScreen(self.state_directory, build_id, notices))

    def action_history(self) -> None:
        """Past builds with their measurements."""
        from workbench.tui.screens.history.history_screen import HistoryScreen

        if not isinstance(self.screen, HistoryScreen):
            self._opening(lambda: HistoryScreen(self.state_directory))

    def _opening(self, make: Callable[[], Screen[Any]]) -> None:
        """Push the screen `make` builds; a user error while building it is the error screen."""
        try:
            screen = make()
        except WorkbenchError as exc:
            self.show_user_error(exc)
            return
        self.push_screen(screen)

    def action_patches(self) -> None:
        """The patch series for the variant highlighted on the first screen, else for the
        linkage flavour of settings.toml."""
        from workbench.tui.screens.patches.patches_screen import PatchesScreen

        if isinstance(self.screen, PatchesScreen):
            return
        screen = self.screen
        target = screen._highlighted() if isinstance(screen, VariantsScreen) else None

        def make() -> PatchesScreen:
            from workbench.configs.settings import load_settings

            chosen = target or load_settings(self.config_directory, self.matrix).linkage
            return PatchesScreen(self.matrix, self.config_directory, self.state_directory, chosen)

        self._opening(make)

    def action_matrix(self) -> None:
        """The matrix build highlighted in the history, else the one running, else the latest."""
        from workbench.tui.screens.history.history_screen import HistoryScreen
        from workbench.tui.screens.matrix.matrix_screen import MatrixScreen

        if isinstance(self.screen, MatrixScreen):
            return
        screen = self.screen
        build_id = screen.highlighted_id() if isinstance(screen, HistoryScreen) else None
        self._opening(lambda: MatrixScreen(self.state_directory, build_id))

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's Screenshot (and `action_screenshot`): saved under the state directory
        (or `path`), named after the screen, and the notification says where."""
        from workbench.tui.preferences import save_screenshot

        try:
            saved = save_screenshot(self, self.state_directory, filename, path)
        except OSError as exc:
            self.notify(f"Screenshot not saved: {exc}", severity="error", markup=False)
            return None
        self.notify(f"Screenshot saved to {saved}", title="Screenshot", markup=False)
        return str(saved)

    def watch_theme(self, theme: str) -> None:
        """A theme chosen (the palette's "Change theme") is the next run's too."""
        # Only a theme chosen while the app runs: App.is_mounted is a method (of a widget), so
        # `if self.is_mounted:` was always true and a theme set before the run was saved too.
        if self.is_running:
            from workbench.tui.preferences import remember_theme

            remember_theme(theme)

    def action_settings(self) -> None:
        from workbench.tui.screens.settings.settings_screen import SettingsScreen

        if not isinstance(self.screen, SettingsScreen):
            # The estimate is for the variant `b` would build from here: the highlighted one.
            screen = self.screen
            target = screen._highlighted() if isinstance(screen, VariantsScreen) else None
            self._opening(
                lambda: SettingsScreen(
                    self.matrix,
                    self.config_directory,
                    self.report,
                    state_directory=self.state_directory,
                    target=target,
                )
            )


def make_app(
    config: str | None = None,
    state: str | None = None,
    doctor: Doctor | None = None,
    clock: Clock | None = None,
) -> WorkbenchApp:
    """The app for these config and state directories (the CLI's and the tests' factory).

    `doctor` detects the host and `clock` tells the time; tests and screenshots pass recorded
    hardware and a frozen clock.
    """
    directory = config_dir(config)
    app = WorkbenchApp(
        directory,
        state_dir(state),
        load_matrix(directory),
        doctor or detect_this_host,
        clock or time.time,
    )
    from workbench.tui.preferences import apply_saved

    apply_saved(app)  # the saved theme and keys (a bad [keys] line: one error line, exit 2)
    return app


def run_app(config: str | None = None, state_dir: str | None = None) -> int:
    """Run the app in this terminal; its exit status (2 after a user error, as the CLI's)."""
    app = make_app(config, state_dir)
    app.run()
    return app.return_code or 0
