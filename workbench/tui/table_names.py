"""How the tables name builds and tell times: short enough for 80 columns, natural to read."""

from __future__ import annotations

# Every matrix variant's name starts so; narrow tables leave it out.
VARIANT_PREFIX = "onnxruntime-python"


def short_target(name: str) -> str:
    """ "onnxruntime-python313-cuda12_9-sm90-avx512" is "py313-cuda12_9-sm90-avx512"; anything
    else as it is."""
    return "py" + name[len(VARIANT_PREFIX) :] if name.startswith(VARIANT_PREFIX) else name


def took(seconds: float | None) -> str:
    """A build's length for a table: "0.4s", "45s", "12m", "2h05m"."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours}h{minutes:02d}m"


def ago(seconds: float) -> str:
    """How long ago, as one would say it: "just now", "5m ago", "3h ago", "yesterday", "4d ago"."""
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m ago"
    if seconds < 86400:
        return f"{seconds / 3600:.0f}h ago"
    if seconds < 2 * 86400:
        return "yesterday"
    return f"{seconds / 86400:.0f}d ago"
