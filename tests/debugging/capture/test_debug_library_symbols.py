"""Symbols of a shared library the hung code is in, not of the program that loaded it.

The real case: a python process that loaded libonnxruntime.so, or a program whose provider
(libonnxruntime_providers_cuda.so) came in through dlopen. The program's own binary holds
none of the loop, so its symbols say nothing. Here the bridge loop (bridge_provider.cc and
bridge_host.cc, the host's main renamed) is built with the real g++ as a shared library
that exports one entry, as ORT's libraries export their C API only, and is loaded by
library_host.cc through dlopen. The library comes in the shapes release builds ship:
with debug info, stripped, stripped with a .gnu_debuglink file beside it, and stripped with
its debug file only under a build-id directory given with --debug-dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from debug_programs import BRIDGE_LOOP, FIXTURES, ONE_SAMPLE, run_tool

from workbench.cli.main import main
from workbench.debugging.capture.debug_directories import store_path
from workbench.debugging.capture.loop import capture
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.capture.symbols import (
    check_libraries,
    is_runtime_or_system_library,
    read_elf,
)
from workbench.debugging.diagnosis.verdict import diagnose


@pytest.fixture(scope="module")
def library(programs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The loader, and the bridge library as full, stripped, debuglink and build-id shapes."""
    if shutil.which("objcopy") is None or shutil.which("strip") is None:
        pytest.skip("binutils (objcopy, strip) are not installed")
    directory = tmp_path_factory.mktemp("library-shapes")
    exports = directory / "exports.map"
    exports.write_text("{ global: bridge_main; local: *; };\n")
    full = directory / "full" / "libbridge.so"
    full.parent.mkdir()
    sources = ["bridge_provider.cc", "bridge_host.cc", "bridge_library_entry.cc"]
    run_tool(
        "g++", "-O2", "-g", "-fPIC", "-shared", "-pthread", f"-I{FIXTURES}",
        "-Dmain=bridge_main_cxx", *(str(FIXTURES / name) for name in sources),
        f"-Wl,--version-script={exports}", "-o", str(full),
    )  # fmt: skip
    host = directory / "library_host"
    run_tool("g++", "-O2", "-g", str(FIXTURES / "library_host.cc"), "-o", str(host), "-ldl")
    found = {"host": host, "full": full}

    stripped = directory / "stripped" / "libbridge_stripped.so"
    stripped.parent.mkdir()
    shutil.copy(full, stripped)
    run_tool("strip", "--strip-all", str(stripped))
    found["stripped"] = stripped

    linked = directory / "linked" / "libbridge_linked.so"
    linked.parent.mkdir()
    shutil.copy(full, linked)
    debug_file = linked.parent / "libbridge_linked.so.debug"
    run_tool("objcopy", "--only-keep-debug", str(linked), str(debug_file))
    run_tool("strip", "--strip-all", str(linked))
    run_tool("objcopy", f"--add-gnu-debuglink={debug_file}", str(linked))
    found["debuglink"], found["debug_file"] = linked, debug_file

    build_id = read_elf(full).build_id
    assert build_id, "g++ on Debian links with --build-id"
    debug_root = directory / "debug-root"
    target = debug_root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    target.parent.mkdir(parents=True)
    run_tool("objcopy", "--only-keep-debug", str(full), str(target))
    by_id = directory / "by_id" / "libbridge_by_id.so"
    by_id.parent.mkdir()
    shutil.copy(full, by_id)
    run_tool("strip", "--strip-all", str(by_id))
    found["build_id"], found["debug_root"], found["id"] = by_id, debug_root, build_id
    return found


def _library_status(captured, path: Path) -> dict:
    documents = (captured.symbols or {}).get("libraries") or []
    mine = [document for document in documents if document["path"] == str(path)]
    assert mine, documents
    return mine[0]


def _checked_paths(captured) -> list[str]:
    return [document["path"] for document in (captured.symbols or {}).get("libraries") or []]


def _assert_cycle(captured) -> None:
    diagnosis = diagnose(captured)
    assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
    assert set(diagnosis.primary.functions) >= BRIDGE_LOOP, diagnosis.primary.functions
    assert not any(note.startswith("SYMBOLS MISSING") for note in captured.notes)


def _assert_cannot_tell(captured, library: Path) -> None:
    diagnosis = diagnose(captured)
    assert diagnosis.kind == "no-symbols", diagnosis.summary
    assert diagnosis.hung is None
    assert diagnosis.summary.startswith("cannot tell without symbols")
    assert library.name in diagnosis.summary
    assert not any(finding.hung is False for finding in diagnosis.findings)
    assert f"SYMBOLS MISSING: {library}" in diagnosis.primary.evidence[0]


def test_library_with_debug_info_shows_the_cycle(start, library, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    # Two workers in the loop; the main thread waits for them in pthread_join (libc).
    program = start(str(library["host"]), str(library["full"]), "2", settle=0.2)
    captured = capture(program.pid, CaptureOptions(**ONE_SAMPLE))
    _assert_cycle(captured)
    assert _library_status(captured, library["full"])["level"] == "full"
    # libc (where the main thread's innermost frame is) is never checked: no alarm for it.
    assert not any(is_runtime_or_system_library(path) for path in _checked_paths(captured))
    assert str(library["host"]) not in _checked_paths(captured)  # checked as the executable


def test_stripped_library_is_cannot_tell_and_named_first(start, library, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    # Every run the same (a half-and-half result was the failure on a stripped executable).
    for _ in range(2):
        program = start(str(library["host"]), str(library["stripped"]), settle=0.2)
        captured = capture(program.pid, CaptureOptions(**ONE_SAMPLE))
        _assert_cannot_tell(captured, library["stripped"])
        status = _library_status(captured, library["stripped"])
        assert status["level"] == "none" and status["missing"] is True
        assert status["build_id"] == library["id"]
        # The executable has its symbols: what is missing is the library's, said first.
        assert captured.symbols["missing"] is False
        assert captured.notes[0].startswith(f"SYMBOLS MISSING: {library['stripped']}")
        summary = diagnose(captured).summary
        assert f"DIR/.build-id/{library['id'][:2]}/{library['id'][2:]}.debug" in summary
        assert "--debug-dir DIR" in summary
        program.process.kill()


def test_debuglink_beside_the_library_gives_back_the_cycle(start, library, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    program = start(str(library["host"]), str(library["debuglink"]), settle=0.2)
    captured = capture(program.pid, CaptureOptions(**ONE_SAMPLE))
    _assert_cycle(captured)
    status = _library_status(captured, library["debuglink"])
    assert status["level"] == "separate"
    assert status["debug_file"] == str(library["debug_file"])
    assert f"{library['debuglink']}: stripped; debug info read from" in " ".join(captured.notes)


def test_build_id_debug_file_is_used_only_where_given(start, library, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    program = start(str(library["host"]), str(library["build_id"]), settle=0.2)
    # Not given: gdb finds nothing either, and the diagnosis says so.
    _assert_cannot_tell(capture(program.pid, CaptureOptions(**ONE_SAMPLE)), library["build_id"])
    # Given with --debug-dir: gdb reads the library's debug file by its build-id.
    given = (str(library["debug_root"]),)
    captured = capture(program.pid, CaptureOptions(debug_dirs=given, **ONE_SAMPLE))
    _assert_cycle(captured)
    status = _library_status(captured, library["build_id"])
    assert status["level"] == "separate" and "/.build-id/" in status["debug_file"]


def test_cli_names_the_stripped_library_first(start, library, capsys, monkeypatch) -> None:
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    program = start(str(library["host"]), str(library["stripped"]), settle=0.2)
    assert main(["bt", str(program.pid)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"SYMBOLS MISSING: {library['stripped']} is stripped")
    assert lines[3].startswith("Diagnosis: symbols missing — cannot tell")
    program.process.kill()

    program = start(str(library["host"]), str(library["build_id"]), settle=0.2)
    argv = ["bt", str(program.pid), "--json", "--debug-dir", str(library["debug_root"])]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["diagnosis"]["kind"] == "call-cycle"
    checked = {entry["path"]: entry for entry in document["symbols"]["libraries"]}
    assert checked[str(library["build_id"])]["level"] == "separate"


def test_a_library_loaded_by_a_relative_name_is_found(library, monkeypatch) -> None:
    # dlopen("./libbridge.so") from the library's directory: the process's own list names
    # it relative to the process's directory, where gdb (started elsewhere) finds nothing.
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    process = subprocess.Popen(
        [str(library["host"]), f"./{library['full'].name}"],
        cwd=library["full"].parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        assert select.select([process.stdout], [], [], 10)[0], "the loader did not start"
        assert process.stdout.readline().strip() == b"ready"
        assert Path.cwd() != library["full"].parent
        _assert_cycle(capture(process.pid, CaptureOptions(**ONE_SAMPLE)))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()


def test_which_libraries_are_checked(library) -> None:
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    assert is_runtime_or_system_library(libc)
    assert is_runtime_or_system_library("/nix/store/abc-glibc-2.40/lib/libc.so.6")
    assert is_runtime_or_system_library("/run/opengl-driver/lib/libcuda.so.1")
    assert is_runtime_or_system_library("/usr/lib/x86_64-linux-gnu/libz.so.1")
    wheel = "/usr/lib/python3/dist-packages/onnxruntime/capi/libonnxruntime.so"
    assert not is_runtime_or_system_library(wheel)
    assert not is_runtime_or_system_library("/nix/store/abc-onnxruntime-1.20/lib/x.so")
    statuses = check_libraries(
        [str(library["stripped"]), libc, str(library["host"]), str(library["full"])],
        executable=str(library["host"]),
    )
    assert [status.path for status in statuses] == [
        str(library["stripped"]),
        str(library["full"]),
    ]
    assert [status.level for status in statuses] == ["none", "full"]
    assert store_path("/nix/store/abc-onnxruntime-1.20/lib/libonnxruntime.so") == (
        "/nix/store/abc-onnxruntime-1.20"
    )
    assert store_path(str(library["full"])) is None


def test_a_nix_librarys_own_debug_output_is_named_and_given_to_gdb(
    start, library, tmp_path: Path, monkeypatch
) -> None:
    # A stand-in Nix store in a temporary directory (this machine's /nix/store is not ours
    # to write): the layout nixpkgs' separateDebugInfo makes, HASH-NAME/lib/libx.so with its
    # DWARF in HASH-NAME-debug/lib/debug/.build-id/xx/rest.debug (nixpkgs'
    # pkgs/build-support/setup-hooks/separate-debug-info.sh).
    import workbench.debugging.capture.debug_directories as debug_directories

    store = tmp_path / "nix" / "store"
    monkeypatch.setattr(debug_directories, "NIX_STORE", f"{store}/")
    monkeypatch.setattr(debug_directories, "_store_listing", None)
    monkeypatch.delenv("NIX_DEBUG_INFO_DIRS", raising=False)
    package = store / "0a1b2c-bridgelib-1.0"
    installed = package / "lib" / "libbridge.so"
    installed.parent.mkdir(parents=True)
    shutil.copy(library["stripped"], installed)

    program = start(str(library["host"]), str(installed), settle=0.2)
    captured = capture(program.pid, CaptureOptions(**ONE_SAMPLE))
    _assert_cannot_tell(captured, installed)
    summary = diagnose(captured).summary
    assert f"build the debug output of bridgelib-1.0 ({package}" in summary

    # The debug output built: gdb is told of it before the attach (no --debug-dir, no
    # NIX_DEBUG_INFO_DIRS), and reads the library's DWARF from it.
    build_id = library["id"]
    debug = store / "3d4e5f-bridgelib-1.0-debug" / "lib" / "debug"
    target = debug / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    target.parent.mkdir(parents=True)
    run_tool("objcopy", "--only-keep-debug", str(library["full"]), str(target))
    monkeypatch.setattr(debug_directories, "_store_listing", None)  # listed anew
    captured = capture(program.pid, CaptureOptions(**ONE_SAMPLE))
    _assert_cycle(captured)
    status = _library_status(captured, installed)
    assert status["level"] == "separate" and status["debug_file"] == str(target)
