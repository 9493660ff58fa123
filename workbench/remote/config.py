"""Build hosts in configs/hosts.toml: typed and validated, each refusal naming file and line."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from workbench.configs.toml_files import load_toml, read_text
from workbench.errors import ConfigError

HOSTS_FILE = "hosts.toml"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# Every name below reaches an ssh or nix command line (as one argv item, never through a
# shell); these still refuse spaces, quotes and options so a typo cannot become an argument.
SSH_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")
SSH_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
QUERY = re.compile(r"^[A-Za-z0-9._~/=?&%:+-]*$")
SYSTEM = re.compile(r"^[a-z0-9_]+-[a-z0-9_]+$")
FEATURE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
HOST_KEY = re.compile(r"^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+) [A-Za-z0-9+/=]{16,}$")
SCHEMES = ("ssh", "ssh-ng")


@dataclass(frozen=True)
class BuildHost:
    """One remote builder as Nix sees it, plus how SSH reaches it."""

    name: str
    scheme: str  # ssh or ssh-ng
    user: str  # "" leaves it to ~/.ssh/config
    address: str  # host name or address SSH connects to
    query: str  # the store URI's ?... part ("" if none), e.g. remote-store=local?root=/x
    port: int
    ssh_key: str  # "" for ssh's default
    host_key: str  # "" for the user's known_hosts
    systems: tuple[str, ...]
    max_jobs: int
    speed_factor: int
    features: tuple[str, ...]
    mandatory_features: tuple[str, ...]
    enabled: bool

    @property
    def alias(self) -> str:
        """The SSH host name the workbench's ssh config gives this host (port, key, host key)."""
        return f"workbench-{self.name}"

    @property
    def store_uri(self) -> str:
        """The store URI Nix is given: the alias in place of the address."""
        user = f"{self.user}@" if self.user else ""
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{user}{self.alias}{query}"


@dataclass(frozen=True)
class HostsConfig:
    """The validated contents of hosts.toml."""

    path: Path
    local_builds: bool
    hosts: tuple[BuildHost, ...]
    push_to: str = ""  # a store every successful build is pushed to (workbench push)
    signing_key: str = ""  # the secret key file pushes are signed with

    @property
    def enabled_hosts(self) -> tuple[BuildHost, ...]:
        return tuple(host for host in self.hosts if host.enabled)

    def by_name(self, name: str) -> BuildHost | None:
        return next((host for host in self.hosts if host.name == name), None)


class _Refused(ValueError):
    pass


def _whole(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Refused("not a whole number")
        if not low <= value <= high:
            raise _Refused("out of range")
        return value

    return check


def _names(pattern: re.Pattern[str], what: str) -> Callable[[Any], tuple[str, ...]]:
    def check(value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise _Refused(f"not a list of {what}")
        bad = [item for item in value if not pattern.match(item)]
        if bad:
            raise _Refused(f"{bad[0]!r} is not a {what[:-1]}")
        return tuple(value)

    return check


def _text(pattern: re.Pattern[str] | None, what: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise _Refused("not text")
        if pattern is not None and value and not pattern.match(value):
            raise _Refused(f"not {what}")
        return value

    return check


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Refused("not true or false")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise _Refused("not a host name")
    return value


def _key_path(value: Any) -> str:
    if not isinstance(value, str):
        raise _Refused("not text")
    if value and (any(c.isspace() for c in value) or value.startswith("-")):
        raise _Refused("a key path with spaces or starting with '-'")
    return value


@dataclass(frozen=True)
class _Spec:
    check: Callable[[Any], Any]
    allowed: str
    default: Any = None  # None: required


_HOST_SPECS: dict[str, _Spec] = {
    "name": _Spec(_name, "lower-case letters, digits and '-', at most 40, starting with either"),
    "store": _Spec(
        _text(None, "a store URI"),
        "ssh-ng://[USER@]HOST[?remote-store=...] or ssh://[USER@]HOST",
    ),
    "port": _Spec(_whole(1, 65535), "a port from 1 to 65535", 22),
    "ssh_key": _Spec(_key_path, "a path to a private key without spaces, or empty", ""),
    "host_key": _Spec(
        _text(HOST_KEY, "a public key"),
        'the host\'s public key, "ssh-ed25519 AAAA...", or empty',
        "",
    ),
    "systems": _Spec(
        _names(SYSTEM, "systems"), 'a list of Nix systems, e.g. ["x86_64-linux"]', ["x86_64-linux"]
    ),
    "max_jobs": _Spec(_whole(1, 256), "a whole number from 1 to 256", 1),
    "speed_factor": _Spec(_whole(1, 1000), "a whole number from 1 to 1000", 1),
    "features": _Spec(
        _names(FEATURE, "features"), 'a list of feature names, e.g. ["big-parallel", "cuda"]', []
    ),
    "mandatory_features": _Spec(
        _names(FEATURE, "features"), "a list of feature names (usually empty)", []
    ),
    "enabled": _Spec(_bool, "true or false", True),
}


def _line_in_table(text: str, index: int, key: str | None) -> int | None:
    """The line of the index-th [[hosts]] header, or of `key = ` inside that table."""
    lines = text.splitlines()
    seen = -1
    start = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("[[hosts]]"):
            seen += 1
            if seen == index:
                start = number
                if key is None:
                    return number
                continue
        if start is not None:
            if stripped.startswith("["):
                return start
            if re.match(rf"^{re.escape(key or '')}\s*=", stripped):
                return number
    return start


def _parse_store(value: str) -> tuple[str, str, str, str]:
    """scheme, user, address, query of a store URI; _Refused if it is not an SSH store."""
    parts = urlsplit(value)
    if parts.scheme not in SCHEMES:
        raise _Refused("not an ssh:// or ssh-ng:// store")
    user, _, address = parts.netloc.rpartition("@")
    if ":" in address:
        raise _Refused("a port in the URI (Nix takes none there: use port = N)")
    if not SSH_HOST.match(address) or (user and not SSH_USER.match(user)):
        raise _Refused("not [USER@]HOST")
    if parts.path or parts.fragment or not QUERY.match(parts.query):
        raise _Refused("unexpected characters after the host")
    return parts.scheme, user, address, parts.query


def _host(table: Any, index: int, path: Path, text: str) -> BuildHost:
    where_table = f"{path}:{_line_in_table(text, index, None) or '?'}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where_table}: [[hosts]] entry {index + 1} is not a table")
    unknown = [key for key in table if key not in _HOST_SPECS]
    if unknown:
        line = _line_in_table(text, index, unknown[0])
        raise ConfigError(
            f"{path}:{line}: unknown key {unknown[0]!r} in [[hosts]]; "
            f"keys: {', '.join(_HOST_SPECS)}"
        )
    values: dict[str, Any] = {}
    for key, spec in _HOST_SPECS.items():
        if key not in table:
            if spec.default is None:
                raise ConfigError(
                    f"{where_table}: [[hosts]] entry {index + 1} has no {key!r}; "
                    f"allowed: {spec.allowed}"
                )
            values[key] = spec.check(spec.default)
            continue
        try:
            values[key] = spec.check(table[key])
            if key == "store":
                values["store"] = _parse_store(values["store"])
        except _Refused as why:
            line = _line_in_table(text, index, key)
            raise ConfigError(
                f"{path}:{line}: {key} = {_shown(table[key])}: refused ({why}); "
                f"allowed: {spec.allowed}"
            ) from None
    scheme, user, address, query = values.pop("store")
    return BuildHost(scheme=scheme, user=user, address=address, query=query, **values)


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


def hosts_path(config_directory: Path) -> Path:
    """configs/hosts.toml."""
    return config_directory / HOSTS_FILE


def load_hosts(config_directory: Path) -> HostsConfig:
    """Read and validate hosts.toml; a missing file means this machine alone."""
    path = hosts_path(config_directory)
    if not path.exists():
        return HostsConfig(path=path, local_builds=True, hosts=())
    data = load_toml(path)
    text = read_text(path)
    known = ("local_builds", "push_to", "signing_key", "hosts")
    for key in data:
        if key not in known:
            line = _line_of_top_key(text, key)
            raise ConfigError(f"{path}:{line}: unknown key {key!r}; keys: {', '.join(known)}")
    local_builds = data.get("local_builds", True)
    if not isinstance(local_builds, bool):
        line = _line_of_top_key(text, "local_builds")
        raise ConfigError(
            f"{path}:{line}: local_builds = {_shown(local_builds)}: refused (not true or false); "
            "allowed: true or false"
        )
    tables = data.get("hosts", [])
    if not isinstance(tables, list):
        line = _line_of_top_key(text, "hosts")
        raise ConfigError(f"{path}:{line}: hosts: refused (not [[hosts]] tables)")
    hosts = tuple(_host(table, index, path, text) for index, table in enumerate(tables))
    seen: set[str] = set()
    for index, host in enumerate(hosts):
        if host.name in seen:
            at = _line_in_table(text, index, "name")
            raise ConfigError(
                f"{path}:{at}: name = {host.name!r}: refused (used by an earlier host); "
                "allowed: a name no other host has"
            )
        seen.add(host.name)
    if not local_builds and not any(host.enabled for host in hosts):
        line = _line_of_top_key(text, "local_builds")
        raise ConfigError(
            f"{path}:{line}: local_builds = false: refused (no enabled host would build "
            "anything); allowed: true, or false with at least one enabled [[hosts]]"
        )
    push_to, signing_key = _push_settings(data, path, text)
    return HostsConfig(
        path=path,
        local_builds=local_builds,
        hosts=hosts,
        push_to=push_to,
        signing_key=signing_key,
    )


def _push_settings(data: dict[str, Any], path: Path, text: str) -> tuple[str, str]:
    """push_to (a store URL) and signing_key (a file name), each checked."""
    from workbench.artefacts.push import ALLOWED, store_url_problem

    push_to = data.get("push_to", "")
    problem = (
        store_url_problem(push_to) if isinstance(push_to, str) else "not a string"
    ) if push_to != "" else None  # fmt: skip
    if problem:
        line = _line_of_top_key(text, "push_to")
        raise ConfigError(
            f"{path}:{line}: push_to = {_shown(push_to)}: refused ({problem}); allowed: {ALLOWED}"
        )
    key = data.get("signing_key", "")
    if not isinstance(key, str) or (key and not _KEY_FILE.match(key)):
        line = _line_of_top_key(text, "signing_key")
        raise ConfigError(
            f"{path}:{line}: signing_key = {_shown(key)}: refused; allowed: the path of a "
            "secret key file (nix-store --generate-binary-cache-key), no spaces"
        )
    return push_to, key


_KEY_FILE = re.compile(r"^[A-Za-z0-9._~/+-]+$")


def _line_of_top_key(text: str, key: str) -> int | str:
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if re.match(rf"^{re.escape(key)}\s*=", stripped):
            return number
    return "?"


def with_push_request(plan: Any, config_directory: Path) -> Any:
    """`plan` (a NewBuild) asking its supervisor to push its outputs where this directory's
    hosts.toml push_to says (`supervision.pushing`); unchanged when it names none. The ETA key
    stays the build's own."""
    from dataclasses import replace

    from workbench.supervision.pushing import REQUEST, request, store_support_problem

    hosts = load_hosts(config_directory)
    if not hosts.push_to:
        return plan
    unsupported = store_support_problem(hosts.push_to)
    if unsupported:  # refused before a build whose push could never start
        raise ConfigError(f"{push_to_where(hosts.push_to, hosts.path)}: {unsupported}; "
                          f"allowed here: {ALLOWED_HERE}")  # fmt: skip
    asked = request(hosts.push_to, hosts.signing_key or None)
    return replace(plan, settings={**plan.settings, REQUEST: asked})


# Where a push can go with a Nix that lacks S3 support.
ALLOWED_HERE = "file:///ABSOLUTE/PATH, ssh://[USER@]HOST or ssh-ng://[USER@]HOST (s3:// needs a "
ALLOWED_HERE += "Nix built with S3 support)"


def push_to_where(store: str, path: Path | None = None) -> str:
    """hosts.toml's push_to as a refusal names it: FILE:LINE: push_to = "VALUE"."""
    if path is None:
        return f"push_to = {_shown(store)}"
    text = read_text(path) if path.is_file() else ""
    return f"{path}:{_line_of_top_key(text, 'push_to')}: push_to = {_shown(store)}"
