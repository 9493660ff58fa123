"""Build logs as files: a line index for viewing and searching logs of millions of lines, and
the readable form (Nix's internal-json as `nix build -L` shows it) with its map beside the log."""
