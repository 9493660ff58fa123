"""The process's executable mappings, and which mapped file an address falls in."""

from __future__ import annotations

from pathlib import Path


def executable_mappings(pid: int, proc: Path) -> list[tuple[int, int, str]]:
    """(start, end, path) of every executable file mapping: where each address comes from."""
    try:
        text = (proc / str(pid) / "maps").read_text()
    except OSError:
        return []
    mappings = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
            continue
        start_text, _, end_text = parts[0].partition("-")
        mappings.append((int(start_text, 16), int(end_text, 16), parts[5].strip()))
    return mappings


def library_of(address: int, mappings: list[tuple[int, int, str]]) -> str | None:
    for start, end, path in mappings:
        if start <= address < end:
            return path
    return None
