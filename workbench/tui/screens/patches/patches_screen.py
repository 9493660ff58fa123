"""The patches screen: the series for one package, toggled, checked per hunk, its diffs read.

Everything here goes through the core (`workbench.patches`): toggling writes series.toml the
way `workbench patches enable|disable` does, and the check is `workbench patches check`'s, so
the screen and the CLI never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Label, Static

from workbench.configs.matrix import Matrix
from workbench.errors import WorkbenchError
from workbench.patches.checking import ALREADY_APPLIED, APPLIES, PatchCheck, SeriesCheck
from workbench.patches.series import Series, SeriesPatch, load_series, set_enabled, target_name
from workbench.tui.commands import ScreenCommands
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.steady_table import SteadyTable

STATUS_STYLE = {APPLIES: "green", ALREADY_APPLIED: "yellow"}


def check_cell(check: PatchCheck | None) -> Text:
    """The check column: blank until checked, then the status in its colour."""
    if check is None:
        return Text("")
    return Text(check.status, style=STATUS_STYLE.get(check.status, "bold red"))


def describe(series: Series, patch: SeriesPatch, check: PatchCheck | None) -> Text:
    """The lines above the diff: what the patch fixes, where it applies, its check per hunk."""
    text = Text()
    text.append(patch.name, style="bold")
    text.append(f"  ({patch.group}, {'enabled' if patch.enabled else 'disabled'})\n")
    text.append(f"{patch.fixes}\n")
    applies = ", ".join([*patch.flavours, *patch.variants]) or "nothing"
    text.append(f"applies to: {applies}\n", style="dim")
    if not series.file_of(patch).is_file():
        text.append(f"file missing: {patch.file} is not in patches/\n", style="bold red")
    if check is not None:
        text.append(f"check: {check.status}", style=STATUS_STYLE.get(check.status, "bold red"))
        text.append(f"{': ' + check.detail if check.detail else ''}\n")
        for hunk in check.hunks:
            style = STATUS_STYLE.get(hunk.status, "red")
            text.append(f"  hunk #{hunk.number} {hunk.path}: ", style="dim")
            text.append(hunk.status, style=style)
            text.append(f"{': ' + hunk.detail if hunk.detail else ''}\n")
    return text


class PatchesScreen(Screen[None]):
    """The patch series for one variant or flavour."""

    CSS_PATH = "../../styles/patches.tcss"
    COMMANDS = {ScreenCommands}

    BINDINGS = [
        Binding(
            "space",
            "toggle",
            "On/off",
            id="patches.toggle",
            tooltip="Enable or disable the highlighted patch (writes patches/series.toml)",
        ),
        Binding(
            "c",
            "check",
            "Check",
            id="patches.check",
            tooltip="Apply the enabled series to a copy of the source tree; result per hunk",
        ),
        Binding(
            "i",
            "iterate",
            "Rebuild workspace",
            id="patches.iterate",
            tooltip="`workbench iterate`: re-apply changed patches, rebuild what changed "
            "(a new workspace copies the source tree typed above)",
        ),
        Binding(
            "b",
            "clean_build",
            "Nix build",
            id="patches.build",
            tooltip="Start the clean Nix build of this package, with the enabled series",
        ),
        Binding("escape", "back", "Back", id="patches.back", tooltip="Leave the patches"),
    ]

    def __init__(
        self,
        matrix: Matrix,
        config_directory: Path,
        state_directory: Path,
        target: str,
        source: Path | None = None,
    ) -> None:
        super().__init__()
        self.matrix = matrix
        self.config_directory = Path(config_directory)
        self.state_directory = Path(state_directory)
        self.target = target_name(matrix, target)
        self.source = source
        self.series: Series | None = None
        self.checks: dict[str, PatchCheck] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="patches-summary")
        with Horizontal(id="patches-source-row"):
            yield Label("check against ", id="patches-source-label")
            yield Input(
                value=str(self.source) if self.source else "",
                placeholder="a source tree (type it, then Enter or c)",
                id="patches-source",
            )
        yield SteadyTable(id="patches-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="patch-detail"):
            yield Static(id="patch-description")
            yield Static(id="patch-diff")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = f"patches for {self.target}"
        table = self.query_one("#patches-table", DataTable)
        for label, key in (("#", "n"), ("on", "on"), ("patch", "name"), ("group", "group")):
            table.add_column(label, key=key)
        table.add_column("check", key="check")
        table.add_column("fixes", key="fixes")
        self.reload()
        table.focus()

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) for the command palette."""
        return [
            (
                "Patches: switch on/off",
                "enable or disable the highlighted patch",
                self.action_toggle,
            ),
            ("Patches: check", "apply the series to a copy of a source tree", self.action_check),
            ("Patches: rebuild the workspace", "workbench iterate", self.action_iterate),
            ("Patches: clean Nix build", "build this package with Nix", self.action_clean_build),
        ]

    # -- the series --------------------------------------------------------------------------

    def _for_target(self) -> list[SeriesPatch]:
        return self.series.for_target(self.target) if self.series else []

    def reload(self) -> None:
        """Read series.toml again and redraw the table, keeping the cursor's patch."""
        try:
            self.series = load_series(self.config_directory, self.matrix)
        except WorkbenchError as exc:
            self.series = None
            self.query_one("#patches-summary", Static).update(Text(str(exc), style="bold red"))
            return
        table = self.query_one("#patches-table", DataTable)
        keep = self._highlighted_name()
        table.clear()
        patches = self._for_target()
        for patch in patches:
            table.add_row(
                str(self.series.patches.index(patch) + 1),
                "✓" if patch.enabled else "·",
                patch.name,
                patch.group,
                check_cell(self.checks.get(patch.name)),
                patch.fixes,
                key=patch.name,
            )
        enabled = sum(p.enabled for p in patches)
        summary = Text()
        summary.append(f"{self.target}: ", style="bold")
        summary.append(
            f"{len(patches)} of the series' {len(self.series.patches)} patches are for it, "
            f"{enabled} enabled, applied in this order"
        )
        if not patches:
            summary.append("\nno patch applies to it; `workbench patches new` makes one")
        self.query_one("#patches-summary", Static).update(summary)
        names = [p.name for p in patches]
        if keep in names:
            table.move_cursor(row=names.index(keep))
        self._show_detail()

    def _highlighted_name(self) -> str | None:
        table = self.query_one("#patches-table", DataTable)
        if not table.row_count:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def _highlighted(self) -> SeriesPatch | None:
        name = self._highlighted_name()
        return self.series.get(name) if self.series and name else None

    @on(DataTable.RowHighlighted, "#patches-table")
    def _row_moved(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        patch = self._highlighted()
        description = self.query_one("#patch-description", Static)
        diff = self.query_one("#patch-diff", Static)
        if patch is None or self.series is None:
            description.update("")
            diff.update("")
            return
        description.update(describe(self.series, patch, self.checks.get(patch.name)))
        file = self.series.file_of(patch)
        text = file.read_text(errors="replace") if file.is_file() else ""
        diff.update(Syntax(text, "diff", theme="ansi_dark", word_wrap=False) if text else "")

    # -- actions -----------------------------------------------------------------------------

    # The screen's own `toggle` (its binding: a patch on or off) replaces DOMNode's generic
    # action_toggle(attribute_name) on purpose: no binding of this screen names an attribute.
    def action_toggle(self) -> None:  # type: ignore[override]
        patch = self._highlighted()
        if patch is None:
            return
        try:
            set_enabled(self.config_directory, patch.name, not patch.enabled, self.matrix)
        except WorkbenchError as exc:
            self.notify(str(exc), severity="error", timeout=10, markup=False)
            return
        self.checks.clear()  # the series changed: earlier results no longer hold
        self.notify(f"{patch.name} {'disabled' if patch.enabled else 'enabled'}", markup=False)
        self.reload()

    @on(Input.Submitted, "#patches-source")
    def _source_given(self) -> None:
        self.action_check()

    def action_check(self) -> None:
        value = self.query_one("#patches-source", Input).value.strip()
        if not value:
            self.query_one("#patches-source", Input).focus()
            self.notify("type the source tree to check against, then Enter")
            return
        self.run_check(Path(value).expanduser())

    @work(thread=True, exclusive=True, group="check")
    def run_check(self, source: Path) -> None:
        """`workbench patches check --source SOURCE --for TARGET`, off the event loop."""
        from workbench.patches.checking import check_series

        if self.series is None:
            return
        patches = [p for p in self._for_target() if p.enabled]
        try:
            result = check_series(self.series, patches, source)
        except WorkbenchError as exc:
            # The message quotes the path typed in: text, never markup.
            self.app.call_from_thread(
                self.notify, str(exc), severity="error", timeout=10, markup=False
            )
            return
        self.app.call_from_thread(self._checked, result)

    def _checked(self, result: SeriesCheck) -> None:
        self.checks = {check.name: check for check in result.patches}
        failed = [check.name for check in result.patches if not check.ok]
        if failed:
            self.notify(
                f"do not apply cleanly: {', '.join(failed)}", severity="warning", markup=False
            )
        else:
            self.notify(f"all {len(result.patches)} patches apply to {result.source}", markup=False)
        self.reload()
        self.query_one("#patches-table", DataTable).focus()

    def action_iterate(self) -> None:
        value = self.query_one("#patches-source", Input).value.strip()
        self.launch_iterate(Path(value).expanduser() if value else None)

    @work(thread=True, exclusive=True, group="launch")
    def launch_iterate(self, source: Path | None) -> None:
        """`workbench iterate TARGET`'s workspace update and incremental build, then the build
        screen (the smoke run stays with the CLI, which waits for the build's end)."""
        from workbench.history.store import History
        from workbench.iterate import session
        from workbench.supervision import control
        from workbench.tui.launching import hand_over

        def say(message: str) -> None:
            self.app.call_from_thread(self.notify, message, timeout=6)

        def start() -> control.Started:
            prepared = session.prepare(
                self.config_directory, self.state_directory, self.target, source, say
            )
            if not prepared.fast:  # the phases run inside the supervised build
                say("first the derivation's phases: " + "; ".join(prepared.due))
            with History(self.state_directory) as history:
                choice = session.choose_jobs(history, prepared)
                return control.start(
                    self.state_directory,
                    history,
                    session.plan(prepared, choice.jobs, choice.source),
                    False,
                    [choice.warning] if choice.warning else [],
                )

        hand_over(self, start)

    def action_clean_build(self) -> None:
        self.launch_clean_build()

    @work(thread=True, exclusive=True, group="launch")
    def launch_clean_build(self) -> None:
        """The clean Nix build of the target, shown and asked first as the variants screen's
        `b` does."""
        from workbench.tui.launching import ask_and_build

        ask_and_build(self, self.config_directory, [self.target])

    def action_back(self) -> None:
        self.app.pop_screen()
