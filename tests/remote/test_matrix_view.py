"""The matrix view read from a log as it grows (the recorded Nix 2.8 loopback matrix log, written
in pieces cut mid-line, as the supervisor appends it), and `attach`'s per-host lines."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from recorded_builds import new_build

from workbench.history.store import History, database_path
from workbench.remote.fleet import Fleet
from workbench.remote.matrix_view import (
    LogFleet,
    PerHostLines,
    host_lines,
    hosts_now,
)

LOG = Path(__file__).parent / "fixtures" / "nix-2.8-matrix-build.log"
REMOTE = "ssh-ng://root@workbench-remote?remote-store=local?root=/tmp/remote-store"
HOSTS = {REMOTE: "remote", "ssh-ng://root@workbench-badkey": "badkey"}


def _matrix_build(state: Path) -> Path:
    """A matrix build's record (as `hosts.matrix_build` makes one) with an empty log; the log."""
    with History(state) as history:
        record = history.create(
            new_build(
                "matrix-4",
                backend="nix",
                argv=("nix", "build"),
                cwd=".",
                settings={"matrix": {"targets": [], "hosts": HOSTS, "local_builds": True}},
                eta_key="matrix",
            )
        )
    log = Path(record.log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")
    return log


def test_a_log_read_in_pieces_cut_mid_line_is_the_whole_log(tmp_path: Path) -> None:
    data = LOG.read_bytes()
    whole = Fleet(host_names=HOSTS, clock=lambda: None)
    for line in data.decode().splitlines():
        whole.feed(line)
    grown = tmp_path / "build.log"
    grown.write_bytes(b"")
    reader = LogFleet(grown, Fleet(host_names=HOSTS, clock=lambda: None))
    for start in range(0, len(data), 997):  # 997: cuts fall inside lines and JSON strings
        with open(grown, "ab") as log:
            log.write(data[start : start + 997])
        reader.catch_up(limit=600)  # reads less than was appended: it catches up later
    while not reader.caught_up():
        reader.catch_up(limit=600)
    assert [(a.drv, a.host, a.outcome) for a in reader.fleet.attempts] == [
        (a.drv, a.host, a.outcome) for a in whole.attempts
    ]
    assert reader.fleet.gone == whole.gone


def test_hosts_now_mid_build() -> None:
    fleet = Fleet(host_names=HOSTS, clock=lambda: None)
    for line in LOG.read_text().splitlines()[:70]:
        fleet.feed(line)
    lines = host_lines(hosts_now(fleet, ["local", "remote", "badkey"]))
    assert lines[0] == "local          1 building: avx512vnni"
    assert lines[1] == "remote         2 building: avx512, bf16"
    assert lines[2].startswith("badkey         GONE: cannot build there: cannot open connection")


def test_attach_s_per_host_lines_come_when_they_change_and_never_carry_escapes(
    tmp_path: Path,
) -> None:
    log = _matrix_build(tmp_path / "state")
    with History(tmp_path / "state") as history:
        record = history.builds(limit=1)[0]
    view = PerHostLines.for_build(record)
    assert view is not None
    lines = LOG.read_text().splitlines(keepends=True)
    with open(log, "a") as out:
        out.write("".join(lines[:16]))  # avx2 starts on the remote
    assert view.changed() == [
        "per host:",
        "  local          idle",
        "  badkey         idle",
        "  remote         1 building: avx2",
    ]
    assert view.changed() == []  # nothing new: nothing said
    # A host's refusal quoting what its shell printed: a title-setting escape, a bell.
    hostile = "cannot build on 'ssh-ng://root@workbench-badkey': error: \x1b]0;pwned\x07 no"
    message = {"action": "msg", "level": 0, "msg": hostile}
    with open(log, "a") as out:
        out.write(f"@nix {json.dumps(message)}\n")
    said = view.changed()
    assert "  badkey         GONE: cannot build there: ^[]0;pwned^G no" in said
    assert not any(ch in "".join(said) for ch in "\x1b\x07")


def test_any_other_build_has_no_per_host_view(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        record = history.create(new_build("plain", argv=("ninja",), cwd=".", eta_key="plain"))
    assert PerHostLines.for_build(record) is None


def test_each_target_s_release_is_in_the_view_running_and_ended(tmp_path: Path) -> None:
    """The release each target was recorded with (`MatrixTarget.to_json`'s ort_version) is on
    its row while the log is read and once the build's per-target rows are stored; a target
    recorded without one (a build from before releases) says nothing of it."""
    from tui.fixed_matrix import WAITING, write_matrix_build

    from workbench.remote.matrix_view import MatrixWatch, view_lines

    for running in (True, False):
        state = tmp_path / ("running" if running else "ended")
        build_id = write_matrix_build(state, running=running)
        view = MatrixWatch(state, build_id).view(now=0.0)
        assert view is not None and view.active is running
        releases = {row.name: row.ort_version for row in view.rows}
        assert releases.pop(WAITING) == "1.24.2"
        assert set(releases.values()) == {"1.23.2"}, releases
        assert f"  {'waiting' if running else 'not built':<9} {WAITING} (ONNX Runtime 1.24.2)" in (
            view_lines(view)
        )

    state = tmp_path / "unrecorded"
    build_id = write_matrix_build(state, running=True)
    with History(state) as history:
        settings = dict(history.get(build_id).settings)
    for target in settings["matrix"]["targets"]:
        del target["ort_version"]
    with sqlite3.connect(database_path(state)) as db:
        db.execute("UPDATE builds SET settings = ? WHERE id = ?", (json.dumps(settings), build_id))
    view = MatrixWatch(state, build_id).view(now=0.0)
    assert view is not None and {row.ort_version for row in view.rows} == {""}


def test_a_daemons_builder_is_the_builds_own_host_from_its_first_derivation_on() -> None:
    """A matrix build a daemon sent to its own builders (builders_from "daemon"): the view
    lists this machine only until the build's log says one of its derivations started on the
    daemon's builder; from then on that builder is listed, also once it is idle again."""
    from workbench.remote.matrix_view import host_list

    matrix = {"hosts": {REMOTE: "remote"}, "local_builds": True, "builders_from": "daemon"}
    listed = host_list(matrix)
    assert listed == ["local"]
    fleet = Fleet(host_names=dict(matrix["hosts"]), clock=lambda: None)
    seen: list[list[str]] = []
    for line in LOG.read_text().splitlines():
        fleet.feed(line)
        names = [host.name for host in hosts_now(fleet, listed)]
        on_remote = [a for a in fleet.attempts if a.host == "remote"]
        assert ("remote" in names) == bool(on_remote), (line, names)
        if not seen or seen[-1] != names:
            seen.append(names)
    assert seen[0] == ["local"] and seen[-1][:2] == ["local", "remote"], seen
    # Built from hosts.toml, the same host is listed from the start.
    assert host_list({**matrix, "builders_from": "hosts.toml"}) == ["local", "remote"]
