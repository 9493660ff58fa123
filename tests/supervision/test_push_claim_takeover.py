"""A supervisor killed between claiming hosts.toml's push_to and starting the push: the claim is
taken over by the next workbench command that looks (`status`, `push --list`, or the foreground
`build` waiting for the push), which starts the push once; nobody waits 420 s for it.

The kill lands exactly there: started with WORKBENCH_TEST_STOP_BEFORE_PUSH, the supervisor
stops itself (SIGSTOP) after the build's end is recorded and before it starts the push; the
test waits for that stop (the event), then kills it with SIGKILL, as a crash or the OOM killer
would. Real Nix, a real file:// binary cache, the push tests' stand-in flake.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import psutil
import pytest
from cache_flake import make_cache_flake, nix
from nix_testing import NIX_CONFIG
from supervised import Bench, build_id_from

from workbench.history.records import SUCCEEDED
from workbench.planning.launch import host_platform
from workbench.supervision.pushing import STOP_BEFORE_PUSH_ENV

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Debian's nix-bin"),
]


def _pushing_flake(tmp_path: Path, bench: Bench) -> tuple[Path, str]:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    cache = f"file://{tmp_path / 'cache'}"
    hosts = flake / "configs" / "hosts.toml"
    text = hosts.read_text()
    hosts.write_text(
        text.replace("local_builds = true", f'local_builds = true\npush_to = "{cache}"')
    )
    bench.extra_env.update({"NIX_CONFIG": NIX_CONFIG, STOP_BEFORE_PUSH_ENV: "1"})
    return flake, cache


def _kill_at_the_claim(bench: Bench, build_id: int) -> None:
    """Wait until build_id's supervisor stopped itself with the push claimed and not started,
    then kill it (-9) and wait until it is gone."""

    def stopped() -> psutil.Process | None:
        pid = bench.record(build_id).supervisor_pid
        try:
            process = psutil.Process(pid) if pid else None
            return process if process and process.status() == psutil.STATUS_STOPPED else None
        except psutil.NoSuchProcess:
            return None

    supervisor = bench.wait_for(f"build #{build_id}'s supervisor to stop at the push", stopped, 300)
    with bench.history() as history:
        assert history.get(build_id).state == SUCCEEDED
        store, push_build, note = history.push_request(build_id) or ("", -1, "no claim")
    assert push_build is None and note is None, (store, push_build, note)  # claimed, unstarted
    supervisor.send_signal(signal.SIGKILL)
    bench.wait_for("the killed supervisor to be gone", lambda: not _alive(supervisor), 60)


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


def test_status_starts_the_push_a_dead_supervisor_claimed(bench: Bench, tmp_path: Path) -> None:
    flake, cache = _pushing_flake(tmp_path, bench)
    configs = ("--config", str(flake / "configs"))
    started = bench.run(*configs, "build", "cpu", "-C", str(flake), "--jobs", "1", "--detach")
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    _kill_at_the_claim(bench, build_id)

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
    flake, cache = _pushing_flake(tmp_path, bench)
    configs = ("--config", str(flake / "configs"))
    followed = bench.start(*configs, "build", "cpu", "-C", str(flake), "--jobs", "1")

    def launched() -> int | None:
        if not (bench.state / "history.sqlite3").exists():
            return None
        with bench.history() as history:
            builds = history.builds(limit=1)
        return builds[0].id if builds else None

    build_id = bench.wait_for("the build to be created", launched, 120)
    _kill_at_the_claim(bench, build_id)
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
    from workbench.history.records import NewBuild
    from workbench.history.store import History
    from workbench.supervision.pushing import REQUEST, take_over_lost_claims

    store = f"file://{tmp_path / 'cache'}"
    with History(tmp_path / "state") as history:
        record = history.create(
            NewBuild(name="cpu", backend="nix", argv=("nix", "build"), cwd=str(tmp_path),
                     checkout=str(tmp_path), settings={REQUEST: {"store": store}},
                     eta_key="cpu", nix=True)
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
