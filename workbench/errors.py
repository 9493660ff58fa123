"""Errors the workbench reports to the user: each says what failed, why, and what to do."""

from __future__ import annotations


class WorkbenchError(Exception):
    """An error whose message is written for the user; the CLI prints it without a traceback."""


class ConfigError(WorkbenchError):
    """A configuration file is unreadable, malformed, or holds a value that is not allowed."""


class PatchError(WorkbenchError):
    """A patch cannot be named, written, checked or applied as asked; nothing was changed."""
