"""The build screen's words with no Textual in them: the head lines, the progress line, the
sizes a finished build produced, and the graphs' axis figures."""

from __future__ import annotations

from typing import Any

from workbench.history.records import BuildRecord
from workbench.planning.shell_command import display
from workbench.reading.follow import (
    duration,
    eta_text,
    outcome_line,
    peak_text,
    progress_text,
    running_text,
    size,
)


def sizes_text(artefacts: dict[str, Any] | None) -> str:
    """ "result-NAME: NAR 312.0 MiB, closure 1.2 GiB" for what a finished build produced (the
    installed outputs; the debug output's size apart)."""
    from workbench.artefacts.sizes import from_json, human_bytes

    produced = from_json(artefacts)
    if produced is None or not produced.outputs:
        return ""
    text = (
        f"{produced.outputs[0].link}: NAR {human_bytes(produced.nar_size)}, "
        f"closure {human_bytes(produced.closure_size)}"
    )
    if produced.debug_nar_size is not None:
        text += f"; debug output NAR {human_bytes(produced.debug_nar_size)}"
    if produced.sass:
        text += f", SASS {' '.join(produced.sass)}"
    return text


def head_lines(record: BuildRecord, now: float | None = None) -> tuple[str, str]:
    """The title line and the detail line: what the build works on now (the files its
    compilers compile, the derivations its builders build), never ninja's last finished line
    presented as current."""
    command = display(record.argv)  # whole and quoted, one line: it can be copied into a shell
    title = (
        f"#{record.id} {record.name} · {record.state} · {duration(record.elapsed(now))}"
        f" · {record.backend}: {command}"
    )
    if not record.active:
        return title, outcome_line(record)
    progress = record.progress_view
    derivations = progress.derivations
    if derivations:
        first = derivations[0]
        parts = [f"derivation {first.name}"]
        if first.phase:
            parts.append(first.phase)
        if first.step is not None:
            parts.append(f"{first.step.tool} {first.step.done}/{first.step.total}")
        if len(derivations) > 1:
            parts.append(f"+{len(derivations) - 1} more building")
        return title, " · ".join(parts)
    running = running_text(record.live_view)
    if running:
        return title, running
    step = progress.step
    if step is not None and step.description:
        return title, f"last finished: {step.description}"
    return title, progress.last_line


def progress_line(record: BuildRecord, basis: bool = True, peak_rss: int | None = None) -> str:
    """ "ninja 12/40 (30%) · ETA 1m05s (50s–1m30s) · peak 1.1 GiB · ETA basis: earlier builds
    #2" and the like: the ETA with its likely range, the build's own peak RSS (`peak_rss`: an
    ended build's, as history measured it) and, with `basis`, last (a line too long for its
    width loses its end, never a figure), what the ETA rests on."""
    progress = record.progress_view
    live = record.live_view
    parts = [progress_text(progress) or "no progress reported yet"]
    said = None
    if record.active:
        eta = eta_text(live.eta)
        if eta is not None and live.eta is not None:
            said = live.eta.basis if basis else None
            parts.append(eta)
        else:
            parts.append("ETA: not known yet")
    peak = f"peak {size(peak_rss)}" if peak_rss else peak_text(live)
    if peak:
        parts.append(peak)
    if said:
        parts.append(f"ETA basis: {said}")
    return " · ".join(parts)


def percent(value: float) -> str:
    return f"{value:.0f}%"


def memory(value: float) -> str:
    """Bytes in binary units, short enough for the graph's axis: "87Mi", "3.1Gi", "251Gi"."""
    if value < 1024**3:
        return f"{value / 1024**2:.0f}Mi"
    if value < 100 * 1024**3:
        return f"{value / 1024**3:.1f}Gi"
    return f"{value / 1024**3:.0f}Gi"
