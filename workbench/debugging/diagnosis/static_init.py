"""Static-initialisation hangs: a thread stuck in a static constructor or the loader's init."""

from __future__ import annotations

import re

from workbench.debugging.diagnosis.evidence import describe, short, user_frame
from workbench.debugging.diagnosis.locks import DEADLOCK_PREFIX
from workbench.debugging.model import (
    Finding,
    Frame,
    ThreadStack,
)

STATIC_INIT = re.compile(r"^(_GLOBAL__sub_I|__static_initialization_and_destruction)")
LOADER_INIT = {"_dl_init", "call_init", "__libc_csu_init", "_dl_start_user", "_init"}


def _static_init_frames(thread: ThreadStack) -> list[Frame]:
    names = thread.functions()
    hits = [frame for frame in thread.frames if STATIC_INIT.match(frame.function or "")]
    if not hits and "main" not in names and any(name in LOADER_INIT for name in names):
        hits = [frame for frame in thread.frames if (frame.function or "") in LOADER_INIT]
    return hits


def static_init(
    tid: int, history: list[ThreadStack], deadlocks: list[Finding], findings: list[Finding]
) -> Finding | None:
    if not all(_static_init_frames(thread) for thread in history):
        return None
    last = history[-1]
    initialiser = _static_init_frames(last)[0]
    names = last.functions()
    before_main = "main" not in names and not last.truncated
    library = initialiser.library or "?"
    where = "before main" if before_main else f"while loading {library.rsplit('/', 1)[-1]} (dlopen)"
    unchanged = len(history) >= 2 and all(t.functions() == names for t in history)
    chain = [
        short(frame.function or "??")
        for frame in reversed(last.frames)
        if frame is initialiser or (frame.function and frame is user_frame([frame]))
    ]
    evidence = [
        f"{describe(last)} is inside {initialiser.function} "
        f"({initialiser.location(full=False)}) {where}",
        "initialiser chain: " + " → ".join(chain[:12]),
    ]
    if unchanged:
        evidence.append(f"its stack is the same in all {len(history)} samples")
    deadlock = next((finding for finding in deadlocks if tid in finding.threads), None)
    loop = next((f for f in findings if f.kind == "call-cycle" and tid in f.threads), None)
    if deadlock:
        deadlock.kind = "static-init"
        clauses = deadlock.summary.removeprefix(DEADLOCK_PREFIX)
        deadlock.summary = f"static-initialisation deadlock {where}: {clauses}"
        deadlock.evidence[:0] = evidence
        return None
    if loop:
        loop.evidence.append(
            f"this happens during static initialisation {where}, in {initialiser.function}"
            + (": the bridge's host pointer is not set yet" if loop.bridge else "")
        )
        return Finding(
            kind="static-init",
            summary=f"{describe(last)} never finishes static initialisation ({where}): it is "
            "caught in the call cycle above",
            hung=True,
            functions=[initialiser.function or "??"],
            threads=[tid],
            evidence=evidence,
        )
    if not unchanged and len(history) >= 2:
        return None  # initialisation in progress: it moves
    top = user_frame(last.frames)
    waiting = f", waiting in {last.wait.kind}" if last.wait else ""
    return Finding(
        kind="static-init",
        summary=f"{describe(last)} is stuck in static initialisation {where} in "
        f"{initialiser.function}{' at ' + (top.function or '') if top else ''}{waiting}",
        hung=True if unchanged else None,
        functions=[initialiser.function or "??", *([top.function] if top and top.function else [])],
        threads=[tid],
        evidence=evidence,
    )
