"""The per-host view from a real Nix 2.8 log (recorded from the loopback matrix build of
tests/remote/test_matrix_build.py, @nix lines only): the remote daemon's nested report of a
build is the same build, a refused host is gone, a failure keeps its first error line."""

from __future__ import annotations

from pathlib import Path

from workbench.remote.fleet import Fleet, fleet_lines, target_states

LOG = Path(__file__).parent / "fixtures" / "nix-2.8-matrix-build.log"
HOSTS = {
    "ssh-ng://root@workbench-remote?remote-store=local?root=/tmp/remote-store": "remote",
    "ssh-ng://root@workbench-badkey": "badkey",
}


def _fleet() -> Fleet:
    ticks = iter(range(1000))
    fleet = Fleet(host_names=HOSTS, clock=lambda: float(next(ticks)))
    for line in LOG.read_text().splitlines():
        fleet.feed(line)
    return fleet


def _targets(fleet: Fleet) -> list[dict]:
    names = {"avx2", "avx512", "avx512vnni", "bf16"}
    drvs = {a.drv.rsplit("-", 1)[1][:-4]: a.drv for a in fleet.attempts}
    assert set(drvs) == names
    return [{"name": name, "drv": drvs[name]} for name in sorted(names)] + [
        {"name": "never-started", "drv": "/nix/store/x-never.drv"},
        {"name": "resumed", "drv": "/nix/store/y-old.drv", "in_store": True},
    ]


def test_each_derivation_is_one_attempt_on_the_host_nix_chose() -> None:
    fleet = _fleet()
    hosts = {a.drv.rsplit("-", 1)[1]: a.host for a in fleet.attempts}
    # Four builds, not seven: the remote's own "building X" lines (host "") are folded in.
    assert len(fleet.attempts) == 4
    assert hosts == {
        "avx2.drv": "remote",
        "avx512.drv": "remote",
        "avx512vnni.drv": "local",
        "bf16.drv": "remote",
    }
    assert fleet.building_now() == {}
    assert fleet.gone["badkey"].startswith("cannot build there: cannot open connection")
    assert "remote" not in fleet.gone


def test_the_matrix_says_done_failed_with_first_error_waiting_and_in_store() -> None:
    fleet = _fleet()
    rows = {row.name: row for row in target_states(fleet, _targets(fleet))}
    assert rows["bf16"].state == "failed"
    assert rows["bf16"].first_error == "error: bf16_kernels.cc:12: no such intrinsic"
    assert (rows["avx2"].state, rows["avx2"].host) == ("done", "remote")
    assert rows["never-started"].state == "waiting"
    assert rows["resumed"].state == "in store"
    text = "\n".join(fleet_lines(fleet, ["local", "remote", "badkey"], _targets(fleet)))
    assert "badkey         GONE: cannot build there" in text
    assert "failed    bf16 on remote: error: bf16_kernels.cc:12" in text


def test_half_a_log_shows_what_builds_now() -> None:
    fleet = Fleet(host_names=HOSTS, clock=lambda: 0.0)
    lines = LOG.read_text().splitlines()
    # Up to the first line the local build prints: three builds are under way.
    cut = next(i for i, line in enumerate(lines) if "compiling avx512vnni" in line)
    for line in lines[: cut + 1]:
        fleet.feed(line)
    now = {
        host: sorted(a.drv.rsplit("-", 1)[1] for a in items)
        for host, items in fleet.building_now().items()
    }
    assert now == {"remote": ["avx2.drv", "avx512.drv"], "local": ["avx512vnni.drv"]}


# Recorded from test_matrix_build.py's host-killed test (real Nix 2.8, the loopback remote's
# sshd killed while it built avx2): `unexpected end-of-file` naming no host, then, only when
# the whole build ends, `builder for '...-avx2.drv' failed`.
KILLED_LOG = Path(__file__).parent / "fixtures" / "nix-2.8-host-killed.log"
REMOTE = "ssh-ng://root@workbench-remote?remote-store=local?root=/tmp/remote-store"
OTHER = "ssh-ng://root@workbench-other"


def _with_other_host_building(lines: list[str]) -> list[str]:
    """The killed log with a second remote host building a derivation of its own when the
    connection drops (its start line as Nix writes activity 105, with the other host's URI)."""
    lost = next(i for i, line in enumerate(lines) if "unexpected end-of-file" in line)
    start = next(line for line in lines if '"type":105' in line and REMOTE in line)
    other = start.replace(REMOTE, OTHER).replace("-avx2.drv", "-other.drv")
    other = other.replace('"id":', '"id":1', 1)
    return [*lines[:lost], other, *lines[lost:]]


def test_a_dropped_host_is_gone_and_its_build_says_connection_lost() -> None:
    fleet = Fleet(host_names={REMOTE: "remote"}, clock=lambda: 0.0)
    lines = KILLED_LOG.read_text().splitlines()
    lost = next(i for i, line in enumerate(lines) if "unexpected end-of-file" in line)
    for line in lines[: lost + 1]:
        fleet.feed(line)
    # Said at once (the only remote host building), not when the build ends.
    assert fleet.gone["remote"].startswith("connection lost (error: unexpected end-of-file")
    for line in lines[lost + 1 :]:
        fleet.feed(line)
    avx2 = next(a for a in fleet.attempts if a.drv.endswith("-avx2.drv"))
    assert (avx2.host, avx2.outcome) == ("remote", "failed")
    assert avx2.first_error == "connection to the host lost"
    # Nix's "cannot build on" that follows does not hide why the host went.
    assert fleet.gone["remote"].startswith("connection lost (")


def test_a_lost_connection_naming_no_host_is_blamed_on_the_host_whose_builder_fails() -> None:
    """Two remote hosts building when one drops: the other is not marked gone, nor is its
    build said to have lost its connection."""
    fleet = Fleet(host_names={REMOTE: "remote", OTHER: "other"}, clock=lambda: 0.0)
    lines = _with_other_host_building(KILLED_LOG.read_text().splitlines())
    lost = next(i for i, line in enumerate(lines) if "unexpected end-of-file" in line)
    for line in lines[: lost + 1]:
        fleet.feed(line)
    assert "other" not in fleet.gone
    for line in lines[lost + 1 :]:
        fleet.feed(line)
    assert "other" not in fleet.gone and "remote" in fleet.gone
    other = next(a for a in fleet.attempts if a.host == "other")
    assert other.first_error == ""
    avx2 = next(a for a in fleet.attempts if a.drv.endswith("-avx2.drv"))
    assert avx2.first_error == "connection to the host lost"
