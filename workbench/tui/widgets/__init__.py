"""Widgets of the workbench's screens."""
