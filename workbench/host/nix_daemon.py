"""Which Nix store serves this user, whether a nix-daemon trusts them, and what it builds with.

On a multi-user install a root `nix-daemon` does the building: it reads its own nix.conf
(`$NIX_CONF_DIR/nix.conf`, else /etc/nix/nix.conf), takes builders from its own `builders`
setting (by default `@/etc/nix/machines`) and opens their SSH connections itself, as root.
What a client may change depends on `trusted-users` (Nix's src/libstore/daemon.cc,
`ClientSettings::apply`, 2.8 to 2.2x): an untrusted client's `builders` (unless empty) and every
other restricted setting is dropped, and its substituters only where the daemon already lists
them (`substituters` or `trusted-substituters`); `max-jobs` and `cores` are fixed fields of every
connection's options, applied for any client.

Trust is asked of the daemon itself. Nix 2.15 and later answer it (`nix store ping --json`,
`trusted`); older ones (Debian's 2.8) only tell it by dropping a restricted setting, which they
log at debug level to the client: the probe passes `--option builders @/dev/null` (harmless where
it is applied: no builder, for one ping) and reads that line.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.host.bounded_command import run_bounded

PING_TIMEOUT_S = 20.0
DEFAULT_CONF_DIR = "/etc/nix"
DEFAULT_SOCKET = "/nix/var/nix/daemon-socket/socket"
# Nix's words when it drops a client's restricted setting (case differs between versions).
_DROPPED = "because it is a restricted setting and you are not a trusted user"
_PROBE_SETTING = "builders"
_PROBE_VALUE = "@/dev/null"


@dataclass(frozen=True)
class ConfSetting:
    """One setting of a nix.conf, with where it was set (the last line that set it)."""

    name: str
    value: str
    file: str
    line: int


@dataclass(frozen=True)
class NixConf:
    """The settings a nix.conf sets (includes followed), each with its file and line."""

    path: str
    exists: bool
    settings: dict[str, ConfSetting] = field(default_factory=dict)

    def value(self, name: str, default: str = "") -> str:
        found = self.settings.get(name)
        return found.value if found else default

    def words(self, name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        found = self.settings.get(name)
        return tuple(found.value.split()) if found else default


def read_nix_conf(path: Path) -> NixConf:
    """Read a nix.conf as Nix does: `name = value`, `#` comments, `extra-NAME` appending,
    `include`/`!include` of further files (relative to the including file)."""
    settings: dict[str, ConfSetting] = {}
    if not path.is_file():
        return NixConf(str(path), False, settings)
    _read_into(path, settings, depth=0)
    return NixConf(str(path), True, settings)


def _read_into(path: Path, settings: dict[str, ConfSetting], depth: int) -> None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] in ("include", "!include") and len(words) == 2 and depth < 8:
            included = Path(words[1])
            included = included if included.is_absolute() else path.parent / included
            _read_into(included, settings, depth + 1)
            continue
        if "=" not in line:
            continue
        name, value = (part.strip() for part in line.split("=", 1))
        if name.startswith("extra-"):
            name = name.removeprefix("extra-")
            before = settings.get(name)
            value = f"{before.value} {value}".strip() if before else value
        settings[name] = ConfSetting(name, value, str(path), number)


@dataclass(frozen=True)
class Machine:
    """One remote builder as a machines file or `builders` names it."""

    uri: str
    systems: tuple[str, ...]
    ssh_key: str
    max_jobs: int
    source: str  # "FILE:LINE" or "builders in FILE:LINE"

    @property
    def host(self) -> str:
        """The host part of its URI (no scheme, user or query)."""
        rest = self.uri.split("://", 1)[-1].split("?", 1)[0]
        return rest.rsplit("@", 1)[-1]


def parse_machines(text: str, source: str, depth: int = 0) -> tuple[Machine, ...]:
    """Machines from a `builders` value or a machines file: one per line or `;`, `@FILE`
    reading another file (Nix's parseBuilderLines)."""
    found: list[Machine] = []
    for number, raw in enumerate(text.replace(";", "\n").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("@"):
            machines_file = Path(line[1:])
            if depth < 4 and machines_file.is_file():
                with contextlib.suppress(OSError, KeyError):
                    found += parse_machines(
                        machines_file.read_text(errors="replace"), str(machines_file), depth + 1
                    )
            continue
        words = line.split()
        systems = tuple(words[1].split(",")) if len(words) > 1 and words[1] != "-" else ()
        key = words[2] if len(words) > 2 and words[2] != "-" else ""
        try:
            jobs = int(words[3]) if len(words) > 3 and words[3] != "-" else 1
        except ValueError:
            jobs = 1
        found.append(Machine(words[0], systems, key, jobs, f"{source}:{number}"))
    return tuple(found)


@dataclass(frozen=True)
class StorePing:
    """What `nix store ping` said: the store serving this user and whether it trusts them."""

    ok: bool
    store_url: str  # "daemon", "unix:///...", "local", "" when the ping failed
    version: str
    trusted: bool | None  # None: the store did not say (a local store: no daemon to trust)
    evidence: str  # how trust was learnt, or why the ping failed


def ping_store(env: Mapping[str, str] | None = None) -> StorePing:
    """Ask the store that serves this user (`nix store ping`), and whether it trusts them."""
    base = ["nix", "--extra-experimental-features", "nix-command", "store", "ping"]
    try:
        answer = run_bounded([*base, "--json"], PING_TIMEOUT_S, env=env)
    except (FileNotFoundError, subprocess.TimeoutExpired) as error:
        return StorePing(False, "", "", None, _failed(error))
    if answer.returncode == 0:
        try:
            document: dict[str, Any] = json.loads(answer.stdout)
        except ValueError:
            document = {}
        url = str(document.get("url", ""))
        trusted = document.get("trusted")
        if url and trusted is not None:
            return StorePing(
                True, url, str(document.get("version", "")), bool(trusted),
                "the daemon said so (nix store ping --json: trusted)",
            )  # fmt: skip
    # Older Nix: no --json; a restricted setting the daemon drops only for untrusted users.
    probe = [*base, "--debug", "--option", _PROBE_SETTING, _PROBE_VALUE]
    try:
        answer = run_bounded(probe, PING_TIMEOUT_S, env=env)
    except (FileNotFoundError, subprocess.TimeoutExpired) as error:
        return StorePing(False, "", "", None, _failed(error))
    fields = _ping_fields(answer.stdout + "\n" + answer.stderr)
    if answer.returncode != 0 or "Store URL" not in fields:
        said = answer.stderr.strip().splitlines()
        message = next(
            (line for line in said if line.startswith("error")), said[-1] if said else ""
        )
        return StorePing(False, "", "", None, f"nix store ping failed: {message[:300]}")
    url = fields["Store URL"]
    version = fields.get("Version", "")
    if not served_by_daemon(url):
        return StorePing(True, url, version, None, "no daemon: this user's Nix opens the store")
    dropped = _DROPPED in answer.stderr.lower()
    how = (
        f"the daemon dropped a restricted setting ({_PROBE_SETTING}) from this user"
        if dropped
        else f"the daemon took a restricted setting ({_PROBE_SETTING}) from this user"
    )
    return StorePing(True, url, version, not dropped, how)


def _failed(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError):
        return "nix is not installed (not on PATH)"
    return f"nix store ping did not answer within {PING_TIMEOUT_S:.0f} s"


def _ping_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(("Store URL:", "Version:")):
            name, value = line.split(":", 1)
            fields.setdefault(name, value.strip())
    return fields


def served_by_daemon(store_url: str) -> bool:
    """Whether a store URL is a nix-daemon's (its Unix socket)."""
    return store_url == "daemon" or store_url.startswith("unix://")


@dataclass(frozen=True)
class DaemonReality:
    """Which store serves this user, and on a daemon: trust, its config and its builders."""

    user: str
    ping: StorePing
    socket: str | None  # the daemon's socket, when a daemon serves
    conf: NixConf  # the nix.conf the daemon reads (as far as this user can tell)
    trusted_users: tuple[str, ...]
    trusted_by_conf: bool  # whether trusted-users names this user (or a group of theirs)
    builders: tuple[Machine, ...]  # the builders the daemon uses
    builders_source: str  # where its `builders` setting comes from
    substituters: tuple[str, ...]
    trusted_substituters: tuple[str, ...]

    @property
    def via_daemon(self) -> bool:
        return self.ping.ok and served_by_daemon(self.ping.store_url)

    @property
    def trusted(self) -> bool | None:
        """Whether the daemon trusts this user (None: no daemon, or it could not be asked)."""
        return self.ping.trusted if self.via_daemon else None

    def meaning(self) -> list[str]:
        """What this store means for --builders, --max-jobs, --cores and substituters."""
        if not self.ping.ok:
            return [f"no Nix store answered: {self.ping.evidence}"]
        if not self.via_daemon:
            return [
                f"Nix opens the store itself ({self.ping.store_url}): --builders, --max-jobs "
                "and substituters given on the command line are used as given"
            ]
        lines = ["--max-jobs and --cores: used (every client sends them to the daemon)"]
        if self.trusted:
            lines.append(
                "--builders: used, but the daemon opens the SSH connections itself as root, "
                "with root's ~/.ssh (NIX_SSHOPTS and this user's keys do not reach it)"
            )
            lines.append("substituters: any this user names are used")
        else:
            daemon_builders = (
                f"the daemon's own {len(self.builders)} ({self.builders_source})"
                if self.builders
                else f"the daemon has none ({self.builders_source}): everything builds here"
            )
            lines.append(f"--builders: ignored (this user is not trusted); used: {daemon_builders}")
            listed = " ".join(self.substituters + self.trusted_substituters) or "none"
            lines.append(
                "substituters: only those the daemon lists in substituters or "
                f"trusted-substituters ({listed}); others are ignored"
            )
        return lines

    def status_line(self) -> str | None:
        """One line for the TUI's first screen: the daemon that serves this user, whether it
        trusts them and what that means for builders; None where no daemon serves (single-user
        Nix, or no Nix: the store is this user's own and there is nothing to say)."""
        if not self.via_daemon:
            return None
        version = f", Nix {self.ping.version}" if self.ping.version else ""
        where = f"socket {self.socket}{version}"
        if self.trusted is None:
            return f"Nix  daemon: {self.user} trust unknown ({self.ping.evidence}) · {where}"
        if self.trusted:
            return (
                f"Nix  daemon: {self.user} trusted → --builders used, reached by the daemon as "
                f"root (root's ~/.ssh) · {where}"
            )
        count = len(self.builders)
        builders = (
            f"the daemon's {count} builder{'' if count == 1 else 's'} used ({self.builders_source})"
            if count
            else "all builds here (the daemon has no builders)"
        )
        return (
            f"Nix  daemon: {self.user} NOT trusted → --builders ignored, {builders} · "
            f"`workbench doctor` says how to trust · {where}"
        )

    def trust_line(self) -> str:
        """The nix.conf line that would make this user trusted."""
        names = list(self.trusted_users or ("root",))
        return f"trusted-users = {' '.join([*names, self.user])}"

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "store": self.ping.store_url or None,
            "store_ok": self.ping.ok,
            "nix_version": self.ping.version or None,
            "via_daemon": self.via_daemon,
            "socket": self.socket,
            "trusted": self.trusted,
            "trust_evidence": self.ping.evidence,
            "nix_conf": self.conf.path,
            "nix_conf_readable": self.conf.exists,
            "trusted_users": list(self.trusted_users),
            "trusted_by_conf": self.trusted_by_conf,
            "builders": [
                {"uri": m.uri, "systems": list(m.systems), "max_jobs": m.max_jobs, "from": m.source}
                for m in self.builders
            ],
            "builders_source": self.builders_source,
            "substituters": list(self.substituters),
            "trusted_substituters": list(self.trusted_substituters),
            "meaning": self.meaning(),
            "trust_line": self.trust_line() if self.via_daemon and not self.trusted else None,
            "status_line": self.status_line(),  # the TUI's first screen shows this line
        }


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _names_user(entries: tuple[str, ...], user: str) -> bool:
    groups: set[str] = set()
    with contextlib.suppress(OSError, KeyError):
        groups = {grp.getgrgid(gid).gr_name for gid in os.getgroups()}
    for entry in entries:
        if entry in ("*", user) or (entry.startswith("@") and entry[1:] in groups):
            return True
    return False


def check_daemon(env: Mapping[str, str] | None = None) -> DaemonReality:
    """Ask Nix which store serves this user and read the daemon's nix.conf and builders."""
    environment = dict(os.environ if env is None else env)
    ping = ping_store(environment)
    conf_dir = Path(environment.get("NIX_CONF_DIR") or DEFAULT_CONF_DIR)
    conf = read_nix_conf(conf_dir / "nix.conf")
    trusted_users = conf.words("trusted-users", ("root",))
    builders_setting = conf.settings.get("builders")
    if builders_setting is not None:
        value, source = builders_setting.value, f"builders in {conf.path}:{builders_setting.line}"
    else:
        value, source = f"@{conf_dir / 'machines'}", f"{conf_dir / 'machines'} (the default)"
    builders = parse_machines(value, conf.path)
    socket = None
    if served_by_daemon(ping.store_url):
        url = ping.store_url
        socket = url[len("unix://") :] if url.startswith("unix://") else None
        socket = socket or environment.get("NIX_DAEMON_SOCKET_PATH") or DEFAULT_SOCKET
    user = _user_name()
    return DaemonReality(
        user=user,
        ping=ping,
        socket=socket,
        conf=conf,
        trusted_users=trusted_users,
        trusted_by_conf=_names_user(trusted_users, user),
        builders=builders,
        builders_source=source,
        substituters=conf.words("substituters", ("https://cache.nixos.org/",)),
        trusted_substituters=conf.words("trusted-substituters"),
    )


def reality_lines(reality: DaemonReality) -> list[str]:
    """The store, trust and builders in words: what `doctor` and `hosts` print."""
    ping = reality.ping
    if not ping.ok:
        return [f"no Nix store answered: {ping.evidence}"]
    version = f", Nix {ping.version}" if ping.version else ""
    if not reality.via_daemon:
        return [f"store: {ping.store_url}{version} (no daemon: this user's Nix opens it)"]
    lines = [f"store: a nix-daemon (socket {reality.socket}){version}"]
    trust = {True: "trusted", False: "not trusted", None: "trust unknown"}[reality.trusted]
    lines.append(f"{reality.user}: {trust} ({ping.evidence})")
    listed = reality.conf.settings.get("trusted-users")
    where = f"{listed.file}:{listed.line}" if listed else f"{reality.conf.path} (not set: root)"
    if not reality.conf.exists:
        where = f"{reality.conf.path} (not readable here: Nix's default, root)"
    lines.append(f"trusted-users = {' '.join(reality.trusted_users)}  [{where}]")
    lines += [f"- {line}" for line in reality.meaning()]
    if reality.builders:
        lines.append(f"builders the daemon uses ({reality.builders_source}):")
        lines += [f"  {m.uri} ({','.join(m.systems) or 'any system'}, {m.max_jobs} jobs)"
                  for m in reality.builders]  # fmt: skip
    else:
        lines.append(f"builders the daemon uses: none ({reality.builders_source})")
    if reality.trusted is False:
        lines.append(f"to trust {reality.user}, add to {reality.conf.path}: {reality.trust_line()}")
    return lines
