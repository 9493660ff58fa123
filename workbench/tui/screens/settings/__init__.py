"""The settings screen and its discard question."""
