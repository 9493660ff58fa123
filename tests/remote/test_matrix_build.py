"""A matrix build across this machine and a loopback "remote" host, with real Nix over real SSH:
Nix's own scheduler sends stand-in derivations to both, the failing one does not stop the
others (--keep-going), the history keeps a row per target, a second run takes only what is
not in the store, and a host killed mid-build is shown as gone without losing local history.

The targets are stand-ins for ONNX Runtime variants (nixpkgs cannot exist here): a flake whose
packages are named like the matrix's CPU variants, each `derivation { builder = "/bin/sh"; }`
that sleeps and writes its output; the bf16 one fails as a compile error would. Where a test
must catch a build while it runs, whatever the machine's load, the builds are held on a file
instead of sleeping: each waits until the test creates HOLD/release.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from loopback_sshd import LoopbackHost, nix_env_for_hosts
from nix_testing import needs_nix

pytestmark = [pytest.mark.slow, *needs_nix]

TARGETS = [
    "onnxruntime-python313-cpu-avx2",
    "onnxruntime-python313-cpu-avx512",
    "onnxruntime-python313-cpu-avx512bf16",
    "onnxruntime-python313-cpu-avx512vnni",
]
FAILING = "onnxruntime-python313-cpu-avx512bf16"
FIRST_ERROR = "error: bf16_kernels.cc:12: no such intrinsic"
# The derivation names of the targets that build (the last word of each target's name).
BUILDING = {name.rsplit("-", 1)[1] for name in TARGETS if name != FAILING}
# How long a held build waits for its release at most (a test that failed never releases).
HOLD_AT_MOST_S = 120


def standin_variant_flake(directory: Path, seconds: int, hold: Path | None = None) -> Path:
    """A flake with stand-in packages named like four CPU variants (one fails). With `hold`,
    the builds that succeed wait until `hold`/release exists instead of sleeping `seconds`."""
    stamp = uuid.uuid4().hex  # fresh derivations: nothing of an earlier run is in the store
    directory.mkdir()
    wait = f"/bin/sleep {seconds}"
    if hold is not None:
        tries = HOLD_AT_MOST_S * 5
        wait = (
            f"i=0; while [ ! -e {hold}/release ] && [ $i -lt {tries} ]; "
            "do /bin/sleep 0.2; i=$((i+1)); done"
        )
    packages = "\n".join(
        f'      {name} = ok "{name.rsplit("-", 1)[1]}";' for name in TARGETS if name != FAILING
    )
    (directory / "flake.nix").write_text(
        f"""{{
  outputs = {{ self }}: let
    mk = name: script: derivation {{
      inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ];
      stamp = "{stamp}";
    }};
    ok = n: mk n "echo compiling ${{n}}; {wait}; echo ${{n}} > $out";
  in {{
    packages.x86_64-linux = {{
{packages}
      {FAILING} = mk "bf16" "echo compiling bf16; echo '{FIRST_ERROR}' >&2; exit 1";
    }};
  }};
}}
"""
    )
    return directory


def held_builds(host: LoopbackHost, hold: Path) -> Path:
    """A folder the stand-in builds wait on, seen inside the remote's sandbox too (its
    nix.conf's sandbox-paths; this machine's builds run without a sandbox)."""
    hold.mkdir(mode=0o755)
    conf = host.directory / "remote-nix" / "nix.conf"
    conf.write_text(conf.read_text().replace("sandbox-paths = ", f"sandbox-paths = {hold} "))
    return hold


def _workbench(config: Path, state: Path, tmp_path: Path, *args: str, timeout: float = 120):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--config",
            str(config),
            "--state-dir",
            str(state),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=nix_env_for_hosts(tmp_path),
    )


def _rows(state: Path, build_id: int) -> dict[str, tuple]:
    with sqlite3.connect(state / "history.sqlite3") as db:
        found = db.execute(
            "SELECT name, host, outcome, tried_on, started, ended, nar_size, first_error "
            "FROM build_targets WHERE build_id = ?",
            (build_id,),
        ).fetchall()
    return {row[0]: row[1:] for row in found}


def _out_paths(state: Path, build_id: int) -> dict[str, str]:
    with sqlite3.connect(state / "history.sqlite3") as db:
        found = db.execute(
            "SELECT name, out_path FROM build_targets WHERE build_id = ?", (build_id,)
        ).fetchall()
    return dict(found)


def _wait_for_the_end(state: Path, build_id: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with sqlite3.connect(state / "history.sqlite3") as db:
            state_now = db.execute("SELECT state FROM builds WHERE id = ?", (build_id,)).fetchone()
        if state_now[0] not in ("starting", "running", "stopping"):
            return
        time.sleep(0.5)
    pytest.fail(f"build #{build_id} did not end within {timeout_s:g} s")


def _build_ids(state: Path) -> list[int]:
    with sqlite3.connect(state / "history.sqlite3") as db:
        return [row[0] for row in db.execute("SELECT id FROM builds ORDER BY id")]


def test_a_matrix_spreads_over_both_hosts_keeps_going_and_resumes(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    flake = standin_variant_flake(tmp_path / "flake", seconds=3)
    state = tmp_path / "state"
    first = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake)
    )
    assert first.returncode == 1, first.stderr  # the failing target fails the build ...
    build_id = _build_ids(state)[-1]
    rows = _rows(state, build_id)
    assert set(rows) == set(TARGETS)
    # ... and nothing else: every other target was built, on one host or the other.
    for name in TARGETS:
        host, outcome, _, started, ended, nar, error = rows[name]
        if name == FAILING:
            assert outcome == "failed" and error == FIRST_ERROR
            continue
        assert outcome == "built" and host in ("local", "remote")
        assert started is not None and ended >= started and nar > 0
    hosts = {rows[name][0] for name in TARGETS}
    assert hosts == {"local", "remote"}, rows  # Nix used both (remote 1 job, local 1 job)
    # What the remote built was built in the remote's own store, then copied here.
    remote_built = [n for n in TARGETS if rows[n][0] == "remote"]
    store = loopback_host.remote_store_root / "nix" / "store"
    assert any(p.name.endswith(remote_built[0].rsplit("-", 1)[1]) for p in store.iterdir())
    assert "left out" not in first.stderr
    # Each target built has its out-link in the checkout, pointing at its row's out path (a
    # GC root, as `flox build NAME` leaves it); the failed one has none.
    outs = _out_paths(state, build_id)
    for name in set(TARGETS) - {FAILING}:
        assert os.readlink(flake / f"result-{name}") == outs[name], name
        assert Path(outs[name]).read_text().strip() == name.rsplit("-", 1)[1]
    assert not (flake / f"result-{FAILING}").is_symlink()
    assert f"out-links in {flake.resolve()}: " in first.stdout

    again = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake)
    )
    assert again.returncode == 1
    assert again.stderr.count("in the store already") == 3
    second = _rows(state, _build_ids(state)[-1])
    assert {n for n, row in second.items() if row[1] == "in store"} == set(TARGETS) - {FAILING}
    assert second[FAILING][1] == "failed"
    # The one nix build of the resumed run names only the target not in the store.
    with sqlite3.connect(state / "history.sqlite3") as db:
        argv = db.execute("SELECT argv FROM builds ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert FAILING in argv and "cpu-avx2" not in argv


def test_a_host_killed_mid_build_is_gone_and_nothing_local_is_lost(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    hold = held_builds(loopback_host, tmp_path / "hold")
    flake = standin_variant_flake(tmp_path / "flake", seconds=6, hold=hold)
    state = tmp_path / "state"
    started = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake), "-d"
    )
    assert started.returncode == 0, started.stderr
    build_id = _build_ids(state)[-1]
    try:
        # Until the remote builds one of the held targets (held: it cannot end before the kill).
        deadline = time.monotonic() + 60
        view, on_remote = "", None
        while on_remote is None and time.monotonic() < deadline:
            view = _workbench(
                hosts_config, state, tmp_path, "hosts", "watch", str(build_id), "--once"
            ).stdout
            found = re.search(r"^remote +1 building: (\S+)$", view, re.MULTILINE)
            if found and found.group(1) in BUILDING:
                on_remote = found.group(1)
            else:
                time.sleep(0.3)
        assert on_remote is not None, view
        loopback_host.kill()
    finally:
        (hold / "release").touch()  # the builds here go on to their end
    _wait_for_the_end(state, build_id, 60)
    after = _workbench(hosts_config, state, tmp_path, "hosts", "watch", str(build_id), "--once")
    assert after.returncode == 0, after.stderr
    assert "remote         GONE" in after.stdout, after.stdout
    rows = _rows(state, build_id)
    assert set(rows) == set(TARGETS)
    killed = next(name for name in TARGETS if name.endswith(f"-{on_remote}"))
    host, outcome, *_, first_error = rows[killed]
    assert (host, outcome) == ("remote", "failed") and "connection" in first_error, rows[killed]
    # Every other target was built here, the ones Nix could not send any more included.
    for name in set(TARGETS) - {killed, FAILING}:
        assert rows[name][:2] == ("local", "built"), rows
    assert rows[FAILING][1] == "failed"
    log = state / "builds" / str(build_id) / "build.log"
    assert "unexpected end-of-file" in log.read_text()


def test_attach_shows_what_each_host_builds_live(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """`workbench attach` of a matrix build started in the background: the per-host view as it
    changes, real Nix building on this machine and on the loopback remote at once (the builds
    held until attach has said both hosts building, then released)."""
    hold = held_builds(loopback_host, tmp_path / "hold")
    flake = standin_variant_flake(tmp_path / "flake", seconds=4, hold=hold)
    state = tmp_path / "state"
    started = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake), "-d"
    )
    assert started.returncode == 0, started.stderr
    build_id = _build_ids(state)[-1]
    both = re.compile(r"^  local +\d+ building: .*\n  remote +1 building: ", re.MULTILINE)
    said: list[str] = []
    out = tmp_path / "attach.out"
    with open(out, "w") as stdout:
        attached = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workbench",
                "--config",
                str(hosts_config),
                "--state-dir",
                str(state),
                "attach",
                str(build_id),
            ],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=nix_env_for_hosts(tmp_path),
        )
        assert attached.stderr is not None
        reader = threading.Thread(target=lambda: said.extend(attached.stderr), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 60
            while not both.search("".join(said)) and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            (hold / "release").touch()
        code = attached.wait(timeout=120)
        reader.join(timeout=10)
    stderr = "".join(said)
    assert code == 1, stderr  # the bf16 target failed
    views = stderr.split("workbench: per host:\n")[1:]
    assert len(views) >= 2, stderr  # said again as it changed
    # Some moment had both hosts building, each its own variant.
    assert any(both.search(view) for view in views), stderr
    assert "\x1b" not in stderr.replace("\r\x1b[K", "")  # only attach's own status-line clearing
    # The build's own lines went to stdout, the view to stderr.
    stdout_text = out.read_text()
    assert "per host:" not in stdout_text and "compiling" in stdout_text
    # Followed to its end, attach stores the per-target rows and links the results as `build`.
    rows = _rows(state, build_id)
    assert set(rows) == set(TARGETS), stdout_text
    assert rows[FAILING][1] == "failed"
    assert f"build #{build_id}: {len(TARGETS)} targets" in stdout_text
    assert (flake / f"result-{TARGETS[0]}").is_symlink()
    # Attached to again once it ended: the exit status and the rows of following it live
    # (before: 0 and no rows, the failed target notwithstanding).
    again = _workbench(hosts_config, state, tmp_path, "attach", str(build_id))
    assert again.returncode == 1, again.stderr
    assert f"build #{build_id}: {len(TARGETS)} targets" in again.stdout, again.stdout
    # `hosts watch` of it exits as attach does (before: 0); --once is a view, exit 0.
    watched = _workbench(hosts_config, state, tmp_path, "hosts", "watch", str(build_id))
    assert watched.returncode == 1, watched.stderr
    assert f"build #{build_id} (matrix-4) failed" in watched.stderr, watched.stderr
    assert f"build #{build_id}: {len(TARGETS)} targets" in watched.stdout, watched.stdout
    once = _workbench(hosts_config, state, tmp_path, "hosts", "watch", str(build_id), "--once")
    assert once.returncode == 0, once.stderr


def test_hosts_watch_ends_when_the_builds_supervisor_is_gone(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """`hosts watch` (no --once) of a matrix build whose supervisor was killed: the liveness
    check marks the build lost and the watch ends, instead of waiting for ever."""
    hold = held_builds(loopback_host, tmp_path / "hold")
    flake = standin_variant_flake(tmp_path / "flake", seconds=4, hold=hold)
    state = tmp_path / "state"
    started = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake), "-d"
    )
    assert started.returncode == 0, started.stderr
    build_id = _build_ids(state)[-1]
    try:
        deadline = time.monotonic() + 60
        view = ""
        while " building: " not in view and time.monotonic() < deadline:
            view = _workbench(
                hosts_config, state, tmp_path, "hosts", "watch", str(build_id), "--once"
            ).stdout
        assert " building: " in view, view  # mid-build, the builds held
        with sqlite3.connect(state / "history.sqlite3") as db:
            supervisor = db.execute(
                "SELECT supervisor_pid FROM builds WHERE id = ?", (build_id,)
            ).fetchone()[0]
        # Lost for good: its keeper too (the supervisor alone is adopted by a new one, and the
        # watch rightly goes on; supervision/keeper.py).
        keeper_file = state / "builds" / str(build_id) / "keeper.json"
        keeper = json.loads(keeper_file.read_text())["pid"]
        for pid in (keeper, supervisor):
            os.kill(pid, signal.SIGKILL)
        # Without the liveness check it never ends (subprocess's timeout fails the test).
        watched = _workbench(
            hosts_config, state, tmp_path, "hosts", "watch", str(build_id), timeout=60
        )
    finally:
        (hold / "release").touch()
        # A lost build's nix still runs (nobody supervises it) and holds its targets' locks:
        # end it as a user would, so that the next test can build the same targets.
        _workbench(hosts_config, state, tmp_path, "stop", str(build_id), timeout=120)
    # Watched to its end, lost: it exits as attach of a lost build does (before: 0).
    assert watched.returncode == 1, watched.stderr
    assert f"build #{build_id} (matrix-4): lost\n" in watched.stdout, watched.stdout
    assert f"build #{build_id} (matrix-4) lost" in watched.stderr, watched.stderr


def test_hosts_that_cannot_build_are_left_out_in_one_line_each_before_the_build(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """A host whose key is refused and one without Nix: one "left out" line each on stderr
    before the build, which runs on this machine and the host that works."""
    wrong_key = loopback_host.directory / "wrong_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True
    )
    path = hosts_config / "hosts.toml"
    path.write_text(
        path.read_text()
        + loopback_host.hosts_entry("badkey", key=wrong_key)
        + loopback_host.hosts_entry("nonix", key=loopback_host.directory / "no_nix_key")
    )
    flake = standin_variant_flake(tmp_path / "flake", seconds=2)
    state = tmp_path / "state"
    done = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake)
    )
    assert done.returncode == 1, done.stderr  # the bf16 target failed; the others were built
    lines = done.stderr.splitlines()
    left_out = [line for line in lines if line.endswith("; left out")]
    assert len(left_out) == 2, done.stderr
    assert any(line.startswith("workbench: host badkey: ") for line in left_out), left_out
    assert any(line.startswith("workbench: host nonix: ") for line in left_out), left_out
    # Before the build: ahead of its first per-host view.
    first_view = lines.index("workbench: per host:")
    assert all(lines.index(line) < first_view for line in left_out), done.stderr
    rows = _rows(state, _build_ids(state)[-1])
    for name in set(TARGETS) - {FAILING}:
        assert rows[name][1] == "built" and rows[name][0] in ("local", "remote"), rows
    # Nix was given the working host only.
    with sqlite3.connect(state / "history.sqlite3") as db:
        argv = db.execute("SELECT argv FROM builds ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert str(loopback_host.client_key) in argv
    assert str(wrong_key) not in argv and "no_nix_key" not in argv


def test_nix_s_retry_elsewhere_is_visible_in_the_rows(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """A host the probe reaches but whose Nix daemon cannot be opened (its key's forced command
    refuses `nix-daemon`, as a host whose daemon broke after the probe): Nix's build hook tries
    it first (the higher speed factor), says "cannot build on", and builds elsewhere; the
    target's row says which host it was tried on first."""
    key = loopback_host.directory / "broken_daemon_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    refuse_daemon = (
        'command="case \\"$SSH_ORIGINAL_COMMAND\\" in nix-daemon*) echo no daemon >&2; exit 1;; '
        'esac; exec /bin/sh -c \\"$SSH_ORIGINAL_COMMAND\\"" '
    )
    with open(loopback_host.directory / "authorized_keys", "a") as authorized:
        authorized.write(refuse_daemon + key.with_suffix(".pub").read_text())
    path = hosts_config / "hosts.toml"
    path.write_text(
        path.read_text() + loopback_host.hosts_entry("broken", key=key, speed_factor=10)
    )
    flake = standin_variant_flake(tmp_path / "flake", seconds=2)
    state = tmp_path / "state"
    done = _workbench(
        hosts_config, state, tmp_path, "build", "--match", "cpu avx", "-C", str(flake)
    )
    assert done.returncode == 1, done.stderr  # bf16 failed; the others were built
    assert "left out" not in done.stderr  # the probe reached it: only Nix found it broken
    rows = _rows(state, _build_ids(state)[-1])
    retried = {name: row for name, row in rows.items() if "broken" in row[2].split(",")}
    assert retried, rows
    for name, row in retried.items():
        assert row[0] in ("local", "remote"), (name, row)
        line = next(line for line in done.stdout.splitlines() if f" {name} " in line)
        assert "(tried broken first)" in line, done.stdout
    for name in set(TARGETS) - {FAILING}:
        assert rows[name][1] == "built", rows
