"""Supervising builds.

A build belongs to a small supervisor process (`supervisor.py`) in its own session, not to the
CLI or TUI that asked for it: closing the terminal, a dropped SSH link or `kill -9` of the CLI
never stops a build or loses a line of its log. The pieces:

- `control`: starting and stopping supervised builds, the one path of the CLI and the TUI
  (the argv, the jobs and the other builds on the host are `workbench.planning`'s);
- `lock`: one build per tree it writes;
- `supervisor`, `pipeline`, `tree`, `stopping`, `ending`: the process that owns a build, its
  log pump, ending a whole process tree, and how the build ended;
- `keeper`, `liveness`: the build outliving its supervisor, and telling a lost one;
- `live_eta`, `stall`: ETAs learned from the history (`workbench.history`), and stalls.

Reading a build back (attach, logs, status) and comparing two builds is `workbench.reading`.

Nothing here imports Textual.
"""
