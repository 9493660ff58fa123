"""Edit the build settings: checked as typed, with the recommendation and the memory estimate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Header, Input, Label, Select, SelectionList, Static, Switch

from workbench.configs.matrix import Matrix
from workbench.configs.paths import patches_dir
from workbench.configs.settings import (
    SPECS,
    BuildSettings,
    check_value,
    format_value,
    load_settings,
    set_settings,
)
from workbench.errors import ConfigError, WorkbenchError
from workbench.host.parallelism import JobMemory
from workbench.reading.doctor import DoctorReport
from workbench.tui.widgets.check_list import CheckList
from workbench.tui.widgets.key_footer import KeyFooter

if TYPE_CHECKING:
    from workbench.planning.tuning import JobsChoice

TEXT_KEYS = ("ninja_jobs", "nvcc_threads", "max_jobs", "cuda_architectures", "optimization_flags")
SWITCH_KEYS = ("ccache", "nvcc_host_isa_flags")
# Per-job memory (GiB, as the recommendation computes) used until builds of a target are measured.
# Fields whose values are free text: `?` and `q` typed there are text. In the others (numbers,
# "auto") they can never be part of a value, so they reach the app: help and quit.
FREE_TEXT_KEYS = ("cuda_architectures", "optimization_flags")
MEMORY_KEYS = ("cxx_job_memory_gb", "cuda_job_memory_gb")
# The fields the jobs and memory estimate is made from: while one holds a refused value the
# estimate is not made (never from the last value that passed, which a user never saw: typing
# 999999999999 passed "999" on the way and the estimate said "999 jobs").
ESTIMATE_KEYS = (
    "ninja_jobs",
    "nvcc_threads",
    "cuda_architectures",
    "linkage",
    "ort_version",
    *MEMORY_KEYS,
)


def on_off(value: bool) -> str:
    """A switch's state in words, beside it: not told by colour only."""
    return "on" if value else "off"


class ConfirmDiscard(ModalScreen[str]):
    """Unsaved edits on leaving: save them, discard them, or keep editing."""

    # Focused as the screen is shown, by Textual (a query in on_mount raised NoMatches where
    # the dialog was answered before its Mount was handled: `ConfirmBuild.on_mount`).
    AUTO_FOCUS = "#discard-save"

    BINDINGS = [
        Binding("s", "answer('save')", "Save", id="discard.save"),
        Binding("d", "answer('discard')", "Discard", id="discard.discard"),
        Binding("escape,k", "answer('keep')", "Keep editing", id="discard.keep"),
    ]
    DEFAULT_CSS = """
    ConfirmDiscard { align: center middle; }
    #discard-dialog {
        width: 70; max-width: 95%; height: auto;
        border: thick $warning; background: $panel; padding: 1 2;
    }
    #discard-buttons { height: auto; margin-top: 1; }
    #discard-buttons Button { margin-right: 1; }
    """

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(id="discard-dialog"):
            yield Static(
                Text(f"Unsaved changes: {', '.join(self.keys)}. Save them to settings.toml?")
            )
            with Horizontal(id="discard-buttons"):
                yield Button("Save (s)", id="discard-save", variant="primary")
                yield Button("Discard (d)", id="discard-discard", variant="error")
                yield Button("Keep editing (esc)", id="discard-keep")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss((event.button.id or "discard-keep").removeprefix("discard-"))

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)


class FieldInput(Input):
    """An Input that lets `?` and `q` through to the app's help and quit unless it holds free
    text (`free_text`)."""

    PASSED_ON = frozenset(("?", "q"))

    def __init__(self, *args: Any, free_text: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.free_text = free_text

    def check_consume_key(self, key: str, character: str | None) -> bool:
        if not self.free_text and character in self.PASSED_ON:
            return False
        return super().check_consume_key(key, character)

    async def _on_key(self, event: Any) -> None:
        if not self.free_text and event.character in self.PASSED_ON:
            # Not typed: Input's own handler is skipped and the key goes on up to the app's
            # bindings (help, quit).
            event.prevent_default()
            return
        await super()._on_key(event)


class SettingsScreen(Screen[None]):
    """configs/settings.toml as a form."""

    CSS_PATH = "../../styles/settings.tcss"
    BINDINGS = [
        Binding(
            "ctrl+s",
            "save",
            "Save",
            id="settings.save",
            tooltip="Write settings.toml, keeping its comments",
        ),
        Binding(
            "escape",
            "back",
            "Back",
            id="settings.back",
            tooltip="Leave the settings (asks first when there are unsaved changes)",
        ),
    ]
    AUTO_FOCUS = "#field-ninja_jobs"

    def __init__(
        self,
        matrix: Matrix,
        config_directory: Path,
        report: DoctorReport | None,
        state_directory: Path | None = None,
        target: str | None = None,
    ) -> None:
        super().__init__()
        self.matrix = matrix
        self.config_directory = config_directory
        self.report = report
        self.state_directory = state_directory
        self.target = target
        """The variant (or flavour) the estimate is for; None: the linkage flavour as edited."""
        self._measured: dict[tuple[str, bool], JobMemory | None] = {}
        self.saved: BuildSettings = load_settings(config_directory, matrix)
        self.values: dict[str, Any] = {key: getattr(self.saved, key) for key in SPECS}
        self.errors: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="settings-form"):
            for key in TEXT_KEYS:
                yield from self._row(
                    key,
                    FieldInput(
                        self._text(key),
                        id=f"field-{key}",
                        placeholder="(empty)",
                        free_text=key in FREE_TEXT_KEYS,
                    ),
                )
                if key == "cuda_architectures":
                    yield CheckList(
                        *[
                            (
                                f"{sm.name:6} {', '.join(sm.gpus[:4])}",
                                sm.cmake_arch,
                                sm.cmake_arch in self.values[key],
                            )
                            for sm in self.matrix.sms
                        ],
                        id="pick-sms",
                    )
            yield from self._row(
                "linkage",
                Select(
                    [(f"{f.name} — {f.description}", f.name) for f in self.matrix.flavours],
                    value=self.values["linkage"],
                    allow_blank=False,
                    id="field-linkage",
                ),
            )
            releases = self.matrix.releases.offered if self.matrix.releases else ()
            if releases:
                yield from self._row(
                    "ort_version",
                    Select(
                        [(self._release_label(r), r.version) for r in releases],
                        value=self.values["ort_version"],
                        allow_blank=False,
                        id="field-ort_version",
                    ),
                )
            for key in SWITCH_KEYS:
                with Horizontal(classes="field-row"):
                    yield Label(key, classes="field-label")
                    yield Switch(self.values[key], id=f"field-{key}")
                    yield Label(on_off(self.values[key]), id=f"state-{key}", classes="switch-state")
                yield Static(SPECS[key].meaning, classes="field-meaning")
                yield Static("", id=f"error-{key}", classes="field-error")
            for key in MEMORY_KEYS:
                yield from self._row(
                    key, FieldInput(self._text(key), id=f"field-{key}", placeholder="GiB")
                )
            with Horizontal(classes="field-row"):
                yield Label("patches", classes="field-label")
                yield Static(self._patches_note(), id="patches-note", classes="field-note")
        yield Static(id="advice")
        yield KeyFooter()

    @staticmethod
    def _release_label(release: Any) -> str:
        """One release in the picker: the version and where its source comes from."""
        if release.nixpkgs_own:
            return f"{release.version} — nixpkgs' own, no override"
        return f"{release.version} — {release.tag} source override (names end {release.suffix})"

    def _row(self, key: str, widget: Any) -> ComposeResult:
        with Horizontal(classes="field-row"):
            yield Label(key, classes="field-label")
            yield widget
        yield Static(SPECS[key].meaning, classes="field-meaning")
        yield Static("", id=f"error-{key}", classes="field-error")

    def _patches_note(self) -> str:
        """How many patches of the series the linkage flavour gets; `p` edits them."""
        from workbench.patches.series import load_series

        where = f"{self._patches_shown()}series.toml"
        try:
            series = load_series(self.config_directory, self.matrix)
        except ConfigError as exc:
            return f"{where} has an error: {exc}"
        linkage = self.values["linkage"]
        mine = series.for_target(linkage)
        enabled = sum(patch.enabled for patch in mine)
        return (
            f"{len(mine)} of {where}'s {len(series.patches)} are for {linkage}, "
            f"{enabled} enabled (p: the patches screen)"
        )

    def _patches_shown(self) -> str:
        """The patches folder, relative to the checkout when it is the configs' neighbour."""
        folder = patches_dir(self.config_directory)
        try:
            return f"{folder.relative_to(self.config_directory.parent)}/"
        except ValueError:
            return str(folder)

    def _text(self, key: str) -> str:
        return format_value(self.values[key])

    def on_mount(self) -> None:
        self.sub_title = "settings"
        self.update_advice()

    def _check(self, key: str, value: Any) -> None:
        error = self.query_one(f"#error-{key}", Static)
        try:
            self.values[key] = check_value(self.config_directory, self.matrix, key, value)
        except ConfigError as exc:
            self.errors[key] = str(exc).split(": ", 1)[1]
            error.update(Text(self.errors[key]))  # it quotes what was typed: "[/" is no markup
            error.display = True
        else:
            self.errors.pop(key, None)
            error.display = False
        self.update_advice()

    def on_input_changed(self, event: Input.Changed) -> None:
        key = (event.input.id or "").removeprefix("field-")
        if key in SPECS:
            self._check(key, event.value)
            if key == "cuda_architectures" and key not in self.errors:
                picker = self.query_one("#pick-sms", SelectionList)
                with picker.prevent(SelectionList.SelectedChanged):
                    for sm in self.matrix.sms:
                        if sm.cmake_arch in self.values[key]:
                            picker.select(sm.cmake_arch)
                        else:
                            picker.deselect(sm.cmake_arch)

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        if event.selection_list.id == "pick-sms":
            chosen = [
                sm.cmake_arch
                for sm in self.matrix.sms
                if sm.cmake_arch in event.selection_list.selected
            ]
            extra = [
                a
                for a in self.values["cuda_architectures"]
                if a not in {sm.cmake_arch for sm in self.matrix.sms}
            ]
            field = self.query_one("#field-cuda_architectures", Input)
            field.value = ",".join(chosen + extra)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "field-linkage" and isinstance(event.value, str):
            self._check("linkage", event.value)
            self.query_one("#patches-note", Static).update(self._patches_note())
        elif event.select.id == "field-ort_version" and isinstance(event.value, str):
            self._check("ort_version", event.value)

    def on_switch_changed(self, event: Switch.Changed) -> None:
        key = (event.switch.id or "").removeprefix("field-")
        if key in SWITCH_KEYS:
            self.query_one(f"#state-{key}", Label).update(on_off(event.value))
            self._check(key, event.value)

    def changes(self) -> dict[str, Any]:
        """Keys whose checked value differs from the file's."""
        return {
            key: value
            for key, value in self.values.items()
            if value != getattr(self.saved, key) and key not in self.errors
        }

    def estimate_target(self) -> tuple[str, bool]:
        """The name the estimate is for and whether it compiles CUDA: the variant the screen
        was opened on (the one `b` would build), else the linkage flavour as edited."""
        from workbench.planning.launch import resolve_target

        if self.target is not None:
            try:
                target = resolve_target(self.target, self.matrix, self.values["ort_version"])
            except WorkbenchError:
                pass  # a row the pin cannot build: the linkage's figure instead
            else:
                return target.name, target.cuda
        linkage = self.values["linkage"]
        return linkage, self.matrix.flavour(linkage).cuda

    def measured(self, name: str, cuda: bool) -> JobMemory | None:
        """The per-job peak earlier builds of `name` measured (looked up once per name)."""
        key = (name, cuda)
        if key not in self._measured:
            from workbench.history.store import History, database_path
            from workbench.planning.tuning import measured_job_memory

            found = None
            state = self.state_directory
            if state is not None and database_path(state).exists():
                with History(state) as history:
                    found = measured_job_memory(history, name, cuda)
            self._measured[key] = found
        return self._measured[key]

    def estimate(self) -> JobsChoice | None:
        """The jobs and memory estimate of a build of the estimate's target with the settings
        as edited, from the planner every build takes them from (`tuning.choose_jobs`, with
        the measured per-job figure where there is one, as `b` and `workbench build` do); None
        before the host is detected or while a field it is made from holds a refused value."""
        if self.report is None or any(key in self.errors for key in ESTIMATE_KEYS):
            return None
        from workbench.planning.tuning import choose_jobs, job_memory_for

        name, cuda = self.estimate_target()
        edited = replace(self.saved, **self.values)
        hardware = self.report.hardware
        per_job = job_memory_for(self.measured(name, cuda), edited, cuda)
        return choose_jobs(
            edited, None, per_job, hardware.cpu.cores, hardware.memory.available, cuda
        )

    def update_advice(self) -> None:
        lines: list[Text] = []
        advice = self.report.parallelism if self.report else None
        if advice:
            lines.append(
                Text(
                    f"Recommended: {advice.jobs} jobs × {advice.nvcc_threads} nvcc "
                    f"{'thread' if advice.nvcc_threads == 1 else 'threads'} ({advice.limited_by})"
                )
            )
        choice = self.estimate()
        name, _ = self.estimate_target()
        exceeds = choice is not None and choice.memory.exceeds
        refused = [key for key in ESTIMATE_KEYS if key in self.errors]
        if refused:
            # What is allowed, as `config set` says it (the same check), not a stale figure.
            lines.append(
                Text(
                    f"Memory at peak for {name}: not estimated while "
                    + "; ".join(self.errors[key] for key in refused)
                )
            )
        elif choice is None:
            lines.append(Text(f"Memory at peak for {name}: not known until the host is detected"))
        else:
            # Text, never markup: the basis can quote a file name a build wrote.
            line = Text(f"Memory at peak for {name}: {choice.memory.line()}")
            if exceeds:
                line.append("  exceeds memory: expect an OOM kill (exit 137)", style="bold")
            lines.append(line)
        if self.errors:
            lines.append(Text(f"{len(self.errors)} invalid value(s): fix them to save", "bold"))
        elif self.changes():
            from workbench.configs.settings import per_user

            tracked = [key for key in self.changes() if not per_user(key)]
            note = f" ({', '.join(tracked)}: changes what Nix builds)" if tracked else ""
            lines.append(Text("Unsaved: " + ", ".join(self.changes()) + " — ctrl+s saves" + note))
        advice_widget = self.query_one("#advice", Static)
        advice_widget.update(Text("\n").join(lines))
        advice_widget.set_class(bool(self.errors) or exceeds, "warning")

    def unsaved(self) -> list[str]:
        """The fields with unsaved (or invalid) edits."""
        return list(self.changes()) + list(self.errors)

    def action_back(self) -> None:
        """Leave; unsaved (or invalid) edits are not dropped without asking."""
        self.ask_before(self.app.pop_screen)

    def ask_before(self, leave: Callable[[], Any]) -> None:
        """Call `leave` now when nothing is unsaved, else once the user chose save or discard
        (the app's quit asks the same way)."""
        pending = self.unsaved()
        if not pending:
            leave()
            return

        def answered(answer: str | None) -> None:
            if answer == "discard" or (answer == "save" and self.action_save()):
                leave()

        self.app.push_screen(ConfirmDiscard(pending), answered)

    def on_descendant_focus(self, event: Any) -> None:
        """The focused field with its meaning and error lines in view (tabbing past the bottom
        of the form left it out of sight)."""
        form = self.query_one("#settings-form", VerticalScroll)
        widget = event.widget
        row = widget.parent if widget.parent is not None and widget.parent is not form else widget
        form.scroll_to_center(row, animate=False)

    def action_save(self) -> bool:
        """Write the changes; whether there is nothing left unsaved."""
        if self.errors:
            self.notify("Fix the invalid values first: " + ", ".join(self.errors), severity="error")
            return False
        changes = self.changes()
        if not changes:
            self.notify("Nothing to save")
            return True
        try:
            self.saved = set_settings(self.config_directory, self.matrix, changes)
        except ConfigError as exc:
            self.notify(str(exc), severity="error", timeout=10, markup=False)
            return False
        self.notify(saved_where(self.config_directory, list(changes)), markup=False)
        self.update_advice()
        return True


def saved_where(config_directory: Path, keys: list[str]) -> str:
    """Which file each saved setting went to: the user's (this host, never built) or the
    checkout's tracked one (what Nix builds)."""
    from workbench.configs.settings import per_user, written_to

    mine = [key for key in keys if per_user(key)]
    tracked = [key for key in keys if not per_user(key)]
    parts = []
    if mine:
        parts.append(
            f"Saved {', '.join(mine)} to {written_to(config_directory, mine[0])} "
            "(yours, on this host)"
        )
    if tracked:
        parts.append(
            f"Saved {', '.join(tracked)} to {written_to(config_directory, tracked[0])} "
            "(tracked by the checkout: changes what Nix builds)"
        )
    return "; ".join(parts)
