"""`workbench bt` and `workbench debug-bt` end to end, through the real CLI entry point."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.debugging.bridge.bridge_patch import BRIDGE_FILE
from workbench.patches.series import load_series

BRIDGE_SOURCE = """\
namespace onnxruntime {
template <>
MLDataType DataTypeImpl::GetType<float>() { return Provider_GetHost()->DataTypeImpl__GetType_float(); }
}  // namespace onnxruntime
"""  # noqa: E501 - ORT's own one-line layout


def test_bt_json_document_and_patch_written_from_the_source_tree(
    start, config_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    source = tmp_path / "ort"
    (source / BRIDGE_FILE).parent.mkdir(parents=True)
    (source / BRIDGE_FILE).write_text(BRIDGE_SOURCE)
    program = start("bridge_o2", settle=0.2)

    status = main(
        [
            "--config",
            str(config_copy),
            "bt",
            str(program.pid),
            "--samples",
            "2",
            "--interval",
            "0.1",
            "--json",
            "--source",
            str(source),
        ]
    )
    assert status == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["schema"] == "workbench-bt/1"
    assert document["pid"] == program.pid and document["complete"] is True
    assert len(document["samples"]) == 2
    frame = document["samples"][0]["threads"][0]["frames"][0]
    assert set(frame) == {"level", "address", "function", "file", "line", "library"}
    diagnosis = document["diagnosis"]
    assert diagnosis["kind"] == "call-cycle" and diagnosis["hung"] is True
    assert diagnosis["bridge"]["host_method"] == "ProviderHostImpl::DataTypeImpl__GetType_float"
    patch = diagnosis["proposed_patch"]
    assert patch["path"] == str(
        tmp_path / "patches" / "static-datatypeimpl-gettype-float-loop.patch"
    )
    assert Path(patch["path"]).read_text() == patch["diff"]
    assert program.state() == "R"
    # The guard joined the series, for the static flavour, enabled.
    entry = load_series(config_copy).get("static-datatypeimpl-gettype-float-loop")
    assert (entry.group, entry.flavours, entry.enabled) == ("bridge-loop", ("cuda-static",), True)
    assert "ProviderHostImpl::DataTypeImpl__GetType_float and " in entry.fixes
    assert "added static-datatypeimpl-gettype-float-loop to " in captured.err


def test_bt_text_report(start, capsys: pytest.CaptureFixture[str]) -> None:
    program = start("lock_order", settle=0.3)
    assert main(["bt", str(program.pid), "--samples", "2", "--interval", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "Diagnosis: deadlock — HUNG" in out
    assert "lock-order deadlock:" in out
    assert "waits on mutex cache_mutex" in out or "waits on mutex session_mutex" in out
    assert "*#" in out  # the frames of the diagnosis are marked


def test_bt_errors_are_user_messages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bt", "999999999", "--samples", "1"]) == 2
    assert "no process 999999999" in capsys.readouterr().err


def test_debug_bt_captures_then_stops_the_program(programs, capsys) -> None:
    status = main(
        [
            "debug-bt",
            "--after",
            "0.4",
            "--samples",
            "2",
            "--interval",
            "0.1",
            "--json",
            "--",
            str(programs["static_init_deadlock"]),
        ]
    )
    assert status == 0
    document = json.loads(capsys.readouterr().out)
    assert document["diagnosis"]["kind"] == "static-init"
    assert document["program"]["status"] == "stopped by the workbench"
    assert not os.path.exists(f"/proc/{document['pid']}")


def test_debug_bt_of_a_program_that_ends_says_it_did_not_hang(programs, capsys) -> None:
    status = main(["debug-bt", "--after", "2", "--", str(programs["short_lived"]), "50"])
    assert status == 1
    out = capsys.readouterr().out
    assert "exit status 0" in out and "did not hang" in out and "ready" in out


def test_debug_bt_needs_a_command(capsys) -> None:
    assert main(["debug-bt"]) == 2
    assert "give the command after --" in capsys.readouterr().err
