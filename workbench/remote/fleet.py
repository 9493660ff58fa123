"""Which host builds what, from Nix's internal-json log: the per-host view and the matrix.

Nix names the host of every build in activity 105 (Build) `[drvPath, host, round, nrRounds]`:
"" on this machine, the builder's store URI on a remote one. A remote nix-daemon forwards its
own log over the connection, so the same derivation then starts again with host "" under a
new activity id: that nested start is the remote's report of the same build, not a second
build here, and its log lines belong to the remote attempt.

Faults, as Nix 2.8 reports them: a host that drops mid-build ends its builds with
`unexpected end-of-file` (naming no host) and, often only when the whole build ends, `builder
for 'X.drv' failed`; a host that cannot be reached says `cannot build on 'URI': ...` and Nix
builds that derivation elsewhere (another host or here: a retry, visible as a second attempt
on another host). A lost connection is blamed on the host the message names; naming none, on
the one remote host building then, else (several) on the host of the next builder that fails.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.progress.nix_log import (
    ACT_BUILD,
    LVL_ERROR,
    RES_BUILD_LOG_LINE,
    NixMessage,
    NixResult,
    NixStart,
    NixStop,
    derivation_name,
    parse_nix_line,
    strip_ansi,
)

LOCAL = "local"
_FAILED_BUILDER = re.compile(r"builder for '(/[^']+\.drv)' failed(.*)")
_CANNOT_BUILD_ON = re.compile(r"cannot build on '([^']+)': (.*)")
_LOST_CONNECTION = ("unexpected end-of-file", "connection reset", "broken pipe")
_ERRORISH = re.compile(r"\berror\b|\bfailed\b|\bfatal\b", re.IGNORECASE)


@dataclass
class Attempt:
    """One try of one derivation on one host."""

    drv: str
    host: str
    started: float | None
    ended: float | None = None
    outcome: str = "building"  # building, built, failed
    first_error: str = ""
    log_lines: int = 0
    last_line: str = ""
    after: tuple[str, ...] = ()  # hosts Nix could not build it on just before (tried first)


@dataclass
class Fleet:
    """The state of a matrix build, fed the build's log line by line (live or afterwards)."""

    host_names: dict[str, str]  # store URI (as Nix prints it) -> host name
    clock: Callable[[], float | None] = time.time
    attempts: list[Attempt] = field(default_factory=list)
    gone: dict[str, str] = field(default_factory=dict)  # host name -> why
    _by_activity: dict[int, Attempt] = field(default_factory=dict)
    _failed: dict[str, str] = field(default_factory=dict)  # drv -> the failure message
    # A lost connection naming no host while several hosts built: its text, and the remote
    # attempts running then (the one whose builder fails next was on the host that dropped).
    _lost_unplaced: str = ""
    _lost_suspects: list[Attempt] = field(default_factory=list)
    # Hosts Nix said it "cannot build on" since the last start: its build hook then picks
    # another machine (or this one) for the same derivation, which starts next.
    _refused_by: list[str] = field(default_factory=list)

    def host_of(self, uri: str) -> str:
        """The host name for a store URI in Nix's log ("" is this machine)."""
        if not uri:
            return LOCAL
        if uri in self.host_names:
            return self.host_names[uri]
        for known, name in self.host_names.items():
            # Nix prints the URI with or without its ?query depending on the message.
            if uri.split("?")[0] == known.split("?")[0]:
                return name
        return uri

    def feed(self, line: str) -> None:
        """One line of the build's log (anything not `@nix` is ignored)."""
        event = parse_nix_line(line)
        if isinstance(event, NixStart) and event.type == ACT_BUILD and event.fields:
            self._started(event)
        elif isinstance(event, NixStop):
            attempt = self._by_activity.pop(event.id, None)
            if attempt is not None and attempt.outcome == "building" and attempt.ended is None:
                self._end(attempt, "built")
        elif isinstance(event, NixResult) and event.type == RES_BUILD_LOG_LINE:
            attempt = self._by_activity.get(event.id)
            if attempt is not None and event.fields and isinstance(event.fields[0], str):
                text = strip_ansi(event.fields[0]).strip()
                attempt.log_lines += 1
                if text:
                    attempt.last_line = text
                if text and not attempt.first_error and _ERRORISH.search(text):
                    attempt.first_error = text
        elif isinstance(event, NixMessage) and event.level <= LVL_ERROR + 1:
            self._message(event.text)

    def _started(self, event: NixStart) -> None:
        drv = str(event.fields[0])
        host = self.host_of(str(event.fields[1]) if len(event.fields) > 1 else "")
        if host == LOCAL:
            remote = next(
                (a for a in self.attempts if a.drv == drv and a.host != LOCAL and a.ended is None),
                None,
            )
            if remote is not None:  # the remote daemon's own report of the same build
                self._by_activity[event.id] = remote
                return
        after = tuple(h for h in dict.fromkeys(self._refused_by) if h != host)
        self._refused_by = []
        attempt = Attempt(drv=drv, host=host, started=self.clock(), after=after)
        self.attempts.append(attempt)
        self._by_activity[event.id] = attempt

    def _message(self, text: str) -> None:
        text = strip_ansi(text)
        first = text.splitlines()[0] if text else ""
        cannot = _CANNOT_BUILD_ON.search(first)
        if cannot:
            host = self.host_of(cannot.group(1))
            reason = cannot.group(2).replace("error: ", "").strip()
            # A host that dropped mid-build keeps that first reason.
            self.gone.setdefault(host, f"cannot build there: {reason}")
            self._refused_by.append(host)
            return
        lowered = first.lower()
        if any(mark in lowered for mark in _LOST_CONNECTION):
            running = [a for a in self.attempts if a.ended is None and a.host != LOCAL]
            named = self._hosts_named(first) or {a.host for a in running}
            if len(named) > 1 and not self._hosts_named(first):
                # Which one dropped is said by the builder that fails next.
                self._lost_unplaced, self._lost_suspects = first.strip(), running
                return
            for host in named:
                self._lost(host, first.strip(), [a for a in running if a.host == host])
            return
        failed = _FAILED_BUILDER.search(first)
        if failed:
            drv = failed.group(1)
            self._failed[drv] = first.removeprefix("error: ").strip()
            for attempt in reversed(self.attempts):
                if attempt.drv == drv:
                    if any(attempt is suspect for suspect in self._lost_suspects):
                        on_host = [a for a in self._lost_suspects if a.host == attempt.host]
                        self._lost(attempt.host, self._lost_unplaced, on_host)
                        self._lost_unplaced, self._lost_suspects = "", []
                    self._end(attempt, "failed")
                    if not attempt.first_error:
                        attempt.first_error = attempt.last_line or self._failed[drv]
                    break

    def _hosts_named(self, text: str) -> set[str]:
        """The known hosts whose store URI (without its ?query) the text names."""
        return {
            name
            for uri, name in self.host_names.items()
            if uri.split("?")[0] and uri.split("?")[0] in text
        }

    def _lost(self, host: str, message: str, attempts: list[Attempt]) -> None:
        """The connection to `host` was lost: it is gone, the builds it ran then say so."""
        self.gone.setdefault(host, f"connection lost ({message})")
        for attempt in attempts:
            attempt.first_error = attempt.first_error or "connection to the host lost"

    def _end(self, attempt: Attempt, outcome: str) -> None:
        attempt.outcome = outcome
        attempt.ended = attempt.ended if attempt.ended is not None else self.clock()

    # -- views ---------------------------------------------------------------------------

    def building_now(self) -> dict[str, list[Attempt]]:
        """host name -> its derivations building now."""
        found: dict[str, list[Attempt]] = {}
        for attempt in self.attempts:
            if attempt.outcome == "building":
                found.setdefault(attempt.host, []).append(attempt)
        return found

    def latest(self, drv: str) -> Attempt | None:
        """The last attempt of a derivation, if it started."""
        return next((a for a in reversed(self.attempts) if a.drv == drv), None)

    def tries(self, drv: str) -> list[Attempt]:
        return [a for a in self.attempts if a.drv == drv]


@dataclass(frozen=True)
class TargetState:
    """One row of the matrix view."""

    name: str
    state: str  # done, in store, building, failed, waiting
    host: str  # where it builds or was built ("" when waiting)
    first_error: str
    retried_from: tuple[str, ...]  # hosts tried before, when Nix built it elsewhere
    started: float | None
    ended: float | None


def target_states(fleet: Fleet, targets: list[dict[str, Any]]) -> list[TargetState]:
    """Every target × state, from the fleet and the targets recorded at launch."""
    rows = []
    for target in targets:
        if target.get("in_store"):
            rows.append(TargetState(target["name"], "in store", "", "", (), None, None))
            continue
        tries = fleet.tries(target.get("drv", ""))
        if not tries:
            rows.append(TargetState(target["name"], "waiting", "", "", (), None, None))
            continue
        last = tries[-1]
        state = {"building": "building", "built": "done", "failed": "failed"}[last.outcome]
        # Every host tried before the last: earlier attempts, and hosts Nix could not reach.
        earlier = tuple(
            dict.fromkeys(
                [host for a in tries[:-1] for host in (*a.after, a.host)] + list(last.after)
            )
        )
        rows.append(
            TargetState(
                target["name"],
                state,
                last.host,
                last.first_error,
                earlier,
                last.started,
                last.ended,
            )
        )
    return rows


def fleet_lines(fleet: Fleet, hosts: list[str], targets: list[dict[str, Any]]) -> list[str]:
    """The per-host view and the matrix as plain text lines (for `attach` and the CLI)."""
    lines = []
    now = fleet.building_now()
    for host in hosts:
        building = now.get(host, [])
        if host in fleet.gone:
            state = f"GONE: {fleet.gone[host]}"
        else:
            state = f"{len(building)} building" if building else "idle"
        names = ", ".join(derivation_name(a.drv) for a in building)
        lines.append(
            f"{host:<14} {state}{': ' + names if names and host not in fleet.gone else ''}"
        )
    lines.append("")
    for row in target_states(fleet, targets):
        where = f" on {row.host}" if row.host else ""
        retried = f" (after {', '.join(row.retried_from)})" if row.retried_from else ""
        error = f": {row.first_error}" if row.state == "failed" and row.first_error else ""
        lines.append(f"  {row.state:<9} {row.name}{where}{retried}{error}")
    return lines
