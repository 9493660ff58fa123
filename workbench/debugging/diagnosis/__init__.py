"""From samples to a verdict: call cycles, static-initialisation hangs, lock cycles, progress.

Pure functions over a Capture (no gdb, no /proc), so recorded samples can be diagnosed again
and tested. Each finding names the functions and threads involved and lists its evidence;
`diagnose` orders them, most telling first:

- call-cycle: a repeating run of frames in one stack that is deeper than was read or keeps
  growing (unbounded recursion, what -O0 makes of the provider bridge), or a thread that is
  always running while its stack, below a few changing top frames, stays the same and the top
  moves among the same few functions (a tail-call loop, what -O2 makes of it). A
  `ProviderHostImpl::X__Y` ↔ `X::Y` pair is named in the bridge's terms.
- static-init: a thread stuck inside static initialisation (`_GLOBAL__sub_I_*`,
  `__static_initialization_and_destruction*`, `_dl_init`, `call_init`), usually before main.
- deadlock: a cycle in the wait-for graph built from mutex owners (`__owner`), joined
  threads and function-local static guards (`__cxa_guard_acquire`).
- lock-wait, spin, busy, waiting: weaker or reassuring findings; a program whose stacks
  change between samples is busy, not hung.
"""
