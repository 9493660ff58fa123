"""Hung programs, debugged: gdb samples of every thread, a diagnosis, smoke runs.

The modules, core only (nothing here imports Textual):
- gdb_session: a gdb process spoken to in MI3 through pygdbmi (mi: a fast MI line parser);
- capture: samples of all threads' frames, /proc activity between them (procfs), ptrace
  permission checks (ptrace), leaving the process as it was found;
- diagnosis: call cycles (the provider bridge's loop: bridge_names), static-initialisation
  hangs, lock cycles, progress; bridge_patch: the ORT_STATIC_PROVIDERS guard as a patch;
- program: programs the workbench starts (own process group, stopped for sure);
  smoke: smoke runs of built artifacts (smoke_probe runs inside the Python under test);
- report: text and JSON renderings; model: the dataclasses.
"""
