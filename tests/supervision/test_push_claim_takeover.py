"""A supervisor killed between claiming hosts.toml's push_to and starting the push.

Its keeper alive, the keeper starts a supervisor that adopts the ended build and starts the
push itself, with no command run. The keeper killed too, the claim is taken over by the next
workbench command that looks (`status`, `push --list`, or the foreground `build` waiting for
the push), which starts the push once; nobody waits 420 s for it.

The kill lands exactly there, on the real event: before starting a push, the supervisor asks
Nix whether the outputs it is to copy are still in the store (`nix-store --check-validity`),
with the build's end and the claim recorded. The tests put in front of PATH a `nix-store` that
runs the real one, but first says it was called (a file named by its caller's pid) and waits
while a `hold` file exists; the test waits for that call, kills the caller (-9, as a crash or
the OOM killer would), then removes `hold`. Real Nix, a real file:// binary cache, the push
tests' stand-in flake.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
from pathlib import Path

import psutil
import pytest
from cache_flake import make_cache_flake, nix
from needed_tools import needs
from nix_testing import NIX_CONFIG
from supervised import Bench, build_id_from, keeper_pid

from workbench.history.records import SUCCEEDED
from workbench.planning.launch import host_platform

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix", debian="nix-bin"),
]

# Not a stand-in: the real nix-store answers; a --check-validity call waits while `hold` is
# there, after saying who called it.
_HELD_NIX_STORE = """#!/bin/sh
case " $* " in
*" --check-validity "*)
    : > {gate}/called-by-$PPID
    while [ -e {gate}/hold ]; do sleep 0.05; done ;;
esac
exec {real} "$@"
"""


class PushGate:
    """A `nix-store` in front of PATH that holds the push's output check (see above)."""

    def __init__(self, directory: Path) -> None:
        real = shutil.which("nix-store")
        assert real is not None, "needs Debian's nix-bin"
        self.directory = directory
        directory.mkdir()
        (directory / "hold").touch()
        script = directory / "nix-store"
        script.write_text(
            _HELD_NIX_STORE.format(gate=shlex.quote(str(directory)), real=shlex.quote(real))
        )
        script.chmod(0o755)

    def path(self) -> str:
        return f"{self.directory}{os.pathsep}{os.environ.get('PATH', '')}"

    def caller(self, bench: Bench, build_id: int) -> psutil.Process:
        """The supervisor of build_id, once it is held at the check with the build's end and
        the claim recorded and the push not started."""

        def called() -> int | None:
            found = sorted(self.directory.glob("called-by-*"))
            return int(found[0].name.removeprefix("called-by-")) if found else None

        pid = bench.wait_for(f"build #{build_id}'s supervisor to check its outputs", called, 300)
        record = bench.record(build_id)
        assert pid == record.supervisor_pid and record.state == SUCCEEDED, (pid, record)
        with bench.history() as history:
            store, push_build, note = history.push_request(build_id) or ("", -1, "no claim")
        assert push_build is None and note is None, (store, push_build, note)  # unstarted
        return psutil.Process(pid)

    def release(self) -> None:
        (self.directory / "hold").unlink(missing_ok=True)


def _pushing_flake(tmp_path: Path, bench: Bench) -> tuple[Path, str, PushGate]:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    cache = f"file://{tmp_path / 'cache'}"
    hosts = flake / "configs" / "hosts.toml"
    text = hosts.read_text()
    hosts.write_text(
        text.replace("local_builds = true", f'local_builds = true\npush_to = "{cache}"')
    )
    gate = PushGate(tmp_path / "gate")
    bench.extra_env.update({"NIX_CONFIG": NIX_CONFIG, "PATH": gate.path()})
    return flake, cache, gate


def _kill_at_the_claim(bench: Bench, build_id: int, gate: PushGate, keeper: bool) -> None:
    """Wait until build_id's supervisor is held with the push claimed and not started, then
    kill it (-9; its keeper first when `keeper`), wait until it is gone and let Nix answer."""
    supervisor = gate.caller(bench, build_id)
    victims = [supervisor]
    if keeper:
        kept_by = keeper_pid(bench.record(build_id))
        assert kept_by is not None
        victims.insert(0, psutil.Process(kept_by))
    for victim in victims:
        victim.send_signal(signal.SIGKILL)
    for victim in victims:
        bench.wait_for("the killed process to be gone", lambda v=victim: not _alive(v), 60)
    gate.release()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pushed_once(bench: Bench, build_id: int, cache: str, flake: Path) -> int:
    """The one push build of build_id, ended with the output in the cache; its id."""
    with bench.history() as history:
        pushes = [b.id for b in history.builds(limit=50) if b.name == f"push-{build_id}"]
    assert len(pushes) == 1, pushes
    assert bench.wait_ended(pushes[0], timeout=300).state == SUCCEEDED
    top = nix("eval", "--raw", "--no-write-lock-file", ".#onnxruntime-cpu.outPath", cwd=flake)
    narinfo = Path(cache.removeprefix("file://")) / f"{Path(top).name.split('-', 1)[0]}.narinfo"
    assert narinfo.is_file()
    with bench.history() as history:
        assert [(p.output, p.store) for p in history.pushes(build_id)] == [(top, cache)]
    return pushes[0]


def test_the_keepers_new_supervisor_starts_the_claimed_push(bench: Bench, tmp_path: Path) -> None:
    """Only the supervisor killed: its keeper starts one that adopts the ended build and
    starts the push its predecessor claimed; no command looks meanwhile (before: the keeper
    had been told "done" and left, and the push waited for a command)."""
    flake, cache, gate = _pushing_flake(tmp_path, bench)
    configs = ("--config", str(flake / "configs"))
    started = bench.run(*configs, "build", "cpu", "-C", str(flake), "--jobs", "1", "--detach")
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    _kill_at_the_claim(bench, build_id, gate, keeper=False)

    def push_build() -> int | None:
        with bench.history() as history:
            claim = history.push_request(build_id)
        return claim[1] if claim else None

    push_id = bench.wait_for("the push to be started by the keeper's supervisor", push_build, 300)
    assert _pushed_once(bench, build_id, cache, flake) == push_id
    log = (bench.state / "builds" / str(build_id) / "supervisor.log").read_text()
    assert f"build #{build_id}: its supervisor died before starting the push to {cache}" in log
    assert f"build #{build_id}: pushing to {cache} as build #{push_id}" in log


def test_status_starts_the_push_a_dead_supervisor_claimed(bench: Bench, tmp_path: Path) -> None:
    flake, cache, gate = _pushing_flake(tmp_path, bench)
    configs = ("--config", str(flake / "configs"))
    started = bench.run(*configs, "build", "cpu", "-C", str(flake), "--jobs", "1", "--detach")
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    _kill_at_the_claim(bench, build_id, gate, keeper=True)

    listed = bench.run(*configs, "push", str(build_id), "--list")  # the first to look takes it
    assert listed.returncode == 0, listed.stderr
    assert (
        f"workbench: build #{build_id}: its supervisor died before starting the push to {cache}; "
        "starting it now\n"
    ) in listed.stderr, listed.stderr
    assert f"workbench: build #{build_id}: pushing to {cache} as build #" in listed.stderr
    assert f"build #{build_id}: being pushed to {cache} by build #" in listed.stdout
    again = bench.run(*configs, "status")  # the next one finds it started: nothing more
    assert again.returncode == 0 and "died before" not in again.stderr, again.stderr
    push_id = _pushed_once(bench, build_id, cache, flake)
    shown = bench.json(*configs, "push", str(build_id), "--list", "--json")
    assert [p["push_build"] for p in shown["pushes"]] == [push_id]
    assert shown["claimed_push"] is None


def test_the_foreground_build_takes_over_instead_of_waiting(bench: Bench, tmp_path: Path) -> None:
    flake, cache, gate = _pushing_flake(tmp_path, bench)
    configs = ("--config", str(flake / "configs"))
    followed = bench.start(*configs, "build", "cpu", "-C", str(flake), "--jobs", "1")

    def launched() -> int | None:
        if not (bench.state / "history.sqlite3").exists():
            return None
        with bench.history() as history:
            builds = history.builds(limit=1)
        return builds[0].id if builds else None

    build_id = bench.wait_for("the build to be created", launched, 120)
    _kill_at_the_claim(bench, build_id, gate, keeper=True)
    _out, err = followed.communicate(timeout=300)  # far below the 420 s it waited before
    # The build succeeded; the stand-in's output is not a whole cpu flavour, which the layout
    # check after the push says: exit 1 for that alone.
    assert "is not a whole cpu build" in err and followed.returncode == 1, err
    assert f"build #{build_id}: its supervisor died before starting the push to {cache}" in err
    assert "never started within" not in err
    _pushed_once(bench, build_id, cache, flake)
    assert "workbench: pushed /nix/store/" in err, err


def test_a_lost_builds_claim_is_reported_with_what_to_run_and_taken_once(tmp_path: Path) -> None:
    """A claim whose build never had its end recorded (the supervisor died before: the build is
    lost) is not pushed; the claim says why and what to run, said once by the first command
    that looks, never again by the next."""
    from recorded_builds import new_build

    from workbench.history.store import History
    from workbench.supervision.pushing import REQUEST, take_over_lost_claims

    store = f"file://{tmp_path / 'cache'}"
    with History(tmp_path / "state") as history:
        record = history.create(
            new_build("cpu", backend="nix", argv=("nix", "build"), cwd=str(tmp_path),
                      settings={REQUEST: {"store": store}}, eta_key="cpu")
        )  # fmt: skip
        assert history.claim_push(record.id, store)
        assert history.mark_lost(record.id, "its supervisor (pid 1) is gone")
        said: list[str] = []
        assert take_over_lost_claims(history, said.append) == []
        assert take_over_lost_claims(history, said.append) == []  # taken once: nothing more
        claim = history.push_request(record.id)
    assert len(said) == 1, said
    assert said[0].startswith(f"build #{record.id}: not pushed to {store}: the supervisor of ")
    assert f"`workbench push cpu --to {store}`" in said[0]
    assert claim is not None and claim[1] is None and "build is lost" in (claim[2] or "")
