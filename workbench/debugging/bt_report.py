"""A capture and its diagnosis as text for a terminal, or as one JSON document.

The JSON document (`bt_document`), schema "workbench-bt/1":

    {
      "schema": "workbench-bt/1",
      "pid": 1234, "command": ["./prog"], "executable": "/path/prog", "gdb": "/usr/bin/gdb",
      "requested_samples": 5, "interval_s": 0.2,
      "complete": true,          # false when the process exited part-way
      "exited": false, "symbols_only": false,   # symbols_only: no DWARF, no file:line
      "notes": ["..."],
      "initial_state": "R",      # /proc state when found (T: stopped by a signal)
      "symbols": null | {"path", "level": "full"|"separate"|"names-only"|"none", "missing",
                  "debug_file", "build_id", "debuglink", "searched", "advice", "message",
                  "libraries": [{the same, per shared library the threads run in}]},
                  # "missing" is the executable's; each library has its own
      "pc_rounds": 16,           # program-counter rounds taken before the first attach
      "bridge_code": {"STUB": {"host_method", "instruction"}},  # the bridge read from the
                                 # binary: the host method's jump/call to the stub
      "pc_samples": {"TID": [{"address", "sp", "function", "library",
                      "state",      # digest of all general registers at that read
                      "at_s",       # seconds after the capture's first read
                      "ran_ns",     # CPU time the thread had run (/proc/TID/schedstat)
                      "timeslices",  # times it had been switched in (schedstat)
                      "timeslices_asked",  # the same when the round asked it to stop
                      "faults",     # page faults handled for it (/proc/TID/stat minflt+majflt)
                      "in_syscall"}]},  # the stop came at a system call's end (x86_64)
      "activity": [{"tid", "observations", "states": {"R": 40}, "cpu_seconds", "seconds",
                    "cpu_share", "wchan",
                    "io": {"rchar", "wchar", "syscr", "syscw"},  # advance, first to last look
                    "io_seconds"}],
      "samples": [{"index", "at_s", "duration_s", "threads": [
          {"gdb_id", "tid", "name", "state", "wchan", "truncated", "stack_bytes",
           "wait": null | {"kind", "address", "owner_tid", "symbol"},
           "trail": [...], "trail_top": [...],
           "frames": [{"level", "address": "0x...", "function", "file", "line", "library"}]}]}],
      "diagnosis": {
        "kind": "call-cycle" | "static-init" | "deadlock" | "livelock" | "no-symbols" | "stopped"
                | "lock-wait" | "spin" | "busy" | "waiting" | "asleep" | "exited"
                | "unknown",
        "thread_verdicts": {"TID": {"kind", "hung"}},   # each thread's most telling finding
        "hung": true | false | null,     # null: the samples cannot tell
        "summary": "...", "pattern": "recursion" | "tail-calls" | null,
        "functions": [...], "threads": [tid, ...], "evidence": ["..."],
        "bridge": null | {"host_method", "counterpart", "class", "method"},
        "proposed_patch": null | {"file", "description", "snippet", "diff", "path"},
        "findings": [ {kind, summary, hung, pattern, functions, threads, evidence, bridge} ]
      },
      "program": {...}           # debug-bt only: argv, status, ended_by_itself, output_tail
    }
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.debugging.capture.proc_threads import STATE_WORDS
from workbench.debugging.cpp_names import display_name
from workbench.debugging.model import Capture, Diagnosis, Finding, ThreadActivity, ThreadStack
from workbench.planning.shell_command import display
from workbench.progress.visible import visible

SCHEMA = "workbench-bt/1"
KIND_TITLES = {
    "call-cycle": "call cycle",
    "static-init": "hang in static initialisation",
    "deadlock": "deadlock",
    "livelock": "livelock",
    "lock-wait": "waiting for a lock",
    "spin": "spinning",
    "busy": "busy, making progress",
    "waiting": "all threads waiting",
    "asleep": "asleep (a deep, steady stack)",
    "no-symbols": "symbols missing",
    "stopped": "process stopped by a signal",
    "exited": "process exited",
    "unknown": "no pattern found",
}
# A verdict's kind where a table cell has room for a word or two.
SHORT_KINDS = {
    "call-cycle": "call cycle",
    "static-init": "static init",
    "deadlock": "deadlock",
    "livelock": "livelock",
    "lock-wait": "lock wait",
    "spin": "spinning",
    "busy": "busy",
    "waiting": "waiting",
    "asleep": "asleep",
    "no-symbols": "no symbols",
    "stopped": "stopped",
    "exited": "exited",
    "unknown": "unknown",
}


def bt_document(capture: Capture, diagnosis: Diagnosis, **extra: Any) -> dict[str, Any]:
    """The JSON document described in this module's docstring."""
    return {"schema": SCHEMA, **capture.to_json(), "diagnosis": diagnosis.to_json(), **extra}


def verdict_word(hung: bool | None) -> str:
    return (
        {True: "HUNG", False: "not hung"}.get(hung, "cannot tell")
        if hung is not None
        else "cannot tell"
    )


def render_diagnosis(diagnosis: Diagnosis) -> list[str]:
    """The diagnosis block: headline, summary, functions, evidence, proposed fix."""
    primary = diagnosis.primary
    title = KIND_TITLES.get(primary.kind, primary.kind)
    if primary.pattern:
        title += f" ({primary.pattern})"
    lines = [f"Diagnosis: {title} — {verdict_word(primary.hung)}", f"  {primary.summary}"]
    if primary.functions:
        lines.append("  functions:")
        lines += [f"    {name}" for name in primary.functions]
    if primary.evidence:
        lines.append("  evidence:")
        lines += [f"    - {item}" for item in primary.evidence]
    patch = diagnosis.proposed_patch
    if patch:
        lines.append(f"  proposed fix: {patch.description}")
        if patch.path:
            lines.append(f"  patch written: {patch.path} (checked with git apply --check)")
        else:
            lines += [f"    {line}" for line in patch.snippet.splitlines()]
    others = diagnosis.findings[1:]
    if others:
        lines.append("  also:")
        lines += [_other(finding) for finding in others]
    return lines


def _other(finding: Finding) -> str:
    return f"    - [{finding.kind}, {verdict_word(finding.hung)}] {finding.summary}"


def render_capture(
    capture: Capture, diagnosis: Diagnosis | None = None, frames: int = 24
) -> list[str]:
    """The last sample's threads, identical stacks grouped; `*` marks frames in the diagnosis."""
    if not capture.samples:
        return ["(no samples)"]
    sample = capture.samples[-1]
    marked = set()
    threads_marked: set[int] = set()
    if diagnosis:
        marked = set(diagnosis.primary.functions)
        threads_marked = set(diagnosis.primary.threads)
    groups: dict[tuple[str, ...], list[ThreadStack]] = {}
    for thread in sample.threads:
        groups.setdefault(tuple(thread.functions()), []).append(thread)
    lines = [
        f"Threads in sample {sample.index + 1} of {len(capture.samples)} "
        f"({len(sample.threads)} threads, read in {sample.duration:.2f} s):"
    ]
    for members in groups.values():
        first = members[0]
        lines.append("  " + _thread_header(first, capture.activity.get(first.tid), members))
        show = first.frames[:frames]
        for frame in show:
            star = "*" if frame.function in marked and first.tid in threads_marked else " "
            where = frame.location(full=False)
            name = display_name(frame.function or "??", limit=48)
            lines.append(f"   {star}#{frame.level:<3} 0x{frame.address:016x} {name}  [{where}]")
        hidden = len(first.frames) - len(show)
        if hidden > 0 or first.truncated:
            more = f"{hidden}+" if first.truncated else str(hidden)
            lines.append(f"     … {more} more frames")
    return lines


def _thread_header(
    thread: ThreadStack, activity: ThreadActivity | None, members: list[ThreadStack]
) -> str:
    state = STATE_WORDS.get(thread.state or "", thread.state or "?")
    parts = [
        f"thread {thread.gdb_id} (LWP {thread.tid}{' ' + repr(thread.name) if thread.name else ''})"
    ]
    detail = [state]
    if activity and activity.cpu_share is not None:
        detail.append(f"{activity.cpu_share * 100:.0f}% CPU")
    if thread.wchan:
        detail.append(f"in {thread.wchan}")
    if thread.wait:
        wait = thread.wait
        text = f"waits on {wait.kind}"
        if wait.symbol:
            text += f" {wait.symbol}"
        if wait.owner_tid:
            text += f" (owner LWP {wait.owner_tid})"
        detail.append(text)
    parts.append(f"[{', '.join(detail)}]")
    if len(members) > 1:
        ids = ", ".join(str(member.gdb_id) for member in members[1:9])
        more = f" and {len(members) - 9} more" if len(members) > 9 else ""
        parts.append(f"and threads {ids}{more}: same stack ({len(members)} threads)")
    return " ".join(parts)


def render_text(capture: Capture, diagnosis: Diagnosis) -> str:
    """The whole human report: header, diagnosis, threads, notes."""
    # Whole and shell-quoted, as the build's title shows its command, so it can be pasted;
    # made visible, as the process chose its own command line.
    command = display(capture.command) if capture.command else capture.executable or "?"
    header = (
        f"process {capture.pid} ({visible(command)}): {len(capture.samples)} of "
        f"{capture.requested_samples} sample(s)"
        + (f", {capture.interval:g} s apart" if capture.requested_samples > 1 else "")
        + (f", {capture.pc_rounds} program-counter rounds first" if capture.pc_rounds else "")
        + f", with {capture.gdb}"
        + (" (symbols only)" if capture.symbols_only else "")
    )
    warnings = symbols_warnings(capture)
    lines = [header, *map(visible, warnings), ""]
    lines += [*render_diagnosis(diagnosis), "", *render_capture(capture, diagnosis)]
    lines += ["", *render_thread_verdicts(capture, diagnosis)]
    notes = [note for note in capture.notes if note not in warnings]
    if notes:
        lines += ["", "Notes:", *[f"  - {note}" for note in notes]]
    return "\n".join(lines)


def symbols_warning(capture: Capture) -> str | None:
    """The first missing-symbols message, or None when nothing the threads run lacks them."""
    warnings = symbols_warnings(capture)
    return warnings[0] if warnings else None


def symbols_warnings(capture: Capture) -> list[str]:
    """The missing-symbols messages, shown before anything else: the executable's, then
    each shared library's that the threads run in."""
    symbols = capture.symbols or {}
    documents = [symbols, *(symbols.get("libraries") or [])]
    return [
        str(document["message"])
        for document in documents
        if document.get("missing") and document.get("message")
    ]


@dataclass(frozen=True)
class VerdictGroup:
    """Threads of the last sample sharing one verdict: `finding` is the most telling finding
    naming them (None: no finding names them, they are blocked or idle with no cycle)."""

    finding: Finding | None
    threads: tuple[ThreadStack, ...]

    def text(self) -> str:
        """`call cycle — HUNG (f, g)`, or what no finding means."""
        finding = self.finding
        if finding is None:
            return "nothing to report (blocked or idle, no cycle)"
        title = KIND_TITLES.get(finding.kind, finding.kind)
        functions = ", ".join(display_name(name) for name in finding.functions[:3])
        return f"{title} — {verdict_word(finding.hung)}" + (f" ({functions})" if functions else "")


def thread_verdict_groups(capture: Capture, diagnosis: Diagnosis) -> list[VerdictGroup]:
    """Every thread of the last sample under its verdict, threads with the same one together,
    in the findings' order (the headline's first), the unexplained last. None contradicts the
    headline, since each takes the most telling finding that names it."""
    if not capture.samples:
        return []
    verdicts = diagnosis.thread_verdicts()
    members: dict[int, list[ThreadStack]] = {}
    unexplained: list[ThreadStack] = []
    for thread in capture.samples[-1].threads:
        finding = verdicts.get(thread.tid)
        if finding is None:
            unexplained.append(thread)
        else:
            members.setdefault(id(finding), []).append(thread)
    groups = [
        VerdictGroup(finding, tuple(members[id(finding)]))
        for finding in diagnosis.findings
        if id(finding) in members
    ]
    if unexplained:
        groups.append(VerdictGroup(None, tuple(unexplained)))
    return groups


def thread_verdict_label(finding: Finding | None) -> str:
    """A thread's verdict in a few characters, for a table cell: `call cycle · HUNG`."""
    if finding is None:
        return "—"
    return f"{SHORT_KINDS.get(finding.kind, finding.kind)} · {verdict_word(finding.hung)}"


def render_thread_verdicts(capture: Capture, diagnosis: Diagnosis) -> list[str]:
    """Every thread's verdict, threads with the same one on one line."""
    groups = thread_verdict_groups(capture, diagnosis)
    if not groups:
        return []
    lines = ["Verdict per thread:"]
    for group in groups:
        ids = [thread.gdb_id for thread in group.threads]
        lines.append(f"  {ids_text(ids)}: {group.text()}")
    return lines


def ids_text(ids: list[int]) -> str:
    """`3 thread(s) [1, 2, 5]`, at most 16 ids named."""
    shown = ", ".join(str(gdb_id) for gdb_id in sorted(ids)[:16])
    more = f" and {len(ids) - 16} more" if len(ids) > 16 else ""
    return f"{len(ids)} thread(s) [{shown}{more}]"
