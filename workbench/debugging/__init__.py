"""Hung programs, debugged: gdb samples of every thread, a diagnosis, smoke runs.

The rooms and modules, core only (nothing here imports Textual):
- gdb/: a gdb process spoken to in MI3 through pygdbmi (gdb_session; mi: a fast MI line
  parser), the gdb started early (gdb_start), ptrace permission checks (ptrace);
- capture/: samples of all threads' frames (loop, gdb_sample, gdb_probes, options), /proc
  activity between them (activity_tracker, proc_threads), program counters (pc_sampling),
  libraries and their debug files (libraries, mappings, symbols, debug_directories),
  leaving the process as it was found;
- diagnosis/: call cycles (cycles), static-initialisation hangs (static_init), lock cycles
  (locks), activity and progress (activity), over shared evidence (evidence), ranked by
  verdict's `diagnose`;
- bridge/: the provider bridge's loop recognised (bridge_names), and the ORT_STATIC_PROVIDERS
  guard as a patch (bridge_patch);
- program: programs the workbench starts (own process group, stopped for sure);
  smoke: smoke runs of built artifacts (smoke_probe runs inside the Python under test);
- bt_report: text and JSON renderings; model: the dataclasses; cpp_names: C++ function
  names made comparable; debug_errors: the errors of these tools.
"""
