"""What a capture is asked for (its options) and the sampling budget it works within."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.debugging.capture import proc_threads

Progress = Callable[[str], None]
MIN_PC_ROUNDS = 4  # for many threads; few threads get at least FEW_THREADS_PC_ROUNDS
FEW_THREADS_PC_ROUNDS = 10
MIN_WATCH_S = 0.05  # /proc's CPU time needs this much wall time to say "always running"
MIN_PC_ROUNDS_MANY = 2  # 32 threads and more: each round waits for every one to be scheduled
PC_SAMPLE_BUDGET = 128  # thread-samples per capture: 16 rounds of 8 threads, 2 of 64
IDLE_LOOK_S = 0.025  # /proc looks while only gdb is awaited (sampling over)


@dataclass
class CaptureOptions:
    """How to sample: count, spacing, frame limit, time limits and which gdb."""

    samples: int = 5
    interval: float = 0.2
    max_frames: int = 256
    attach_timeout: float = 30.0
    symbols_only_timeout: float = 120.0
    command_timeout: float = 60.0
    gdb: str | None = None
    symbols_only: bool = False
    observe: float = 0.12
    poll_every: float = 0.02
    step_probe: int = 40
    step_timeout: float = 3.0
    max_probed_threads: int = 8
    pc_rounds: int = 16
    max_symbolised: int = 256
    # The CLI, about to print and exit, leaves a detached gdb to exit by itself.
    wait_for_gdb_exit: bool = True
    debug_dirs: tuple[str, ...] = ()
    proc: Path = field(default=proc_threads.PROC)
