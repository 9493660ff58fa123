"""The debug screen: a hung process's diagnosis, its threads, their frames and the source.

Built on workbench.debugging: a live capture runs in a worker thread (gdb takes seconds) and
posts its result back; a capture taken elsewhere (a recorded one, a hung smoke run's) is shown
as it is. `r` samples the same PID again; `g` hands the terminal to an interactive gdb.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Container, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Header, Static
from textual.worker import get_current_worker

from workbench.debugging.bt_report import (
    KIND_TITLES,
    ids_text,
    thread_verdict_groups,
    thread_verdict_label,
    verdict_word,
)
from workbench.debugging.capture.loop import capture as take_capture
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.capture.proc_threads import STATE_WORDS
from workbench.debugging.cpp_names import display_name, short_name
from workbench.debugging.diagnosis.verdict import diagnose
from workbench.debugging.gdb.gdb_session import interactive_command
from workbench.debugging.model import Capture, Diagnosis, Frame, Sample, ThreadStack
from workbench.errors import WorkbenchError
from workbench.planning.shell_command import display
from workbench.progress.visible import visible
from workbench.tui.commands import ScreenCommands
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.steady_table import SteadyTable

# Lines read on each side of a frame's line; the view shows as many of them as fit.
SOURCE_RADIUS = 12
# Longest source line kept: a minified or generated line must not flood the view.
SOURCE_LINE_LIMIT = 400
FUNCTION_WIDTH = 48
# Component classes (styled in debug.tcss): frames and threads in the diagnosis, and each
# thread's verdict by what it says.
INVOLVED = "debug--involved"
VERDICT_CLASSES = {True: "debug--hung", False: "debug--fine", None: "debug--unsure"}
THREAD_COLUMNS = (
    ("", "mark"),
    ("thread", "id"),
    ("LWP", "tid"),
    ("name", "name"),
    ("state", "state"),
    ("verdict", "verdict"),
    ("top function", "top"),
    ("wait", "wait"),
)
FRAME_COLUMNS = (
    ("", "mark"),
    ("#", "level"),
    ("function", "function"),
    ("file:line", "where"),
    ("library", "library"),
)


@dataclass(frozen=True)
class SourceWindow:
    """Lines `first`.. of `path` around `line` (the frame's line), read from disk."""

    path: Path
    line: int
    first: int
    lines: tuple[str, ...]

    def around(self, height: int) -> tuple[int, tuple[str, ...]]:
        """The first line number and the lines of a `height`-line view centred on `line`."""
        height = max(1, height)
        start = max(self.first, min(self.line - (height - 1) // 2, self.last - height + 1))
        offset = start - self.first
        return start, self.lines[offset : offset + height]

    @property
    def last(self) -> int:
        return self.first + len(self.lines) - 1


def resolve_source(file: str, roots: Sequence[Path] = ()) -> Path | None:
    """The file on this machine a frame's `file` names: absolute as is, relative under roots.

    gdb gives absolute paths where the build recorded them; recorded captures and builds with
    relative paths give relative ones, tried under each root and then the working directory.
    """
    path = Path(file)
    candidates = [path] if path.is_absolute() else [*(root / path for root in roots), path]
    for candidate in candidates:
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            continue
    return None


def read_source_window(path: Path, line: int, radius: int = SOURCE_RADIUS) -> SourceWindow | None:
    """Up to `radius` lines each side of `line`, without reading the rest of the file.

    None when the file cannot be read or is shorter than `line` (it changed since the build).
    """
    first = max(1, line - radius)
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            lines = [
                text.rstrip("\r\n")[:SOURCE_LINE_LIMIT]
                for text in itertools.islice(handle, first - 1, line + radius)
            ]
    except OSError:
        return None
    if len(lines) < line - first + 1:
        return None
    return SourceWindow(path, line, first, tuple(lines))


def involved_functions(diagnosis: Diagnosis | None) -> set[str]:
    """The primary finding's functions: the loop's, the deadlocked threads', ..."""
    return set(diagnosis.primary.functions) if diagnosis else set()


def frame_involved(diagnosis: Diagnosis | None, thread: ThreadStack, frame: Frame) -> bool:
    """A frame belongs to the diagnosis: its function is named, in a thread that is named.

    The same rule as `workbench bt`'s `*` marks, so the screen and the report agree.
    """
    if diagnosis is None or frame.function not in involved_functions(diagnosis):
        return False
    threads = diagnosis.primary.threads
    return not threads or thread.tid in threads


def wait_text(thread: ThreadStack) -> str:
    """What a thread waits for: the futex's kind, symbol and owner, else its kernel wchan."""
    wait = thread.wait
    if wait is None:
        return thread.wchan or ""
    text = wait.kind + (f" {wait.symbol}" if wait.symbol else "")
    if wait.owner_tid:
        text += f" (owner {wait.owner_tid})"
    return text


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _base(path: str | None) -> str:
    return path.rsplit("/", 1)[-1] if path else ""


def _names_of(functions: Iterable[str]) -> list[str]:
    """Each function as the diagnosis may write it: full, class::method, and abridged."""
    names = set()
    for function in functions:
        names.update({function, short_name(function), display_name(function)})
    return sorted(names, key=len, reverse=True)


class DiagnosisView(Widget):
    """The verdict, summary, functions, evidence, proposed fix, other findings and notes."""

    COMPONENT_CLASSES = {
        "diagnosis--hung",
        "diagnosis--fine",
        "diagnosis--unsure",
        "diagnosis--function",
        "diagnosis--label",
        "diagnosis--note",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.capture: Capture | None = None
        self.diagnosis: Diagnosis | None = None
        self.waiting = "No capture yet."

    def show(self, capture: Capture | None, diagnosis: Diagnosis | None) -> None:
        self.capture = capture
        self.diagnosis = diagnosis
        self.refresh(layout=True)

    def render(self) -> RenderableType:
        return Group(*self.lines())

    def lines(self) -> list[Text]:
        """The panel's lines, styled from the stylesheet's diagnosis--* classes."""
        if self.diagnosis is None:
            return [Text(self.waiting, style=self.get_component_rich_style("diagnosis--note"))]
        style = self.get_component_rich_style
        primary = self.diagnosis.primary
        names = _names_of(primary.functions)
        function_style = style("diagnosis--function")
        label = style("diagnosis--label")

        def marked(text: str) -> Text:
            line = Text(text)
            line.highlight_words(names, function_style)
            return line

        title = KIND_TITLES.get(primary.kind, primary.kind)
        if primary.pattern:
            title += f" ({primary.pattern})"
        lines = [
            Text.assemble(
                (title, label), " — ", (verdict_word(primary.hung), style(_verdict(primary.hung)))
            ),
            marked(visible(primary.summary)),
        ]
        if primary.functions:
            functions = Text("functions: ", style=label)
            for index, function in enumerate(primary.functions):
                functions.append(" · " if index else "")
                functions.append(visible(display_name(function)), style=function_style)
            lines.append(functions)
        lines += [marked(f"• {visible(item)}") for item in primary.evidence]
        patch = self.diagnosis.proposed_patch
        if patch:
            lines.append(Text.assemble(("proposed fix: ", label), visible(patch.description)))
            if patch.path:
                lines.append(Text(f"  patch written: {visible(patch.path)}"))
            else:
                lines += [Text(f"  {visible(line)}") for line in patch.snippet.splitlines()]
        lines += self._thread_lines()
        if self.capture:
            lines += [
                Text(f"note: {visible(note)}", style=style("diagnosis--note"))
                for note in self.capture.notes
            ]
        return lines

    def _thread_lines(self) -> list[Text]:
        """Each thread's verdict, threads with one verdict together; a verdict other than the
        headline's with its summary and evidence. Findings that name no thread of the last
        sample follow as "also"."""
        assert self.diagnosis is not None
        style = self.get_component_rich_style
        label = style("diagnosis--label")
        primary = self.diagnosis.primary
        groups = thread_verdict_groups(self.capture, self.diagnosis) if self.capture else []
        lines = [Text("per thread:", style=label)] if groups else []
        for group in groups:
            finding = group.finding
            ids = ids_text([thread.gdb_id for thread in group.threads])
            verdict = style(_verdict(finding.hung)) if finding else style("diagnosis--note")
            line = Text.assemble(
                ("● " if finding is primary else "  "),
                f"{ids}: ",
                (visible(group.text()), verdict),
            )
            if finding is primary:
                line.append(" — the diagnosis above", style=style("diagnosis--note"))
            lines.append(line)
            if finding is not None and finding is not primary:
                lines.append(Text(f"    {visible(finding.summary)}"))
                lines += [Text(f"    • {visible(item)}") for item in finding.evidence]
        shown = {id(group.finding) for group in groups}
        for finding in self.diagnosis.findings[1:]:
            if id(finding) in shown:
                continue
            lines.append(
                Text.assemble(
                    ("also: ", label),
                    f"[{finding.kind}, {verdict_word(finding.hung)}] ",
                    visible(finding.summary),
                )
            )
        return lines


def _verdict(hung: bool | None) -> str:
    """The diagnosis--* class of a verdict."""
    return {True: "diagnosis--hung", False: "diagnosis--fine"}.get(hung, "diagnosis--unsure")  # type: ignore[arg-type]


class SourceView(Widget):
    """The source lines around the selected frame, or why there are none."""

    COMPONENT_CLASSES = {"source--current", "source--missing"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window: SourceWindow | None = None
        self.message = "Select a frame to see its source."

    def show(self, window: SourceWindow | None, message: str = "") -> None:
        self.window = window
        self.message = message
        self.refresh()

    def render(self) -> RenderableType:
        window = self.window
        if window is None:
            return Text(self.message, style=self.get_component_rich_style("source--missing"))
        start, lines = window.around(self.content_size.height)
        code = "\n".join(lines)
        syntax = Syntax(
            code,
            Syntax.guess_lexer(str(window.path), code),
            theme="ansi_dark" if self.app.current_theme.dark else "ansi_light",
            line_numbers=True,
            start_line=start,
            highlight_lines={window.line},
            background_color="default",
            word_wrap=False,
        )
        current = window.line - start + 1
        syntax.stylize_range(
            self.get_component_rich_style("source--current"), (current, 0), (current + 1, 0)
        )
        return syntax


class StackTable(SteadyTable):
    """A DataTable whose rows in the diagnosis are styled from the stylesheet."""

    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {INVOLVED, *VERDICT_CLASSES.values()}


class DebugScreen(Screen[None]):
    """A process's threads and frames under the diagnosis of its hang."""

    CSS_PATH = "../../styles/debug.tcss"
    COMMANDS = {ScreenCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding(
            "r",
            "resample",
            "Re-sample",
            id="debug.resample",
            tooltip="Capture the same process again: new samples, a new diagnosis",
        ),
        Binding(
            "g",
            "gdb",
            "gdb",
            id="debug.gdb",
            tooltip="Hand the terminal to an interactive gdb -p PID; re-sample when it quits",
        ),
        Binding(
            "tab",
            "app.focus_next",
            "Pane",
            id="debug.next-pane",
            tooltip="Move between the diagnosis, the threads and the frames",
        ),
        Binding(
            "shift+tab", "app.focus_previous", "Previous pane", id="debug.previous-pane", show=False
        ),
        Binding(
            "left_square_bracket",
            "sample(-1)",
            "Earlier",
            id="debug.earlier-sample",
            tooltip="Show the threads as the previous sample saw them",
        ),
        Binding(
            "right_square_bracket",
            "sample(1)",
            "Later",
            id="debug.later-sample",
            tooltip="Show the threads as the next sample saw them",
        ),
        Binding("escape", "back", "Back", id="debug.back", tooltip="Leave the debug screen"),
    ]

    class Progress(Message):
        """What the capture is doing (from the worker thread)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Captured(Message):
        """A capture and its diagnosis are ready."""

        def __init__(self, capture: Capture, diagnosis: Diagnosis) -> None:
            super().__init__()
            self.capture = capture
            self.diagnosis = diagnosis

    class Failed(Message):
        """The capture failed; `text` says why and what to do."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(
        self,
        pid: int | None = None,
        capture: Capture | None = None,
        *,
        diagnosis: Diagnosis | None = None,
        options: CaptureOptions | None = None,
        source_roots: Sequence[Path] = (),
    ) -> None:
        """Capture `pid` live, or show `capture` (re-sampling its `pid` when pid is given).

        source_roots: directories that relative source paths (a recorded capture's) are
        looked up under.
        """
        if pid is None and capture is None:
            raise ValueError("DebugScreen needs a PID to capture or a capture to show")
        super().__init__()
        self.pid = pid
        self.capture = capture
        self.target_pid: int = pid if pid is not None else capture.pid  # type: ignore[union-attr]
        self.diagnosis = diagnosis
        self.options = options or CaptureOptions()
        self.source_roots = tuple(source_roots)
        self.sample_index = -1
        self.thread_tid: int | None = None
        self.capturing = False
        self.error: str | None = None
        self.captures_taken = 0  # live captures shown so far

    # --- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="debug-error")
        with VerticalScroll(id="debug-diagnosis"):
            yield DiagnosisView(id="debug-diagnosis-view")
        yield StackTable(id="debug-threads", cursor_type="row", zebra_stripes=True)
        with Container(id="debug-stack"):
            yield StackTable(id="debug-frames", cursor_type="row")
            yield SourceView(id="debug-source")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = f"debug · process {self.target_pid}"
        self.query_one("#debug-diagnosis").border_title = "Diagnosis"
        self.query_one("#debug-source").border_title = "Source"
        threads = self.query_one("#debug-threads", DataTable)
        threads.border_title = "Threads"
        for label, key in THREAD_COLUMNS:
            threads.add_column(label, key=key)
        frames = self.query_one("#debug-frames", DataTable)
        frames.border_title = "Frames"
        for label, key in FRAME_COLUMNS:
            frames.add_column(label, key=key)
        threads.focus()
        if self.capture is not None:
            if self.diagnosis is None:
                self.run_capture(None, self.capture)
            else:
                self._show_capture()
        else:
            self.action_resample()

    # --- capturing -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="debug-capture")
    def run_capture(self, pid: int | None, existing: Capture | None = None) -> None:
        """Capture `pid` (or take `existing`) and diagnose it, off the event loop."""
        worker = get_current_worker()

        def progress(text: str) -> None:
            if not worker.is_cancelled:
                self.post_message(self.Progress(text))

        try:
            captured = existing
            if captured is None:
                assert pid is not None
                captured = take_capture(pid, self.options, progress)
            diagnosis = diagnose(captured)
        except (WorkbenchError, OSError) as exc:
            if not worker.is_cancelled:
                self.post_message(self.Failed(str(exc)))
            return
        if not worker.is_cancelled:
            self.post_message(self.Captured(captured, diagnosis))

    def on_debug_screen_progress(self, message: Progress) -> None:
        self._title_diagnosis(message.text)
        if self.diagnosis is None:
            self.query_one(DiagnosisView).waiting = f"Capturing process {self.pid}: {message.text}"
            self.query_one(DiagnosisView).refresh(layout=True)

    def on_debug_screen_captured(self, message: Captured) -> None:
        self.capturing = False
        if message.capture is not self.capture:  # not just the diagnosis of the one given
            self.captures_taken += 1
        self.capture = message.capture
        self.diagnosis = message.diagnosis
        self.sample_index = -1
        self._set_error(None)
        self._show_capture()
        self.refresh_bindings()

    def on_debug_screen_failed(self, message: Failed) -> None:
        self.capturing = False
        kept = " (the capture below is the previous one)" if self.capture else ""
        self._set_error(f"Capture failed: {message.text}{kept}")
        self._title_diagnosis()
        if self.diagnosis is None:
            view = self.query_one(DiagnosisView)
            view.waiting = "No capture: see the error above; r tries again."
            view.refresh(layout=True)
        self.refresh_bindings()

    def _set_error(self, text: str | None) -> None:
        self.error = text
        error = self.query_one("#debug-error", Static)
        error.update(text or "")
        error.display = text is not None

    # --- showing ---------------------------------------------------------------------------

    def _title_diagnosis(self, progress: str = "") -> None:
        """The diagnosis panel's title: what was captured, and what a running capture does."""
        capture = self.capture
        title = "Diagnosis"
        if capture is not None:
            title += (
                f" · {len(capture.samples)} of {capture.requested_samples} samples, "
                f"{capture.interval:g} s apart"
                + (" · symbols only" if capture.symbols_only else "")
            )
        self.query_one("#debug-diagnosis").border_title = title + (
            f" · re-sampling: {progress}" if progress and capture else ""
        )

    def _sample(self) -> Sample | None:
        if self.capture is None or not self.capture.samples:
            return None
        return self.capture.samples[self.sample_index]

    def _show_capture(self) -> None:
        capture = self.capture
        assert capture is not None
        # Whole and shell-quoted, as the build screen shows a build's command; the header cuts
        # it with an ellipsis at its end when the terminal is narrower.
        command = display(capture.command) if capture.command else capture.executable or "?"
        self.sub_title = f"debug · process {capture.pid} · {visible(command)}"
        self._title_diagnosis()
        self.query_one(DiagnosisView).show(capture, self.diagnosis)
        if self.thread_tid is None and self.diagnosis and self.diagnosis.primary.threads:
            self.thread_tid = self.diagnosis.primary.threads[0]
        self._fill_threads()

    def _fill_threads(self) -> None:
        table = self.query_one("#debug-threads", DataTable)
        table.clear()
        sample = self._sample()
        if sample is None or self.capture is None:
            return
        count = len(self.capture.samples)
        number = self.sample_index % count + 1
        table.border_title = f"Threads in sample {number} of {count}"
        involved = set(self.diagnosis.primary.threads) if self.diagnosis else set()
        highlight = table.get_component_rich_style(INVOLVED)
        verdicts = self.diagnosis.thread_verdicts() if self.diagnosis else {}
        for thread in sample.threads:
            activity = self.capture.activity.get(thread.tid)
            state = STATE_WORDS.get(thread.state or "", thread.state or "?")
            if activity and activity.cpu_share is not None:
                state += f" {activity.cpu_share * 100:.0f}%"
            top = display_name(thread.frames[0].function or "??") if thread.frames else "-"
            finding = verdicts.get(thread.tid)
            mine = thread.tid in involved
            # Names and functions come from the program: Text, never markup, and made visible.
            cells = [
                Text(visible(text), style=highlight if mine else "")
                for text in (
                    str(thread.gdb_id),
                    str(thread.tid),
                    thread.name or "",
                    state,
                )
            ]
            verdict_style = (
                table.get_component_rich_style(VERDICT_CLASSES[finding.hung]) if finding else ""
            )
            cells.append(Text(thread_verdict_label(finding), style=verdict_style))
            cells += [
                Text(visible(text), style=highlight if mine else "")
                for text in (_clip(top, FUNCTION_WIDTH), _clip(wait_text(thread), 40))
            ]
            table.add_row("●" if mine else "", *cells, key=str(thread.tid))
        tids = [thread.tid for thread in sample.threads]
        if self.thread_tid not in tids:
            self.thread_tid = tids[0] if tids else None
        if self.thread_tid is not None:
            table.move_cursor(row=tids.index(self.thread_tid))
        self._fill_frames()

    def _thread(self) -> ThreadStack | None:
        sample = self._sample()
        if sample is None or self.thread_tid is None:
            return None
        return sample.thread(self.thread_tid)

    def _fill_frames(self) -> None:
        table = self.query_one("#debug-frames", DataTable)
        table.clear()
        thread = self._thread()
        if thread is None:
            self.query_one(SourceView).show(None, "No thread selected.")
            return
        name = f" {visible(thread.name)!r}" if thread.name else ""
        verdict = (
            thread_verdict_label(self.diagnosis.thread_verdicts().get(thread.tid))
            if self.diagnosis
            else ""
        )
        # A border title is markup: the thread's name is the program's, so it is escaped.
        table.border_title = escape(
            f"Frames of thread {thread.gdb_id} (LWP {thread.tid}{name})"
            + (f" · {verdict}" if verdict and verdict != "—" else "")
        )
        highlight = table.get_component_rich_style(INVOLVED)
        chosen = None
        for frame in thread.frames:
            mine = frame_involved(self.diagnosis, thread, frame)
            if mine and chosen is None:
                chosen = frame.level
            cells = [
                str(frame.level),
                _clip(display_name(frame.function or "??"), FUNCTION_WIDTH),
                frame.location(full=False) if frame.file and frame.line else "",
                _base(frame.library),
            ]
            table.add_row(
                "★" if mine else "",
                *(Text(visible(cell), style=highlight if mine else "") for cell in cells),
                key=str(frame.level),
            )
        if thread.truncated:
            table.add_row("", "…", "more frames than were read", "", "", key="more")
        if chosen is None:
            chosen = self._first_with_source(thread)
        if chosen is not None:
            table.move_cursor(row=table.get_row_index(str(chosen)))
        self._show_source(self._frame(chosen))

    def _first_with_source(self, thread: ThreadStack) -> int | None:
        """The innermost frame whose file is on this machine, else with a file:line at all."""
        located = [(frame, frame.file) for frame in thread.frames if frame.file and frame.line]
        here = (frame for frame, file in located if resolve_source(file, self.source_roots))
        frame = next(here, located[0][0] if located else None)
        return frame.level if frame else None

    def _frame(self, level: int | None) -> Frame | None:
        thread = self._thread()
        if thread is None or level is None:
            return None
        return next((frame for frame in thread.frames if frame.level == level), None)

    def _show_source(self, frame: Frame | None) -> None:
        view = self.query_one(SourceView)
        if frame is None:
            view.border_title = "Source"
            view.show(None, "No frame with a source line.")
            return
        if not (frame.file and frame.line):
            view.border_title = f"Source of frame #{frame.level}"
            reason = (
                "gdb read ELF symbols only (no debug info loaded)"
                if self.capture and self.capture.symbols_only
                else "no debug info for this frame"
            )
            where = f" in {_base(frame.library)}" if frame.library else ""
            view.show(None, f"No file:line for {frame.function or '??'}{where}: {reason}.")
            return
        view.border_title = escape(visible(frame.location(full=True)))
        path = resolve_source(frame.file, self.source_roots)
        window = read_source_window(path, frame.line) if path else None
        if window is None:
            view.show(
                None,
                f"{frame.file} is not on this machine"
                + (f" (or is shorter than line {frame.line})" if path else "")
                + ": no source to show.",
            )
            return
        view.show(window)

    @on(DataTable.RowHighlighted, "#debug-threads")
    def _thread_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is None or not key.isdigit() or int(key) == self.thread_tid:
            return
        self.thread_tid = int(key)
        self._fill_frames()

    @on(DataTable.RowSelected, "#debug-threads")
    def _thread_selected(self) -> None:
        self.query_one("#debug-frames", DataTable).focus()

    @on(DataTable.RowHighlighted, "#debug-frames")
    def _frame_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key.isdigit():
            self._show_source(self._frame(int(key)))

    # --- actions ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # False hides a key that cannot apply here; None shows it disabled for now.
        if action in ("resample", "gdb"):
            return None if self.capturing else self.pid is not None
        if action == "sample":
            return bool(self.capture and len(self.capture.samples) > 1)
        return True

    def action_resample(self) -> None:
        """Capture the same PID again; refused while a capture runs (one debugger at a time)."""
        if self.pid is None or self.capturing:
            return
        self.capturing = True
        self._title_diagnosis(f"capturing process {self.pid}…")
        self.refresh_bindings()
        self.run_capture(self.pid)

    def action_gdb(self) -> None:
        """Suspend the TUI, run an interactive gdb on the process, re-sample afterwards."""
        if self.pid is None or self.capturing:
            return
        try:
            argv = interactive_command(self.pid, self.options.gdb)
        except WorkbenchError as exc:
            self._set_error(str(exc))
            return
        try:
            with self.app.suspend():
                subprocess.run(argv, check=False)
        except SuspendNotSupported:
            self.notify(
                f"This terminal cannot be handed over; run it yourself: {display(argv)}",
                severity="warning",
                timeout=10,
                markup=False,  # a path in the command is text, never markup
            )
            return
        except OSError as exc:
            self._set_error(f"cannot run {argv[0]}: {exc.strerror}")
            return
        self.action_resample()

    def action_sample(self, step: int) -> None:
        if self.capture is None or not self.capture.samples:
            return
        count = len(self.capture.samples)
        self.sample_index = (self.sample_index % count + step) % count
        self._fill_threads()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit()

    def select_thread(self, tid: int) -> None:
        """Show thread `tid` (the command palette's jump)."""
        self.thread_tid = tid
        self._fill_threads()
        self.query_one("#debug-frames", DataTable).focus()

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) for the command palette."""
        commands: list[tuple[str, str, Callable[[], object]]] = []
        if self.pid is not None:
            commands.append(("Debug: re-sample", "capture the process again", self.action_resample))
            commands.append(
                ("Debug: interactive gdb", "gdb -p PID in this terminal", self.action_gdb)
            )
        sample = self._sample()
        for thread in sample.threads if sample else ():
            top = display_name(thread.frames[0].function or "??") if thread.frames else "-"
            commands.append(
                (
                    f"Debug: thread {thread.gdb_id} (LWP {thread.tid} {thread.name or ''})",
                    _clip(top, 60),
                    partial(self.select_thread, thread.tid),
                )
            )
        return commands
