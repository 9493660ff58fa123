"""The patch series (patches/series.toml), checking it against a source tree, making new patches."""
