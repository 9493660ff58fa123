"""One matrix build as the screens show it: what each host builds now, and targets x state.

A running build is read from its log as it grows (`LogFleet`: only the bytes appended since
the last read, Nix's internal-json fed to a `Fleet`); an ended one from its per-target history
rows (`target_history`), worked out once from the log if nobody stored them yet. Sizes of the
targets done are asked of Nix once per output (`nix path-info -S`), never on every refresh.

Everything here is plain data: no Textual, no markup. Names, hosts and error lines come from the
build's log and stay untrusted: the TUI puts them in `Text`, the CLI through `progress.visible`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.history.records import BuildRecord
from workbench.history.store import History, database_path
from workbench.progress.nix_log import derivation_name
from workbench.remote.fleet import LOCAL, Fleet, target_states
from workbench.remote.target_history import (
    TargetRow,
    matrix_of,
    record_rows,
    stored_rows,
    work_out_rows,
)

if TYPE_CHECKING:
    from workbench.remote.remote_sampler import FleetSampling

# Bytes of log read per refresh at most: a screen or `attach` opened on a long build catches up
# over a few refreshes instead of freezing on a 2 GB backlog.
READ_CHUNK = 8 << 20
# How the per-target rows of the history name an outcome, and how the live matrix does.
_STORED_STATE = {"built": "done", "in store": "in store", "failed": "failed"}


@dataclass(frozen=True)
class HostNow:
    """One build host: the derivations it builds now, or why it is gone."""

    name: str
    building: tuple[str, ...]  # derivation names ("avx2", not the store path)
    gone: str = ""


@dataclass(frozen=True)
class MatrixRow:
    """One target: its state, where, how long, how big, and its first error line."""

    name: str
    state: str  # done, in store, building, failed, waiting, not built
    host: str
    tried_on: tuple[str, ...]
    seconds: float | None
    nar_size: int | None
    closure_size: int | None
    first_error: str
    # The ONNX Runtime release the target is ("1.24.2"), as the matrix build recorded it;
    # "" for a build recorded before releases were (nothing is known of it).
    ort_version: str = ""


@dataclass(frozen=True)
class MatrixView:
    """A matrix build at one moment."""

    build_id: int
    build_name: str
    build_state: str
    active: bool
    hosts: tuple[HostNow, ...]
    rows: tuple[MatrixRow, ...]

    def counts(self) -> dict[str, int]:
        """state -> how many targets are in it, in the order a reader wants them."""
        found: dict[str, int] = {}
        for state in ("done", "in store", "building", "failed", "waiting", "not built"):
            number = sum(1 for row in self.rows if row.state == state)
            if number:
                found[state] = number
        return found


@dataclass
class LogFleet:
    """A `Fleet` fed from a build's log file as it grows."""

    log_path: Path
    fleet: Fleet
    offset: int = 0
    _pending: bytes = b""

    def catch_up(self, limit: int = READ_CHUNK) -> bool:
        """Feed the complete lines appended since the last call; whether there were any."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(limit)
        except FileNotFoundError:
            return False
        if not chunk:
            return False
        self.offset += len(chunk)
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            self.fleet.feed(line.decode("utf-8", "replace"))
        return bool(lines)

    def caught_up(self) -> bool:
        """Whether every byte of the log written so far has been read."""
        try:
            return self.log_path.stat().st_size <= self.offset
        except FileNotFoundError:
            return True


def host_list(matrix: dict[str, Any]) -> list[str]:
    """The hosts of a matrix build in the order the view lists them: this machine first.

    A nix-daemon's own builders (a daemon that does not trust the user builds with them) are
    not listed up front: they are shared, and become this build's hosts in the view only once
    the build's own log says they build one of its derivations (`hosts_seen`)."""
    local = [LOCAL] if matrix.get("local_builds", True) else []
    if matrix.get("builders_from") == "daemon":
        return local
    return local + list(matrix.get("hosts", {}).values())


def hosts_seen(fleet: Fleet, hosts: list[str]) -> list[str]:
    """`hosts`, then every host the build's log says built (or could not build) one of this
    build's derivations: a host hosts.toml did not name, a daemon's builder."""
    named = list(hosts)
    named += [a.host for a in fleet.attempts if a.host not in named]
    named += [host for host in fleet.gone if host not in named]
    return list(dict.fromkeys(named))


def hosts_now(fleet: Fleet, hosts: list[str]) -> tuple[HostNow, ...]:
    """What each host builds now; a host Nix named that the list did not is listed too, from
    the first of this build's derivations it builds on (`hosts_seen`)."""
    building = fleet.building_now()
    named = hosts_seen(fleet, hosts)
    return tuple(
        HostNow(
            name=host,
            building=tuple(derivation_name(a.drv) for a in building.get(host, [])),
            gone=fleet.gone.get(host, ""),
        )
        for host in named
    )


def host_lines(hosts: tuple[HostNow, ...], sampled: Mapping[str, str] | None = None) -> list[str]:
    """The per-host view as plain lines ("remote         2 building: avx2, avx512"), each
    followed by what the host's own sampler says it compiles (`remote_sampler`), if sampled."""
    lines = []
    sampled = sampled or {}
    for host in hosts:
        if host.gone:
            line = f"{host.name:<14} GONE: {host.gone}"
        elif host.building:
            line = f"{host.name:<14} {len(host.building)} building: {', '.join(host.building)}"
        else:
            line = f"{host.name:<14} idle"
        said = sampled.get(host.name)
        lines.append(f"{line}; {said}" if said else line)
    return lines


def log_fleet(record: BuildRecord) -> LogFleet:
    """A reader of a matrix build's log (its hosts as recorded at launch).

    No clock: the log may be read long after it was written (a screen opened mid-build), so
    when a line was read says nothing of when it happened. Times come from the supervisor's
    records instead."""
    matrix = matrix_of(record) or {}
    fleet = Fleet(host_names=dict(matrix.get("hosts", {})), clock=lambda: None)
    return LogFleet(Path(record.log_path), fleet)


def latest_matrix_build(history: History, limit: int = 50) -> BuildRecord | None:
    """The matrix build running now, else the latest one; None if there is none."""
    from workbench.supervision import liveness

    records = [r for r in history.builds(limit=limit) if matrix_of(r) is not None]
    running = [r for r in liveness.check(history, [r for r in records if r.active]) if r.active]
    if running:
        return running[0]
    return records[0] if records else None


def _running_since(record: BuildRecord) -> dict[str, float]:
    """derivation name -> when it started, as the supervisor last wrote it."""
    return {
        derivation.name: derivation.started
        for derivation in record.progress_view.derivations
        if derivation.started is not None
    }


def _stored_row(row: TargetRow) -> MatrixRow:
    seconds = row.ended - row.started if row.started is not None and row.ended else None
    return MatrixRow(
        name=row.name,
        state=_STORED_STATE.get(row.outcome, row.outcome),
        host=row.host,
        tried_on=tuple(host for host in row.tried_on.split(",") if host),
        seconds=seconds,
        nar_size=row.nar_size,
        closure_size=row.closure_size,
        first_error=row.first_error,
    )


def nix_path_sizes(paths: list[str]) -> dict[str, tuple[int | None, int | None]]:
    """Store path -> (NAR size, closure size), from Nix (`artefacts.sizes.path_sizes`)."""
    from workbench.artefacts.sizes import path_sizes

    return path_sizes(paths)


@dataclass
class MatrixWatch:
    """One matrix build followed: its log read as it grows, the sizes of what is done."""

    state_directory: Path
    build_id: int | None = None  # None: the one running, else the latest
    _reader: LogFleet | None = None
    _sized: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)

    def view(self, now: float | None = None) -> MatrixView | None:
        """The build now; None when the history holds no matrix build."""
        from workbench.supervision import liveness

        if not database_path(self.state_directory).exists():
            return None
        with History(self.state_directory) as history:
            if self.build_id is None:
                record = latest_matrix_build(history)
                if record is None:
                    return None
            else:
                record = history.get(self.build_id)
            if record.active:
                record = liveness.check(history, [record])[0]
            matrix = matrix_of(record)
            if matrix is None and self.build_id is not None and self._reader is None:
                # Asked for a build that is not a matrix build (the one highlighted in the
                # history): the matrix build running, else the latest, as with none named.
                record = latest_matrix_build(history)
                matrix = matrix_of(record) if record is not None else None
            if record is None or matrix is None:
                return None
            self.build_id = record.id
            if self._reader is None:
                self._reader = log_fleet(record)
            self._reader.catch_up()
            if record.active or not self._reader.caught_up():
                rows = self._live_rows(record, matrix, now if now is not None else time.time())
            else:
                rows = self._ended_rows(history, record)
            releases = {
                str(target.get("name")): str(target.get("ort_version") or "")
                for target in matrix.get("targets", [])
            }
            rows = [
                dataclasses.replace(row, ort_version=releases.get(row.name, "")) for row in rows
            ]
        return MatrixView(
            build_id=record.id,
            build_name=record.name,
            build_state=record.state,
            active=record.active,
            hosts=hosts_now(self._reader.fleet, host_list(matrix)),
            rows=tuple(rows),
        )

    @property
    def fleet(self) -> Fleet | None:
        """The build's fleet as read so far (None before the first `view`)."""
        return self._reader.fleet if self._reader is not None else None

    def start_sampling(self, config_directory: Path) -> FleetSampling | str:
        """Start a sampler on each remote host of the build `view` last read (see
        `remote_sampler`); a line saying why not when hosts.toml cannot be read."""
        from workbench.remote.remote_sampler import FleetSampling

        if self.build_id is None:
            return FleetSampling({})
        with History(self.state_directory) as history:
            record = history.get(self.build_id)
        return FleetSampling.for_matrix(
            matrix_of(record) or {}, config_directory, self.state_directory
        )

    def _live_rows(
        self, record: BuildRecord, matrix: dict[str, Any], now: float
    ) -> list[MatrixRow]:
        assert self._reader is not None
        targets = matrix.get("targets", [])
        states = target_states(self._reader.fleet, targets)
        outs = {t["name"]: t.get("out", "") for t in targets}
        unsized = [
            outs[s.name]
            for s in states
            if s.state in ("done", "in store") and outs[s.name] and outs[s.name] not in self._sized
        ]
        if unsized:
            found = nix_path_sizes(unsized)
            for path in unsized:  # asked once: a path Nix does not know stays unsized
                self._sized[path] = found.get(path, (None, None))
        since = _running_since(record)
        drvs = {t["name"]: t.get("drv", "") for t in targets}
        rows = []
        for state in states:
            seconds = None
            if state.state == "building":
                started = since.get(derivation_name(drvs[state.name]))
                seconds = max(0.0, now - started) if started is not None else None
            nar, closure = self._sized.get(outs[state.name], (None, None))
            rows.append(
                MatrixRow(
                    name=state.name,
                    state=state.state,
                    host=state.host,
                    tried_on=state.retried_from,
                    seconds=seconds,
                    nar_size=nar,
                    closure_size=closure,
                    first_error=state.first_error,
                )
            )
        return rows

    def _ended_rows(self, history: History, record: BuildRecord) -> list[MatrixRow]:
        stored = stored_rows(self.state_directory, record.id)
        if not stored:
            # Nobody followed it to its end (the TUI was closed, `-d`): worked out and kept now.
            stored = work_out_rows(history, record)
            record_rows(self.state_directory, record.id, stored)
        return [_stored_row(row) for row in stored]


def view_lines(view: MatrixView) -> list[str]:
    """Hosts, then targets x state, as plain lines (untrusted text still to be made visible)."""
    lines = host_lines(view.hosts)
    lines.append("")
    for row in view.rows:
        where = f" on {row.host}" if row.host else ""
        retried = f" (after {', '.join(row.tried_on)})" if row.tried_on else ""
        error = f": {row.first_error}" if row.state == "failed" and row.first_error else ""
        release = f" (ONNX Runtime {row.ort_version})" if row.ort_version else ""
        lines.append(f"  {row.state:<9} {row.name}{release}{where}{retried}{error}")
    return lines


# `attach` says the per-host view again when what the hosts compile changes, and at most this
# often when only their CPU and memory figures do.
RESAY_SAMPLES_S = 15.0


class PerHostLines:
    """`attach` of a matrix build: the per-host view as plain terminal lines, each time it
    changes (control characters from the log made visible: these lines go to a terminal),
    with what each remote host compiles once `sample_hosts` started its sampler."""

    def __init__(self, record: BuildRecord) -> None:
        self.record = record
        self.reader = log_fleet(record)
        self.hosts = host_list(matrix_of(record) or {})
        self.shown: list[str] = []
        self.sampling: FleetSampling | None = None
        self.sampling_problem = ""
        self._shown_shape: list[str] = []
        self._shown_at = 0.0

    @classmethod
    def for_build(cls, record: BuildRecord) -> PerHostLines | None:
        """The view for a matrix build; None for any other build."""
        return cls(record) if matrix_of(record) is not None else None

    def sample_hosts(self, config: str | None, state_directory: Path) -> None:
        """Start each remote host's sampler (in the background; see `remote_sampler`), the
        hosts reached as `config` (`--config`, else the default) says now."""
        from workbench.configs.paths import config_dir
        from workbench.errors import WorkbenchError
        from workbench.remote.remote_sampler import FleetSampling

        try:
            config_directory = config_dir(config)
        except WorkbenchError as error:
            self.sampling_problem = f"hosts not sampled: {error}"
            return
        found = FleetSampling.for_matrix(
            matrix_of(self.record) or {}, config_directory, state_directory
        )
        if isinstance(found, str):
            self.sampling_problem = found
        else:
            self.sampling = found

    def close(self) -> None:
        """Stop the hosts' samplers."""
        if self.sampling is not None:
            self.sampling.stop()

    def changed(self, now: float | None = None) -> list[str]:
        """The view when it differs from the last one shown, else []; nothing while the log's
        backlog is still being read (what it would say is not true any more). A change of the
        sampled figures alone is said at most every RESAY_SAMPLES_S seconds."""
        from workbench.progress.visible import visible

        self.reader.catch_up()
        sampling = self.sampling
        if sampling is not None:
            sampling.learn(self.reader.fleet)  # what Nix started on each host: dependencies too
        if not self.reader.caught_up():
            return []
        now = time.monotonic() if now is None else now
        hosts = hosts_now(self.reader.fleet, self.hosts)
        sampled = sampling.lines() if sampling else None
        lines = [visible(line) for line in host_lines(hosts, sampled)]
        shape = host_lines(hosts, sampling.shape() if sampling else None)
        if lines == self.shown:
            return []
        if shape == self._shown_shape and now - self._shown_at < RESAY_SAMPLES_S:
            return []
        first = not self.shown
        self.shown, self._shown_shape, self._shown_at = lines, shape, now
        problem = [f"  {visible(self.sampling_problem)}"] if first and self.sampling_problem else []
        return ["per host:", *(f"  {line}" for line in lines), *problem]
