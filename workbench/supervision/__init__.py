"""Launching, supervising and remembering builds.

A build belongs to a small supervisor process (`supervisor.py`) in its own session, not to the
CLI or TUI that asked for it: closing the terminal, a dropped SSH link or `kill -9` of the CLI
never stops a build or loses a line of its log. The pieces:

- `launch`: the argv of a build (`nix build ...`, `flox build ...`, or any command), validated;
- `tuning`: how many jobs, from settings, the host and the memory earlier builds measured;
- `lock` and `preflight`: one build per checkout; other build processes on the host;
- `supervisor`, `pipeline`, `tree`: the process that owns a build, its log pump, and ending a
  whole process tree;
- `history`, `eta`: the SQLite history (WAL) in the state directory, and ETAs from it;
- `follow`, `report`: reading a build back (attach, logs, status) and comparing two builds.

Nothing here imports Textual.
"""
