"""The progress tests build the generated C++ project that the monitor tests also use."""

from __future__ import annotations

import sys
from pathlib import Path

# tests/ is not a package: make tests/monitor/cxx_project.py importable from here too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "monitor"))
