"""The domain core imports nothing from Textual: the TUI is a layer on top, never underneath."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import workbench

REPO = Path(__file__).resolve().parents[2]


def core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(workbench.__path__, "workbench."):
        if not info.name.startswith(("workbench.tui", "workbench.cli", "workbench.__main__")):
            names.append(info.name)
    return names


def test_importing_every_core_module_loads_no_textual() -> None:
    modules = core_modules()
    assert "workbench.configs.settings" in modules and "workbench.host.hardware" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.stdout.strip() == ""


def test_version_imports_nothing_heavy() -> None:
    code = (
        "import sys\nfrom workbench.cli.main import main\nmain(['--version'])\n"
        "print(sorted(m for m in ('textual', 'rich', 'psutil', 'tomlkit') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.splitlines()[-1] == "[]"


def test_import_linter_contract() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout
