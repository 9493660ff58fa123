"""ptrace permission checks against fake /proc trees (we run as root, so the real one allows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.debugging.capture.loop import capture
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.debug_errors import AlreadyTracedError, PtraceDeniedError
from workbench.debugging.gdb.ptrace import check_ptrace, explain_attach_failure, has_capability

ALL_CAPS = "000001ffffffffff"
NO_PTRACE = f"{int(ALL_CAPS, 16) & ~(1 << 19):016x}"
TARGET = 4242


def fake_proc(
    root: Path,
    scope: int | None,
    cap_eff: str = ALL_CAPS,
    target_uid: int = 0,
    seccomp: int = 0,
    tracer: int = 0,
) -> Path:
    """A /proc-like tree: Yama's scope, our status (CapEff, Seccomp) and the target's."""
    proc = root / "proc"
    if scope is not None:
        (proc / "sys/kernel/yama").mkdir(parents=True)
        (proc / "sys/kernel/yama/ptrace_scope").write_text(f"{scope}\n")
    (proc / "self").mkdir(parents=True)
    (proc / "self/status").write_text(
        f"Name:\tpython3\nUid:\t0\t0\t0\t0\nCapEff:\t{cap_eff}\nSeccomp:\t{seccomp}\n"
    )
    (proc / str(TARGET)).mkdir()
    uid = target_uid
    (proc / str(TARGET) / "status").write_text(
        f"Name:\tort_app\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nTracerPid:\t{tracer}\n"
    )
    (proc / str(TARGET) / "stat").write_text(
        f"{TARGET} (ort_app) S 1 {TARGET} {TARGET} 0 -1 0 " + "0 " * 40
    )
    return proc


def test_capability_bit_is_read_from_cap_eff() -> None:
    assert has_capability(ALL_CAPS, 19)
    assert not has_capability(NO_PTRACE, 19)
    assert not has_capability("not hex", 19)


def test_no_yama_and_same_user_is_allowed(tmp_path: Path) -> None:
    access = check_ptrace(TARGET, proc=fake_proc(tmp_path, scope=None), uid=0)
    assert access.verdict == "allowed" and access.scope is None


def test_scope_3_is_denied_until_reboot(tmp_path: Path) -> None:
    access = check_ptrace(TARGET, proc=fake_proc(tmp_path, scope=3), uid=0)
    assert access.verdict == "denied"
    message = access.message(TARGET)
    assert "kernel.yama.ptrace_scope is 3" in message and "reboot" in message


def test_scope_2_without_the_capability_says_both_fixes(tmp_path: Path) -> None:
    access = check_ptrace(TARGET, proc=fake_proc(tmp_path, scope=2, cap_eff=NO_PTRACE), uid=0)
    assert access.verdict == "denied"
    message = access.message(TARGET)
    assert "ptrace_scope is 2 (admin-only" in message
    assert "sysctl kernel.yama.ptrace_scope=0" in message
    assert "--cap-add=SYS_PTRACE" in message
    # With the capability, scope 2 allows it.
    assert check_ptrace(TARGET, proc=fake_proc(tmp_path / "b", scope=2), uid=0).verdict == "allowed"


def test_scope_1_is_uncertain_and_explained(tmp_path: Path) -> None:
    access = check_ptrace(TARGET, proc=fake_proc(tmp_path, scope=1, cap_eff=NO_PTRACE), uid=0)
    assert access.verdict == "uncertain"
    assert any("restricted" in reason for reason in access.reasons)
    assert any("workbench debug-bt" in fix for fix in access.fixes)


def test_another_users_process_needs_the_capability(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, scope=0, cap_eff="0000000000000000", target_uid=1000)
    access = check_ptrace(TARGET, proc=proc, uid=0)
    assert access.verdict == "denied"
    assert any("uid 1000" in reason for reason in access.reasons)


def test_a_failed_attach_is_explained_with_the_rule_that_refused_it(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, scope=1, cap_eff=NO_PTRACE)
    message = explain_attach_failure(TARGET, "ptrace: Operation not permitted.", proc=proc)
    assert message.startswith(f"gdb may not attach to process {TARGET}")
    assert "gdb said: ptrace: Operation not permitted." in message
    assert "ptrace_scope is 1" in message
    seccomp = explain_attach_failure(
        TARGET,
        "ptrace: Operation not permitted.",
        proc=fake_proc(tmp_path / "s", scope=0, seccomp=2),
    )
    assert "seccomp" in seccomp and "seccomp=unconfined" in seccomp


def test_capture_refuses_before_starting_gdb(tmp_path: Path) -> None:
    with pytest.raises(PtraceDeniedError, match="ptrace_scope is 3"):
        capture(TARGET, CaptureOptions(samples=1, proc=fake_proc(tmp_path, scope=3)))
    with pytest.raises(AlreadyTracedError, match="already traced by process 77"):
        capture(
            TARGET, CaptureOptions(samples=1, proc=fake_proc(tmp_path / "t", scope=0, tracer=77))
        )
