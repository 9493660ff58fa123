"""A process that is not the build's when the sampler first sees it, and becomes a builder by
exec'ing a new program or switching to a build user, is taken once it has: judged again, not
rejected for good at first sight. Before, runuser's child (root until it switches user) or a
shell that execs the compiler stayed out of the process table, the peaks and "now building"
for its whole life. Real processes: a root process's fork switching to a held Nix build user
and exec'ing real g++, and a build user's shell (under runuser) exec'ing g++ on a source named
in its build directory."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from needed_tools import needs
from nix_testing import held_build_user

from workbench.monitor import ProcessSample, Sample, Sampler

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="switching to a Nix build user needs root"),
    needs("runuser", debian="util-linux"),
    needs("g++", debian="g++"),
]


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _until(what: str, ready: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never came within {timeout:g} s")
        time.sleep(0.02)


def _until_sampled(sampler: Sampler, what: str, ready: Callable[[Sample], bool]) -> Sample:
    """Samples until one shows `ready` (a loaded machine may be slow to start a program)."""
    deadline = time.monotonic() + 60
    sample = sampler.sample()
    while not ready(sample):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never came within 60 s: {sample.processes}")
        time.sleep(0.02)
        sample = sampler.sample()
    return sample


def _gxx_after_go(
    sampler: Sampler, stdin: IO[bytes], pid: int, who: str
) -> tuple[ProcessSample, ProcessSample]:
    """Let `pid` go on (a line on its stdin), wait until it is g++ with its cc1plus, and return
    both as the next sample shows them; fails saying `who` was left out."""
    stdin.write(b"go\n")
    stdin.flush()
    _until("g++", lambda: _comm(pid) == "g++")
    sample = _until_sampled(
        sampler,
        "g++ and its cc1plus in one sample",
        lambda s: any(p.tool == "cc1plus" and p.ppid == pid for p in s.processes),
    )
    taken = {p.pid: p for p in sample.processes}
    assert pid in taken, f"the g++ that {who} became was left out"
    cc1plus = next(p for p in sample.processes if p.ppid == pid)
    return taken[pid], cc1plus


@contextlib.contextmanager
def _group(argv: list[str], **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(argv, start_new_session=True, **kwargs)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


# What runuser's child does (util-linux, login-utils/su-common.c: the child of
# create_watching_parent() calls change_identity(), then execs): forked by a root process, it
# waits here for the test's word, switches to the build user and execs g++, which reads its
# source from the same pipe after that word: cc1plus waits on it, so the compile lasts until the
# test closes the pipe. The parent prints the child's PID and waits for it. (g++ by its path:
# once it is the build user, Python's own library under root's home may be closed to it.)
_LAUNCHER = """
import os, sys
uid, gid, gxx = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
child = os.fork()
if child == 0:
    os.read(0, 3)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    os.execv(gxx, ["g++", "-pipe", "-S", "-x", "c++", "-o", "/dev/null", "-"])
print(child, flush=True)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
"""


def test_a_root_fork_that_becomes_a_build_user_and_execs_gxx_is_taken() -> None:
    """Seen as a root fork that has not exec'd yet (not a builder: rejected), it then switches
    to a build user and execs g++: the next sample takes it as the compiler, and its cc1plus as
    part of its job. Failed before: the g++ was never in a sample."""
    with held_build_user() as user:
        account = pwd.getpwnam(user)
        gxx = shutil.which("g++")
        assert gxx is not None
        argv = [sys.executable, "-c", _LAUNCHER, str(account.pw_uid), str(account.pw_gid), gxx]
        with (
            Sampler(daemon=True) as sampler,
            _group(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/") as launcher,
        ):
            assert launcher.stdin is not None and launcher.stdout is not None
            child = int(launcher.stdout.readline())
            first = sampler.sample()
            assert _comm(child) != "g++"  # it waits for the word below
            assert child not in {p.pid for p in first.processes}  # root: not a builder
            gxx, cc1plus = _gxx_after_go(sampler, launcher.stdin, child, "the root fork")
            assert (gxx.tool, gxx.kind, gxx.job) == ("g++", "compiler", child)
            assert (cc1plus.job, cc1plus.job_kind) == (child, "compiler")
            launcher.stdin.write(b"int main() { return 0; }\n")
            launcher.stdin.close()
            assert launcher.wait(timeout=120) == 0


# A root shell started during the build that first runs a program (so it is no fork waiting to
# exec, and "sh" switches no user), says it is ready, waits for the test's word, then execs
# setpriv, which switches to the build user and execs g++ (reading its source from the same
# pipe: the compile lasts until the test closes it). util-linux's setpriv
# (sys-utils/setpriv.c: do_setresuid(), then execvp()) changes the user in place.
_SETPRIV_SCRIPT = (
    "/bin/true; echo ready; read go; "
    "exec setpriv --reuid={uid} --regid={gid} --clear-groups "
    "{gxx} -pipe -S -x c++ -o /dev/null -"
)


def test_a_root_shell_that_ran_a_program_then_execs_setpriv_to_gxx_is_taken() -> None:
    """Seen as a root shell that has run a program (not a fork, not a user-switching program:
    rejected), it later execs setpriv, which becomes the build user and execs g++: once g++'s
    cc1plus is seen as the build's, the g++ above it is judged again and taken as the compiler,
    with cc1plus in its job. Failed before: cc1plus was taken as a job of its own and the g++
    was never in a sample (nor in the peaks or "now building")."""
    with held_build_user() as user:
        account = pwd.getpwnam(user)
        gxx = shutil.which("g++")
        assert gxx is not None
        script = _SETPRIV_SCRIPT.format(uid=account.pw_uid, gid=account.pw_gid, gxx=gxx)
        with Sampler(daemon=True) as sampler:
            sampler.sample()
            with _group(
                ["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/"
            ) as shell:
                assert shell.stdin is not None and shell.stdout is not None
                assert shell.stdout.readline() == b"ready\n"
                first = sampler.sample()
                assert _comm(shell.pid) == "sh"
                assert shell.pid not in {p.pid for p in first.processes}  # root: not a builder
                gxx_seen, cc1plus = _gxx_after_go(sampler, shell.stdin, shell.pid, "the shell")
                assert (gxx_seen.tool, gxx_seen.kind) == ("g++", "compiler")
                assert gxx_seen.job == shell.pid
                assert (cc1plus.job, cc1plus.job_kind) == (shell.pid, "compiler")
                shell.stdin.write(b"int main() { return 0; }\n")
                shell.stdin.close()
                assert shell.wait(timeout=120) == 0


def test_a_build_users_shell_that_execs_gxx_on_its_build_directory_is_taken() -> None:
    """A build user's shell that names no derivation (not this build's as far as can be told)
    execs g++ on a source in this build's directory: the next sample takes it, with the
    derivation. Failed before: only a new derivation name made the sampler look again."""
    top = Path(tempfile.mkdtemp(prefix="wb-judge-again-", dir="/tmp"))
    try:
        source_dir = top / "nix-build-wb-judge-again-1.0.drv-0"
        source_dir.mkdir()
        source = source_dir / "a.cc"
        os.mkfifo(source)  # cc1plus waits on it: the compile lasts until the test writes
        for path in (top, source_dir, source):
            path.chmod(0o777 if path == source else 0o755)
        with held_build_user() as user:
            # The source comes in an environment variable: the shell's own arguments and its
            # working directory name no build directory.
            script = 'read go; exec g++ -pipe -S -o /dev/null "$WB_SOURCE"'
            with (
                Sampler(daemon=True, derivations=["wb-judge-again-1.0"]) as sampler,
                _group(
                    ["runuser", "-u", user, "--", "sh", "-c", script],
                    stdin=subprocess.PIPE,
                    cwd="/",
                    env={**os.environ, "WB_SOURCE": str(source)},
                ) as runuser,
            ):
                assert runuser.stdin is not None
                shells: list[int] = []

                def shell_up() -> bool:
                    shells[:] = [
                        int(name)
                        for name in os.listdir("/proc")
                        if name.isdigit()
                        and _comm(int(name)) == "sh"
                        and _ppid(int(name)) == runuser.pid
                        and os.stat(f"/proc/{name}").st_uid == pwd.getpwnam(user).pw_uid
                    ]
                    return bool(shells)

                _until("runuser's shell as the build user", shell_up)
                shell = shells[0]
                first = sampler.sample()
                assert shell not in {p.pid for p in first.processes}  # says no derivation
                gxx, cc1plus = _gxx_after_go(
                    sampler, runuser.stdin, shell, "the build user's shell"
                )
                assert (gxx.tool, gxx.file, gxx.derivation) == (
                    "g++",
                    str(source),
                    "wb-judge-again-1.0",
                )
                assert cc1plus.job == shell
                with open(source, "w") as writer:  # let the compile end
                    writer.write("int main() { return 0; }\n")
                runuser.stdin.close()
                assert runuser.wait(timeout=120) == 0
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _ppid(pid: int) -> int | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(data[data.rfind(b")") + 2 :].split()[1])


# A build step in Python that forks and, in the child, execs another Python script: the child
# keeps its name ("python") across the exec, only fork's PF_FORKNOEXEC flag tells.
_PY_LAUNCHER = """
import os, sys
child = os.fork()
if child == 0:
    os.read(0, 3)
    os.execv(sys.executable, [sys.executable, sys.argv[1]])
print(child, flush=True)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
"""


def test_a_build_process_that_execs_a_program_of_the_same_name_is_classified_again(
    tmp_path: Path,
) -> None:
    """A member seen as a fork of a Python build step, that then execs a Python script (the
    same process name): the next sample names the script. Failed before: only a change of
    name made the sampler classify a member again, so it kept the parent's command."""
    script = tmp_path / "codegen.py"
    script.write_text("import sys\nsys.stdin.read()\n")  # until the test closes the pipe
    argv = [sys.executable, "-c", _PY_LAUNCHER, str(script)]
    with _group(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as launcher:
        assert launcher.stdin is not None and launcher.stdout is not None
        child = int(launcher.stdout.readline())
        with Sampler(launcher.pid) as sampler:
            first = {p.pid: p for p in sampler.sample().processes}
            assert child in first and first[child].file != str(script)  # not exec'd yet
            launcher.stdin.write(b"go\n")
            launcher.stdin.flush()

            def execd() -> bool:
                try:
                    return Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[1:2] == [
                        str(script).encode()
                    ]
                except OSError:
                    return False

            _until("the script's exec", execd)
            sample = _until_sampled(
                sampler, "the script's process", lambda s: any(p.pid == child for p in s.processes)
            )
            (shown,) = [p for p in sample.processes if p.pid == child]
            assert (shown.kind, shown.file) == ("python", str(script))
            launcher.stdin.close()
            assert launcher.wait(timeout=120) == 0


def test_kernel_threads_are_never_watched() -> None:
    """A kernel thread is root, keeps fork's PF_FORKNOEXEC (it never execs) and may start
    during a build (kworkers come and go): it looks like runuser's child before it switches,
    but can never become a builder, so it is rejected for good, not watched every sample.
    Every process counts as started during the build here, so the kernel's own threads
    (kthreadd and its children, always there) are judged as a kworker born mid-build is."""
    with Sampler(daemon=True) as sampler:
        sampler._young_from = 0  # every process started "during the build"
        sampler.sample()
        sampler.sample()
        watched = set(sampler._watched)
    kernel = {pid for pid in watched if _is_kernel_thread(pid)}
    assert not kernel, f"kernel threads watched: {sorted(kernel)[:10]}"


def _is_kernel_thread(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    flags = int(data[data.rindex(b")") + 2 :].split()[6])
    return bool(flags & 0x00200000)  # PF_KTHREAD, include/linux/sched.h


# A root process's fork that waits, not exec'd: what runuser's child is before it switches user.
_FORK_WAITS = """
import os, sys
child = os.fork()
if child == 0:
    os.read(0, 1)
    os._exit(0)
print(child, flush=True)
os.waitpid(child, 0)
"""


def test_started_during_the_build_is_read_from_the_clock_the_sampler_is_given() -> None:
    """Whether a root fork started during the build (and so may still become a builder) is
    judged by the clock the Sampler is given, the one its samples are timed by. With a clock an
    hour ahead, the build began an hour after a fork the test starts now: the fork is not
    watched. Failed before: the mark came from time.time(), a second source of time, and the
    fork was watched."""
    with Sampler(daemon=True, clock=lambda: time.time() + 3600) as sampler:
        sampler.sample()
        argv = [sys.executable, "-c", _FORK_WAITS]
        with _group(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as launcher:
            assert launcher.stdin is not None and launcher.stdout is not None
            child = int(launcher.stdout.readline())
            sampler.sample()
            assert child not in sampler._watched
            launcher.stdin.close()
    with Sampler(daemon=True) as sampler:  # the same fork, timed by the real clock: watched
        sampler.sample()
        with _group(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as launcher:
            assert launcher.stdin is not None and launcher.stdout is not None
            child = int(launcher.stdout.readline())
            sampler.sample()
            assert child in sampler._watched
            launcher.stdin.close()


def _state(pid: int) -> str | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return data[data.rindex(b")") + 2 :].split()[0].decode()


def test_zombies_are_never_watched() -> None:
    """A root fork started during the build that has been killed but not yet reaped (a zombie
    keeps fork's PF_FORKNOEXEC; an init that reaps orphans slowly leaves it for seconds) can
    never exec a builder: it is not watched, whether first seen as a zombie or seen alive and
    then dead. Real forks of this process, killed and left unreaped until the end. Failed
    before: every such zombie cost a schedstat read each sample until it was reaped."""
    with Sampler(daemon=True) as sampler:
        sampler.sample()
        alive: list[int] = []
        dead: list[int] = []
        try:
            for group in (alive, dead):
                for _ in range(5):
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - the child waits to be killed
                        signal.pause()
                        os._exit(0)
                    group.append(pid)
            for pid in dead:
                os.kill(pid, signal.SIGKILL)
            _until("the killed forks as zombies", lambda: all(_state(p) == "Z" for p in dead))
            sampler.sample()
            assert set(alive) <= set(sampler._watched)  # alive, not exec'd: may still switch
            assert not set(dead) & set(sampler._watched), "zombies watched"
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            _until("the other forks as zombies", lambda: all(_state(p) == "Z" for p in alive))
            sampler.sample()
            assert not set(alive) & set(sampler._watched), "forks watched after they died"
        finally:
            for pid in alive + dead:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
