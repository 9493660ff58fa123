"""Reading builds back: the words shared by the CLI and the TUI (follow, report, the build
screen's text, doctor)."""
