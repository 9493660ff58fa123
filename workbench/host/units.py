"""Byte counts in words, with binary units that say so.

Memory is measured in bytes and divided by powers of 1024, so it is labelled GiB and MiB:
"21.85 GB" for 21.85 × 1024³ bytes would be 23.46 GB. One formatter for every place that shows
a size (process table, history, report, matrix, CLI, doctor, hosts, OOM notes), so the labels
agree. `scaled_byte_size` is its finer form for sizes that can be a few bytes or many GiB (store
paths' NAR and closure sizes, a thread's stack).
"""

from __future__ import annotations

GIB = 1024**3
MIB = 1024**2
KIB = 1024


def byte_size(value: float | None) -> str:
    """Bytes as "512 MiB" below 1 GiB, else "1.50 GiB"; None as "-"."""
    if value is None:
        return "-"
    return f"{value / GIB:.2f} GiB" if value >= GIB else f"{value / MIB:.0f} MiB"


def gib_size(gib: float) -> str:
    """A figure already in GiB (a setting, an estimate) in the same words as `byte_size`."""
    return byte_size(gib * GIB)


def scaled_byte_size(value: float | None) -> str:
    """Bytes in the largest binary unit that keeps them at 1 or more, one decimal: "512 B",
    "1.5 KiB", "7.9 MiB", "2.3 GiB"; None as "-"."""
    if value is None:
        return "-"
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def duration(seconds: float | None) -> str:
    """1h02m, 3m05s, 12.3s."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
