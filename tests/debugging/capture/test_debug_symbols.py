"""Symbols: stripped builds, separate debug files (debuglink, build-id, NIX_DEBUG_INFO_DIRS).

The bridge loop is built once with g++ -O2 -g, then turned with the real binutils into the
shapes release builds come in: stripped, stripped with a debuglink beside it, stripped with
its debug file only under a build-id directory (what Nix's separateDebugInfo makes), and
with a symbol table but no DWARF.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from debug_programs import BRIDGE_LOOP, ONE_SAMPLE, run_tool

from workbench.cli.main import main
from workbench.debugging.capture.loop import capture
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.capture.symbols import check_symbols, read_elf
from workbench.debugging.diagnosis.verdict import diagnose


@pytest.fixture(scope="module")
def shapes(programs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bridge loop as full, stripped, debuglink, build-id and names-only binaries."""
    if shutil.which("objcopy") is None or shutil.which("strip") is None:
        pytest.skip("binutils (objcopy, strip) are not installed")
    directory = tmp_path_factory.mktemp("symbol-shapes")
    full = programs["bridge_o2"]
    found = {"full": full}

    stripped = directory / "bridge_stripped"
    shutil.copy(full, stripped)
    run_tool("strip", "--strip-all", str(stripped))
    found["stripped"] = stripped

    linked_dir = directory / "linked"
    linked_dir.mkdir()
    linked = linked_dir / "bridge_linked"
    shutil.copy(full, linked)
    run_tool("objcopy", "--only-keep-debug", str(linked), str(linked_dir / "bridge_linked.debug"))
    run_tool("strip", "--strip-all", str(linked))
    run_tool("objcopy", f"--add-gnu-debuglink={linked_dir / 'bridge_linked.debug'}", str(linked))
    found["debuglink"] = linked

    by_id = directory / "by_id"
    by_id.mkdir()
    build_id = read_elf(full).build_id
    assert build_id, "g++ on Debian links with --build-id"
    debug_root = directory / "debug-root"
    target = debug_root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    target.parent.mkdir(parents=True)
    run_tool("objcopy", "--only-keep-debug", str(full), str(target))
    found["build_id"] = by_id / "bridge_by_id"
    shutil.copy(full, found["build_id"])
    run_tool("strip", "--strip-all", str(found["build_id"]))
    found["debug_root"] = debug_root

    names_only = directory / "bridge_names_only"
    shutil.copy(full, names_only)
    run_tool("strip", "--strip-debug", str(names_only))
    found["names_only"] = names_only
    return found


def test_elf_facts_and_the_debug_file_search(shapes: dict[str, Path], monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    assert check_symbols(str(shapes["full"])).level == "full"
    stripped = check_symbols(str(shapes["stripped"]))
    assert stripped.level == "none" and stripped.missing
    assert "SYMBOLS MISSING" in stripped.message() and "build-id" in stripped.message()
    linked = check_symbols(str(shapes["debuglink"]))
    assert linked.level == "separate"
    assert linked.debug_file == str(shapes["debuglink"].parent / "bridge_linked.debug")
    # Found by build-id only where its directory is given, or named by NIX_DEBUG_INFO_DIRS.
    assert check_symbols(str(shapes["build_id"])).level == "none"
    given = check_symbols(str(shapes["build_id"]), (str(shapes["debug_root"]),))
    assert given.level == "separate" and "/.build-id/" in given.debug_file
    names_only = check_symbols(str(shapes["names_only"]))
    assert names_only.level == "names-only" and "no file:line" in names_only.message()
    monkeypatch.setenv("NIX_DEBUG_INFO_DIRS", f"/nonexistent:{shapes['debug_root']}")
    assert check_symbols(str(shapes["build_id"])).level == "separate"
    assert read_elf(__file__) is None  # not ELF: no verdict rather than a wrong one


def test_stripped_cycle_is_cannot_tell_never_not_hung(start, shapes, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    # A half-and-half result used to be the failure: every run must say the same.
    for _ in range(3):
        program = start_path(start, shapes["stripped"])
        captured = capture(program.pid, CaptureOptions(**ONE_SAMPLE))
        diagnosis = diagnose(captured)
        assert diagnosis.kind == "no-symbols", diagnosis.summary
        assert diagnosis.hung is None
        assert diagnosis.summary.startswith("cannot tell without symbols")
        assert not any(finding.hung is False for finding in diagnosis.findings)
        assert any("tight loop or a call cycle" in line for line in diagnosis.primary.evidence)
        assert captured.symbols["missing"] is True
        program.process.kill()


def test_separate_debug_files_give_back_the_names(start, shapes, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    for shape, dirs in (("debuglink", ()), ("build_id", (str(shapes["debug_root"]),))):
        program = start_path(start, shapes[shape])
        captured = capture(program.pid, CaptureOptions(debug_dirs=dirs, **ONE_SAMPLE))
        diagnosis = diagnose(captured)
        assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, shape
        assert set(diagnosis.primary.functions) >= BRIDGE_LOOP, shape
        assert captured.symbols["level"] == "separate"
        assert any("debug info read from" in note for note in captured.notes)
        program.process.kill()


def test_cli_says_symbols_are_missing_first(start, shapes, capsys, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    program = start_path(start, shapes["stripped"])
    assert main(["bt", str(program.pid)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"SYMBOLS MISSING: {shapes['stripped']}")
    assert lines[3].startswith("Diagnosis: symbols missing — cannot tell")
    program.process.kill()

    program = start_path(start, shapes["build_id"])
    argv = ["bt", str(program.pid), "--json", "--debug-dir", str(shapes["debug_root"])]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["symbols"]["level"] == "separate"
    assert document["diagnosis"]["kind"] == "call-cycle"


def start_path(start, binary: Path):
    """Start a binary that is not one of the named fixture programs."""
    return start(str(binary), settle=0.2)
