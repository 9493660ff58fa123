"""Nix's own plan for a build, before it starts: what it will build and what it will fetch.

`nix build --dry-run` prints (to stderr, Nix 2.8 to 2.2x; src/libmain/shared.cc
`printMissing`) "these N derivations will be built:" / "this derivation will be built:" and
"these M paths will be fetched (X MiB download, Y MiB unpacked):" / "this path will be
fetched (...)", each followed by one store path a line. Which substituter has each path is asked
of each configured substituter in turn (`nix path-info --json --store URL`: `valid: false` where
it has none; a binary cache's narinfo gives `downloadSize` and `narSize` in bytes), in the order
Nix tries them. The time each derivation took last time comes from the caller (the history),
by derivation name: a new nonce or patch changes the hash, not the name.

Textual-free, with a typed result, so the CLI's `build --dry-run`, the TUI's preview and the
matrix build read one plan.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.flake.evaluation import NIX_FLAGS, first_error
from workbench.host.bounded_command import run_bounded
from workbench.host.units import scaled_byte_size
from workbench.progress.nix_log import derivation_name
from workbench.progress.visible import visible

PLAN_TIMEOUT_S = 180.0
PATH_INFO_TIMEOUT_S = 60.0
_BUILT = re.compile(r"^(?:these (\d+) derivations|this derivation) will be built:$")
_FETCHED = re.compile(
    r"^(?:these (\d+) paths|this path) will be fetched "
    r"\(([\d.]+) MiB download, ([\d.]+) MiB unpacked\):$"
)
_STORE_PATH = re.compile(r"^/nix/store/[0-9a-z]{32}-[^\s/]+$")


@dataclass(frozen=True)
class ToBuild:
    """A derivation Nix will build, and how long it took the last time it was built here."""

    drv: str
    last_seconds: float | None  # None: never built in this history
    last_build: int | None  # the build id it was last built in

    @property
    def name(self) -> str:
        return derivation_name(self.drv)


@dataclass(frozen=True)
class ToFetch:
    """A path Nix will fetch, with its size and the substituter that has it (None: unknown)."""

    path: str
    substituter: str | None
    download_bytes: int | None
    nar_bytes: int | None

    @property
    def name(self) -> str:
        return derivation_name(self.path)


@dataclass(frozen=True)
class NixPlan:
    """`nix build --dry-run` of some installables, with sizes, substituters and last times."""

    installables: tuple[str, ...]
    ok: bool
    error: str  # Nix's first error line when not ok
    to_build: tuple[ToBuild, ...]
    to_fetch: tuple[ToFetch, ...]
    download_mib: float | None  # Nix's own total (rounded to 0.01 MiB by Nix)
    unpacked_mib: float | None
    substituters: tuple[str, ...]

    @property
    def known_seconds(self) -> float:
        """The sum of the last times of the derivations that have one."""
        return sum(item.last_seconds or 0.0 for item in self.to_build)

    @property
    def never_built(self) -> int:
        return sum(1 for item in self.to_build if item.last_seconds is None)

    def download_bytes(self) -> int | None:
        """The download in bytes from the substituters' narinfo (None where one is unknown)."""
        sizes = [item.download_bytes for item in self.to_fetch]
        return None if any(size is None for size in sizes) else sum(s or 0 for s in sizes)

    def summary(self) -> str:
        """One line: N to build (last time T), M to fetch (X MiB)."""
        if not self.ok:
            return f"Nix's plan: not known ({self.error})"
        built = f"{len(self.to_build)} to build"
        if self.to_build:
            timed = len(self.to_build) - self.never_built
            if timed:
                built += f" (last time {_duration(self.known_seconds)} for {timed} of them"
                built += f"; {self.never_built} never built here)" if self.never_built else ")"
            else:
                built += " (none built here before: no time known)"
        fetched = f"{len(self.to_fetch)} to fetch"
        if self.to_fetch and self.download_mib is not None:
            fetched += f" ({self.download_mib:.2f} MiB download, {self.unpacked_mib:.2f} MiB "
            fetched += "unpacked)"
        return f"Nix's plan: {built}, {fetched}"

    def lines(self, limit: int = 12) -> list[str]:
        """The summary, then each derivation and path (at most `limit` of each)."""
        lines = [self.summary()]
        if not self.ok:
            return lines
        for item in self.to_build[:limit]:
            last = (
                f"last {_duration(item.last_seconds)} (build #{item.last_build})"
                if item.last_seconds is not None
                else "never built here"
            )
            lines.append(f"  build {item.name}: {last}")
        if len(self.to_build) > limit:
            lines.append(f"  ... and {len(self.to_build) - limit} more to build")
        for path in self.to_fetch[:limit]:
            size = (
                scaled_byte_size(path.download_bytes)
                if path.download_bytes is not None
                else "size not known"
            )
            source = path.substituter or "no configured substituter answered for it"
            lines.append(f"  fetch {path.name}: {size} from {source}")
        if len(self.to_fetch) > limit:
            lines.append(f"  ... and {len(self.to_fetch) - limit} more to fetch")
        return [visible(line) for line in lines]

    def to_json(self) -> dict[str, Any]:
        return {
            "installables": list(self.installables),
            "ok": self.ok,
            "error": self.error or None,
            "to_build": [
                {
                    "drv": b.drv,
                    "name": b.name,
                    "last_seconds": b.last_seconds,
                    "last_build": b.last_build,
                }
                for b in self.to_build
            ],
            "to_fetch": [
                {
                    "path": f.path,
                    "name": f.name,
                    "substituter": f.substituter,
                    "download_bytes": f.download_bytes,
                    "nar_bytes": f.nar_bytes,
                }
                for f in self.to_fetch
            ],
            "download_mib": self.download_mib,
            "unpacked_mib": self.unpacked_mib,
            "download_bytes": self.download_bytes(),
            "known_seconds": self.known_seconds,
            "never_built": self.never_built,
            "substituters": list(self.substituters),
            "summary": self.summary(),
        }


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.1f}s"
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


@dataclass(frozen=True)
class DryRun:
    """What `nix build --dry-run` printed, parsed."""

    to_build: tuple[str, ...]
    to_fetch: tuple[str, ...]
    download_mib: float | None
    unpacked_mib: float | None


def parse_dry_run(stderr: str) -> DryRun:
    """The derivations and paths of a `nix build --dry-run`'s stderr (other lines ignored)."""
    built: list[str] = []
    fetched: list[str] = []
    download = unpacked = None
    section: list[str] | None = None
    for raw in stderr.splitlines():
        line = raw.strip()
        if _BUILT.match(line):
            section = built
            continue
        sizes = _FETCHED.match(line)
        if sizes:
            section = fetched
            download, unpacked = float(sizes.group(2)), float(sizes.group(3))
            continue
        if section is not None and raw.startswith("  ") and _STORE_PATH.match(line):
            section.append(line)
        else:
            section = None
    return DryRun(tuple(built), tuple(fetched), download, unpacked)


def configured_substituters(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The substituters this user's Nix is configured with (`nix show-config --json`)."""
    try:
        done = run_bounded(
            ["nix", *NIX_FLAGS, "show-config", "--json"], PATH_INFO_TIMEOUT_S, env=env
        )
        value = json.loads(done.stdout)["substituters"]["value"] if done.returncode == 0 else []
    except (FileNotFoundError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return ()
    return tuple(str(item) for item in value)


def _who_has(
    paths: Sequence[str], substituters: Sequence[str], env: Mapping[str, str] | None
) -> dict[str, tuple[str, int | None, int | None]]:
    """path -> (substituter, download bytes, NAR bytes), the first substituter that has it."""
    found: dict[str, tuple[str, int | None, int | None]] = {}
    for url in substituters:
        wanted = [path for path in paths if path not in found]
        if not wanted:
            break
        argv = ["nix", *NIX_FLAGS, "path-info", "--json", "--store", url, *wanted]
        try:
            done = run_bounded(argv, PATH_INFO_TIMEOUT_S, env=env)
            infos = json.loads(done.stdout) if done.stdout.strip() else []
        except (FileNotFoundError, subprocess.TimeoutExpired, ValueError):
            continue
        for info in infos if isinstance(infos, list) else []:
            if isinstance(info, dict) and info.get("valid", True) and "path" in info:
                download = info.get("downloadSize")
                nar = info.get("narSize")
                found[str(info["path"])] = (
                    url,
                    int(download) if isinstance(download, int) else None,
                    int(nar) if isinstance(nar, int) else None,
                )
    return found


def plan_from_nix(
    flake: Path,
    installables: Sequence[str],
    last_times: Callable[[list[str]], Mapping[str, tuple[float, int]]] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = PLAN_TIMEOUT_S,
) -> NixPlan:
    """Ask Nix what building `installables` (e.g. `.#onnxruntime-cpu`) in `flake` will build
    and fetch; `last_times(names)`: derivation name -> (seconds, build id) of the last build
    here of each (History.last_derivation_times)."""
    environment = dict(os.environ if env is None else env)
    argv = ["nix", *NIX_FLAGS, "build", "--dry-run", "--no-link", "--no-write-lock-file"]
    argv += list(installables)

    def failed(error: str) -> NixPlan:
        return NixPlan(tuple(installables), False, error, (), (), None, None, ())

    try:
        done = run_bounded(argv, timeout, env=environment, cwd=flake)
    except FileNotFoundError:
        return failed("nix is not installed")
    except subprocess.TimeoutExpired:
        return failed(f"nix build --dry-run took over {timeout:.0f} s")
    if done.returncode != 0:
        return failed(first_error(done.stderr))
    parsed = parse_dry_run(done.stderr)
    names = [derivation_name(drv) for drv in parsed.to_build]
    times = last_times(names) if last_times and names else {}
    to_build = tuple(
        ToBuild(drv, *times.get(derivation_name(drv), (None, None))) for drv in parsed.to_build
    )
    substituters = configured_substituters(environment) if parsed.to_fetch else ()
    who = _who_has(parsed.to_fetch, substituters, environment) if parsed.to_fetch else {}
    to_fetch = tuple(ToFetch(path, *who.get(path, (None, None, None))) for path in parsed.to_fetch)
    return NixPlan(
        tuple(installables), True, "", to_build, to_fetch,
        parsed.download_mib, parsed.unpacked_mib, substituters,
    )  # fmt: skip
