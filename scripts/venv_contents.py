"""What a virtual environment holds, one line each, sorted: its interpreter's version, then
every installed distribution as NAME==VERSION (the venv's own `pip freeze --all`, read with
importlib.metadata so that a venv without pip can be listed too).

Run with the venv's interpreter (`.venv/bin/python scripts/venv_contents.py`): scripts/test.sh
keeps this list beside the venv it makes (.venv/.installed-contents) and `.ci/run` compares it
with the venv as it is now, refusing one that something was installed into, removed from or
upgraded in by hand since (a fresh clone would not have it).
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys


def contents() -> list[str]:
    """The interpreter line, then sorted `name==version` lines, one per distribution."""
    distributions = {
        f"{(dist.metadata['Name'] or '?').lower().replace('_', '-')}=={dist.version}"
        for dist in importlib.metadata.distributions()
    }
    return [f"# python {platform.python_version()} ({sys.base_prefix})", *sorted(distributions)]


if __name__ == "__main__":
    print("\n".join(contents()))
