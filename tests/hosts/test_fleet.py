"""The per-host view from a real Nix 2.8 log (recorded from the loopback matrix build of
tests/hosts/test_matrix_build.py, @nix lines only): the remote daemon's nested report of a
build is the same build, a refused host is gone, a failure keeps its first error line."""

from __future__ import annotations

from pathlib import Path

from workbench.hosts.fleet import Fleet, fleet_lines, target_states

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
