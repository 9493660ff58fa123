"""May this process's gdb attach to PID? Yama's ptrace_scope, CAP_SYS_PTRACE and uids.

The check reads /proc only, so tests can point `proc` at a fake tree. It answers "denied"
only where the kernel's rules make it certain; otherwise the attach is tried and, when it
fails, `explain_attach_failure` says which rule most likely refused it and how to fix it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from workbench.debugging.capture.proc_threads import PROC, read_status

CAP_SYS_PTRACE = 19
SCOPE_FILE = Path("sys/kernel/yama/ptrace_scope")
SCOPE_MEANINGS = {
    0: "classic: a process may trace any process of its own user",
    1: "restricted: a process may trace only its own descendants, or a process that named "
    "it with prctl(PR_SET_PTRACER)",
    2: "admin-only: only a process with CAP_SYS_PTRACE may attach",
    3: "no attach: ptrace attach is disabled until the next reboot",
}
FIX_SCOPE = "sudo sysctl kernel.yama.ptrace_scope=0 (persist it in /etc/sysctl.d/10-ptrace.conf)"
FIX_CAP_CONTAINER = (
    "in a container, start it with --cap-add=SYS_PTRACE (docker/podman run) or add "
    "SYS_PTRACE to securityContext.capabilities (Kubernetes)"
)
FIX_SUDO = "run the workbench (and so gdb) as root or as the process's own user"


@dataclass(frozen=True)
class PtraceAccess:
    """The verdict ("allowed", "denied" or "uncertain") with the facts behind it."""

    verdict: str
    scope: int | None
    has_cap: bool
    uid: int
    target_uids: tuple[int, ...]
    seccomp: int | None
    reasons: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)

    def message(self, pid: int) -> str:
        """A user-facing explanation: what refuses the attach and how to allow it."""
        lines = [f"gdb may not attach to process {pid} (ptrace not permitted):"]
        lines += [f"  - {reason}" for reason in self.reasons]
        if self.fixes:
            lines.append("to allow it:")
            lines += [f"  - {fix}" for fix in self.fixes]
        return "\n".join(lines)


def has_capability(cap_eff_hex: str, capability: int) -> bool:
    """Whether the CapEff mask (hex text from /proc/*/status) includes `capability`."""
    try:
        return bool(int(cap_eff_hex, 16) >> capability & 1)
    except ValueError:
        return False


def read_scope(proc: Path = PROC) -> int | None:
    """kernel.yama.ptrace_scope, or None where Yama is not in the kernel."""
    try:
        return int((proc / SCOPE_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def check_ptrace(pid: int, *, proc: Path = PROC, uid: int | None = None) -> PtraceAccess:
    """Apply the kernel's ptrace_may_access rules, as far as /proc shows them, to `pid`."""
    uid = os.geteuid() if uid is None else uid
    own = read_status("self", proc)
    has_cap = has_capability(own.get("CapEff", "0"), CAP_SYS_PTRACE)
    seccomp_text = own.get("Seccomp")
    seccomp = int(seccomp_text) if seccomp_text and seccomp_text.isdigit() else None
    target = read_status(pid, proc)
    target_uids = tuple(int(part) for part in target.get("Uid", "").split()[:3] if part.isdigit())
    scope = read_scope(proc)
    reasons: list[str] = []
    fixes: list[str] = []
    verdict = "allowed"

    if scope is not None:
        meaning = SCOPE_MEANINGS.get(scope, "an unknown value")
        if scope >= 3:
            verdict = "denied"
            reasons.append(f"kernel.yama.ptrace_scope is {scope} ({meaning})")
            fixes.append("reboot: scope 3 cannot be lowered at run time")
        elif scope == 2 and not has_cap:
            verdict = "denied"
            reasons.append(
                f"kernel.yama.ptrace_scope is 2 ({meaning}) and CAP_SYS_PTRACE is missing"
            )
            fixes += [FIX_SCOPE, FIX_CAP_CONTAINER]
        elif scope == 1 and not has_cap:
            # The target may have named a tracer with PR_SET_PTRACER: not certain.
            verdict = "uncertain"
            reasons.append(f"kernel.yama.ptrace_scope is 1 ({meaning}); gdb is not its parent")
            fixes += [
                FIX_SCOPE,
                "or let the workbench start the program (`workbench debug-bt -- CMD`), which "
                "allows its gdb to attach",
            ]
    if target_uids and any(value != uid for value in target_uids) and not has_cap:
        verdict = "denied"
        reasons.append(
            f"the process runs as uid {target_uids[0]} and this one as uid {uid}, without "
            "CAP_SYS_PTRACE"
        )
        fixes.append(FIX_SUDO)
    if not has_cap and uid == 0:
        reasons.append("this process runs as root but without CAP_SYS_PTRACE (a container?)")
        fixes.append(FIX_CAP_CONTAINER)
    return PtraceAccess(
        verdict=verdict,
        scope=scope,
        has_cap=has_cap,
        uid=uid,
        target_uids=target_uids,
        seccomp=seccomp,
        reasons=reasons,
        fixes=list(dict.fromkeys(fixes)),
    )


def explain_attach_failure(pid: int, gdb_message: str, *, proc: Path = PROC) -> str:
    """Why gdb's attach was refused, from its message and what the kernel's rules show."""
    access = check_ptrace(pid, proc=proc)
    reasons = list(access.reasons)
    fixes = list(access.fixes)
    if not reasons:
        if access.seccomp == 2:
            reasons.append(
                "a seccomp filter is active on this process (Seccomp: 2): a container's "
                "profile may block ptrace"
            )
            fixes.append(
                "run the container with --cap-add=SYS_PTRACE or --security-opt seccomp=unconfined"
            )
        else:
            scope = "absent (no Yama)" if access.scope is None else str(access.scope)
            reasons.append(
                f"the kernel refused it although, for this process, ptrace_scope is {scope}, "
                f"the uids match and CAP_SYS_PTRACE is "
                f"{'present' if access.has_cap else 'missing'}: a security module (SELinux, "
                "AppArmor), or a gdb running as another user, may be in the way"
            )
            fixes.append(FIX_SUDO)
    detail = PtraceAccess(
        verdict="denied",
        scope=access.scope,
        has_cap=access.has_cap,
        uid=access.uid,
        target_uids=access.target_uids,
        seccomp=access.seccomp,
        reasons=[f"gdb said: {gdb_message.strip()}", *reasons],
        fixes=list(dict.fromkeys(fixes)),
    )
    return detail.message(pid)
