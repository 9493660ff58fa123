"""Edit the build settings: checked as typed, with the recommendation and the memory estimate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Label, Select, SelectionList, Static, Switch

from workbench.configs.matrix import Matrix
from workbench.configs.settings import (
    SPECS,
    BuildSettings,
    check_value,
    format_value,
    load_settings,
    set_settings,
)
from workbench.errors import ConfigError
from workbench.host.doctor import DoctorReport
from workbench.host.parallelism import GIB, estimated_peak_gb
from workbench.paths import patches_dir

TEXT_KEYS = ("ninja_jobs", "nvcc_threads", "max_jobs", "cuda_architectures", "optimization_flags")


class SettingsScreen(Screen[None]):
    """configs/settings.toml as a form."""

    CSS_PATH = "settings.tcss"
    BINDINGS = [
        Binding(
            "ctrl+s",
            "save",
            "Save",
            id="settings.save",
            tooltip="Write settings.toml, keeping its comments",
        ),
        Binding("escape", "app.pop_screen", "Back", id="settings.back"),
    ]

    def __init__(self, matrix: Matrix, config_directory: Path, report: DoctorReport | None) -> None:
        super().__init__()
        self.matrix = matrix
        self.config_directory = config_directory
        self.report = report
        self.saved: BuildSettings = load_settings(config_directory, matrix)
        self.values: dict[str, Any] = {key: getattr(self.saved, key) for key in SPECS}
        self.errors: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="settings-form"):
            for key in TEXT_KEYS:
                yield from self._row(
                    key,
                    Input(self._text(key), id=f"field-{key}", placeholder="(empty)"),
                )
                if key == "cuda_architectures":
                    yield SelectionList[str](
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
            yield from self._row("ccache", Switch(self.values["ccache"], id="field-ccache"))
            with Horizontal(classes="field-row"):
                yield Label("patches", classes="field-label")
                yield Static(self._patches_note(), id="patches-note", classes="field-note")
        yield Static(id="advice")
        yield Footer()

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

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
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

    def on_switch_changed(self, event: Switch.Changed) -> None:
        self._check("ccache", event.value)

    def changes(self) -> dict[str, Any]:
        """Keys whose checked value differs from the file's."""
        return {
            key: value
            for key, value in self.values.items()
            if value != getattr(self.saved, key) and key not in self.errors
        }

    def update_advice(self) -> None:
        cuda = self.matrix.flavour(self.values["linkage"]).cuda
        per_job = self.values["cuda_job_memory_gb" if cuda else "cxx_job_memory_gb"]
        lines = []
        advice = self.report.parallelism if self.report else None
        jobs = self.values["ninja_jobs"]
        if jobs == "auto":
            jobs = advice.jobs if advice else 1
        threads = self.values["nvcc_threads"] if cuda else 1
        peak = estimated_peak_gb(int(jobs), int(threads), float(per_job))
        if advice:
            lines.append(
                f"Recommended: {advice.jobs} jobs × {advice.nvcc_threads} nvcc threads "
                f"({advice.limited_by})"
            )
        line = f"Peak estimate: {jobs} jobs × {threads} threads × {per_job:g} GB = {peak:.1f} GB"
        if self.report:
            available = self.report.hardware.memory.available / GIB
            line += f" of {available:.1f} GB available"
            if peak > available:
                line += "  [b]exceeds memory: expect an OOM kill (exit 137)[/b]"
        lines.append(line)
        if self.errors:
            lines.append(f"[b]{len(self.errors)} invalid value(s): fix them to save[/b]")
        elif self.changes():
            lines.append("Unsaved: " + ", ".join(self.changes()) + " — ctrl+s saves")
        advice_widget = self.query_one("#advice", Static)
        advice_widget.update("\n".join(lines))
        advice_widget.set_class(bool(self.errors) or peak > self._available(), "warning")

    def _available(self) -> float:
        return self.report.hardware.memory.available / GIB if self.report else float("inf")

    def action_save(self) -> None:
        if self.errors:
            self.notify("Fix the invalid values first: " + ", ".join(self.errors), severity="error")
            return
        changes = self.changes()
        if not changes:
            self.notify("Nothing to save")
            return
        try:
            self.saved = set_settings(self.config_directory, self.matrix, changes)
        except ConfigError as exc:
            self.notify(str(exc), severity="error", timeout=10, markup=False)
            return
        self.notify(f"Saved {', '.join(changes)} to settings.toml")
        self.update_advice()
