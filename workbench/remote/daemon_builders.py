"""The hosts of hosts.toml as a nix-daemon sees them: will it build there, can it reach them.

Through a daemon, `nix build --builders ...` is the client's wish, not the daemon's: an
untrusted user's `--builders` is dropped (the daemon's own `builders` / machines file are used),
and even a trusted user's builders are reached by the daemon, as root, with root's ssh
configuration or the daemon's own NIX_SSHOPTS: the workbench's ssh config (`Host workbench-NAME`,
given to the client through NIX_SSHOPTS) never reaches it. Nix then builds here, saying nothing.
This module says so, with the exact lines to add and where; it never writes a system file.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from workbench.host.bounded_command import run_bounded
from workbench.host.nix_daemon import DEFAULT_SOCKET, DaemonReality, Machine
from workbench.remote.config import BuildHost, HostsConfig

REACH_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Fix:
    """Lines to add to one file so that the daemon builds on a host."""

    where: str
    lines: tuple[str, ...]
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "lines": list(self.lines), "why": self.why}


@dataclass(frozen=True)
class HostUnderDaemon:
    """One host of hosts.toml, as the daemon will treat it."""

    name: str
    daemon_builds_there: bool | None  # None: depends on a reach not checked
    why: str
    reach: str  # "yes", "no" or "not checked"
    reach_detail: str
    fixes: tuple[Fix, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "daemon_builds_there": self.daemon_builds_there,
            "why": self.why,
            "daemon_reaches_it": self.reach,
            "reach_detail": self.reach_detail,
            "fixes": [fix.to_json() for fix in self.fixes],
        }


def machine_line(host: BuildHost) -> str:
    """The host as one line of a machines file (`builders` / /etc/nix/machines)."""
    key = str(Path(host.ssh_key).expanduser()) if host.ssh_key else "-"
    return " ".join(
        [
            host.store_uri,
            ",".join(host.systems),
            key,
            str(host.max_jobs),
            str(host.speed_factor),
            ",".join(host.features) or "-",
            ",".join(host.mandatory_features) or "-",
            "-",
        ]
    )


def root_ssh_block(host: BuildHost) -> tuple[str, ...]:
    """The ssh config lines that let root reach the host under the workbench's alias."""
    lines = [f"Host {host.alias}", f"  HostName {host.address}", f"  Port {host.port}"]
    if host.user:
        lines.append(f"  User {host.user}")
    if host.ssh_key:
        lines += [f"  IdentityFile {Path(host.ssh_key).expanduser()}", "  IdentitiesOnly yes"]
    if host.host_key:
        lines.append(f"  HostKeyAlias {host.alias}")
    return tuple(lines)


def _root_home() -> str:
    try:
        return pwd.getpwuid(0).pw_dir
    except KeyError:
        return "/root"


def _daemon_environment(socket: str | None) -> dict[str, str] | None:
    """The environment of the nix-daemon serving `socket` (root only may read it)."""
    wanted = socket or DEFAULT_SOCKET
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            if process.info["name"] != "nix-daemon" or "--stdio" in (process.info["cmdline"] or []):
                continue
            environment = process.environ()
        except (psutil.Error, OSError):
            continue
        if environment.get("NIX_DAEMON_SOCKET_PATH", DEFAULT_SOCKET) == wanted:
            return environment
    return None


def _uri_with_key(host: BuildHost) -> str:
    """The host's store URI with its key as a machines file gives it (`ssh-key=`)."""
    if not host.ssh_key:
        return host.store_uri
    key = f"ssh-key={Path(host.ssh_key).expanduser()}"
    return host.store_uri + ("&" if "?" in host.store_uri else "?") + key


def _reach_as_daemon(host: BuildHost, reality: DaemonReality) -> tuple[str, str]:
    """Ping the host's store the way the daemon would: as root, with the daemon's NIX_SSHOPTS
    (not the workbench's), the key as a machines file names it."""
    uri = _uri_with_key(host)
    if os.geteuid() != 0:
        return (
            "not checked",
            f"the daemon connects as root; as root: nix store ping --store '{uri}'",
        )
    environment = {k: v for k, v in os.environ.items() if k != "NIX_SSHOPTS"}
    daemon_env = _daemon_environment(reality.socket)
    if daemon_env and daemon_env.get("NIX_SSHOPTS"):
        environment["NIX_SSHOPTS"] = daemon_env["NIX_SSHOPTS"]
    environment["HOME"] = _root_home()
    argv = ["nix", "--extra-experimental-features", "nix-command", "store", "ping", "--store", uri]
    try:
        answer = run_bounded(argv, REACH_TIMEOUT_S, env=environment)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return "no", f"nix store ping --store {uri} did not answer within {REACH_TIMEOUT_S:.0f} s"
    if answer.returncode == 0:
        return "yes", f"nix store ping --store {uri} as root answered"
    said = [line for line in answer.stderr.strip().splitlines() if line.strip()]
    return "no", (said[-1] if said else f"nix store ping exited {answer.returncode}")[:300]


def hosts_under_daemon(
    reality: DaemonReality, config: HostsConfig, check_reach: bool = True
) -> list[HostUnderDaemon]:
    """Each enabled host as the daemon will treat it (empty when no daemon serves this user)."""
    if not reality.via_daemon:
        return []
    machines_file = str(Path(reality.conf.path).parent / "machines")
    ssh_config = f"{_root_home()}/.ssh/config (or a file the daemon's NIX_SSHOPTS=-F names)"
    rows = []
    for host in config.enabled_hosts:
        listed = [m for m in reality.builders if m.host in (host.alias, host.address)]
        reach, detail = _reach_as_daemon(host, reality) if check_reach else ("not checked", "")
        ssh_fix = Fix(
            ssh_config,
            root_ssh_block(host),
            f"the daemon reaches {host.name} as root, under the alias {host.alias}",
        )
        fixes: list[Fix] = []
        if reality.trusted:
            why = "this user is trusted: the daemon takes the workbench's --builders"
            builds = {"yes": True, "no": False}.get(reach)
            if reach == "no":
                why += f", but as root it cannot reach {host.alias}"
        elif listed:
            why = f"the daemon's own builders name it ({listed[0].source})"
            builds = {"yes": True, "no": False}.get(reach)
            if reach == "no":
                why += f", but as root it cannot reach {host.alias}"
        else:
            why = (
                f"{reality.user} is not trusted: the daemon ignores --builders, and its own "
                f"builders ({reality.builders_source}) do not name {host.alias}"
            )
            builds = False
            fixes.append(
                Fix(reality.conf.path, (reality.trust_line(),), "trust this user (then restart "
                    "the daemon)")
            )  # fmt: skip
            fixes.append(
                Fix(machines_file, (machine_line(host),), "or, trusting no one, make it one of "
                    "the daemon's own builders")
            )  # fmt: skip
        if reach != "yes":
            fixes.append(ssh_fix)
            if host.host_key:
                fixes.append(
                    Fix(
                        f"{_root_home()}/.ssh/known_hosts (or the file the UserKnownHostsFile "
                        "of that ssh config names)",
                        (f"{host.alias} {host.host_key}",),
                        f"root knows {host.name}'s host key under the alias",
                    )
                )
        rows.append(HostUnderDaemon(host.name, builds, why, reach, detail, tuple(fixes)))
    return rows


def local_only_warning(
    rows: Sequence[HostUnderDaemon], reality: DaemonReality | None = None
) -> str | None:
    """One line when the daemon would build nothing on the hosts: a silent all-local build,
    or (an untrusted user, a daemon with builders of its own) a build on its builders only."""
    if not rows or any(row.daemon_builds_there is not False for row in rows):
        return None
    if reality is not None and reality.trusted is False and reality.builders:
        return (
            f"the nix-daemon will build on none of the {len(rows)} hosts of hosts.toml: this "
            f"matrix build goes to its own builders only ({reality.builders_source})"
        )
    return (
        f"the nix-daemon will build on none of the {len(rows)} hosts of hosts.toml: "
        "this matrix build would build everything on this machine"
    )


@dataclass(frozen=True)
class BuildersInUse:
    """The builders Nix will really use for a matrix build, and whether `--builders` is worth
    passing: through a daemon that does not trust this user it is dropped, and the daemon's own
    builders (its machines file or `builders`) are used instead."""

    hosts: dict[str, str]  # store URI as Nix prints it -> the name the views show
    from_daemon: bool  # the daemon's own builders, not hosts.toml's
    note: str | None  # said before the build when they are the daemon's

    @property
    def pass_builders(self) -> bool:
        return not self.from_daemon


def daemon_builder_name(machine: Machine, config: HostsConfig) -> str:
    """A daemon builder's name in the views: the hosts.toml host it is (by alias or address),
    else its host as the machines line names it."""
    for host in config.hosts:
        if machine.host in (host.alias, host.address):
            return host.name
    return machine.host


def builders_in_use(reality: DaemonReality, config: HostsConfig) -> BuildersInUse:
    """hosts.toml's hosts, unless a daemon that does not trust this user builds with its own."""
    if not (reality.via_daemon and reality.trusted is False):
        return BuildersInUse({host.store_uri: host.name for host in config.enabled_hosts}, False,
                             None)  # fmt: skip
    hosts = {machine.uri: daemon_builder_name(machine, config) for machine in reality.builders}
    if not hosts and not config.enabled_hosts:
        return BuildersInUse({}, True, None)  # no builders wanted, none used: nothing to say
    used = ", ".join(dict.fromkeys(hosts.values())) or "none, so everything builds on this machine"
    note = (
        f"--builders not passed: the nix-daemon does not trust {reality.user} and would drop it; "
        f"it builds with its own builders ({reality.builders_source}): {used}"
    )
    return BuildersInUse(hosts, True, note)
