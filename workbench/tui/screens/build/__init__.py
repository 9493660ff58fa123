"""The build screen (one build live or as it ended), its modals and its process tree reader."""
