"""The typed records between a build's supervisor and everything that shows the build.

The supervisor writes two records to the build's history row about once a second:
`ProgressView` (what the log says: ninja's counts, Nix's derivations, the fraction done) and
`LiveView` (what was measured: CPU, memory, the build's own peaks, the edges running now, the
ETA with its range and basis, the other builds on the host). The TUI's build screen, `attach`,
`status` (and its `--json`), `report` and the matrix view read them back through
`ProgressView.from_json` and `LiveView.from_json` and never by string keys, so every reader
shows the same figure for the same thing.

`from_json` never raises: a row written by an older workbench, or a field of the wrong type,
reads as "not known" (None, 0 or empty), which the readers say in words.

The JSON keeps the names `status --json` has always printed (`eta_s`, `cpu_cores`, `jobs`, ...);
new fields are added keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# -- tolerant readers of stored JSON -------------------------------------------------------------


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return int(value)


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _float(value: object, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)


def _opt_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()


def _strings(value: object) -> tuple[str, ...]:
    return tuple(item for item in _items(value) if isinstance(item, str))


# -- progress (from the log) -------------------------------------------------------------------


@dataclass(frozen=True)
class StepView:
    """ninja's `[done/total] description` or make's `[ NN%]`, as last printed."""

    tool: str
    done: int
    total: int
    description: str

    @property
    def fraction(self) -> float:
        """Done as a share 0.0–1.0 (0.0 while the total is not known)."""
        return self.done / self.total if self.total > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "done": self.done,
            "total": self.total,
            "description": self.description,
        }

    @classmethod
    def from_json(cls, data: object) -> StepView | None:
        """The step stored, or None when there is none."""
        if not isinstance(data, Mapping):
            return None
        return cls(
            _str(data.get("tool"), "?"),
            _int(data.get("done")),
            _int(data.get("total")),
            _str(data.get("description")),
        )

    @classmethod
    def of(cls, step: Any) -> StepView | None:
        """From the tracker's `progress.Step` (or anything with its four fields)."""
        if step is None:
            return None
        return cls(step.tool, step.done, step.total, step.description)


@dataclass(frozen=True)
class DerivationView:
    """A Nix derivation being built now."""

    name: str
    phase: str | None
    step: StepView | None
    started: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "phase": self.phase,
            "step": None if self.step is None else self.step.to_json(),
            "started": self.started,
        }

    @classmethod
    def from_json(cls, data: object) -> DerivationView:
        data = _mapping(data)
        return cls(
            _str(data.get("name"), "?"),
            _opt_str(data.get("phase")),
            StepView.from_json(data.get("step")),
            _opt_float(data.get("started")),
        )


@dataclass(frozen=True)
class ProgressView:
    """What the build's log says so far (the history's `progress` column)."""

    planned: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    nix: bool = False
    lines: int = 0
    last_line: str = ""
    step: StepView | None = None
    derivations: tuple[DerivationView, ...] = ()
    failed_derivations: tuple[str, ...] = ()
    step_failures: tuple[str, ...] = ()
    first_error: str | None = None
    fraction: float | None = None
    """The share of the build done, 0.0–1.0, when the log says; None when it does not."""
    output_lost: Mapping[str, Any] | None = None
    """What the log pump could not write (`pipeline.OutputLoss.to_json()`), when anything."""

    @property
    def reported(self) -> bool:
        """Whether the log has said anything about progress."""
        return self.step is not None or (self.nix and self.planned > 0)

    @property
    def nothing_to_do(self) -> bool:
        """ninja said it had nothing to do: its plan was empty ("ninja: no work to do")."""
        return self.step is None and self.last_line.endswith("no work to do.")

    def key(self) -> tuple[Any, ...]:
        """What must change for a build to count as moving: its fraction and its counts."""
        step = self.step
        return (
            None if self.fraction is None else round(self.fraction, 6),
            None if step is None else step.done,
            None if step is None else step.total,
            self.done,
            self.failed,
        )

    @classmethod
    def of(
        cls, progress: Any, fraction: float | None, output_lost: Mapping[str, Any] | None = None
    ) -> ProgressView:
        """From the tracker's `progress.Progress` snapshot."""
        return cls(
            planned=progress.planned,
            running=progress.running,
            done=progress.done,
            failed=progress.failed,
            nix=progress.nix,
            lines=progress.lines,
            last_line=progress.last_line[:500],
            step=StepView.of(progress.step),
            derivations=tuple(
                DerivationView(d.name, d.phase, StepView.of(d.step), d.started)
                for d in progress.derivations
            ),
            failed_derivations=tuple(progress.failed_derivations),
            step_failures=tuple(progress.step_failures)[-5:],
            first_error=progress.first_error,
            fraction=fraction,
            output_lost=output_lost or None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "planned": self.planned,
            "running": self.running,
            "done": self.done,
            "failed": self.failed,
            "nix": self.nix,
            "lines": self.lines,
            "last_line": self.last_line,
            "step": None if self.step is None else self.step.to_json(),
            "derivations": [d.to_json() for d in self.derivations],
            "failed_derivations": list(self.failed_derivations),
            "step_failures": list(self.step_failures),
            "first_error": self.first_error,
            "fraction": self.fraction,
            **({"output_lost": dict(self.output_lost)} if self.output_lost else {}),
        }

    @classmethod
    def from_json(cls, data: object) -> ProgressView:
        data = _mapping(data)
        lost = data.get("output_lost")
        return cls(
            planned=_int(data.get("planned")),
            running=_int(data.get("running")),
            done=_int(data.get("done")),
            failed=_int(data.get("failed")),
            nix=data.get("nix") is True,
            lines=_int(data.get("lines")),
            last_line=_str(data.get("last_line")),
            step=StepView.from_json(data.get("step")),
            derivations=tuple(DerivationView.from_json(d) for d in _items(data.get("derivations"))),
            failed_derivations=_strings(data.get("failed_derivations")),
            step_failures=_strings(data.get("step_failures")),
            first_error=_opt_str(data.get("first_error")),
            fraction=_opt_float(data.get("fraction")),
            output_lost=lost if isinstance(lost, Mapping) and lost else None,
        )


# -- the live view (what was measured) ---------------------------------------------------------


@dataclass(frozen=True)
class ProcessView:
    """One compile or link job (its driver folded into the pass that does the work), or a Nix
    builder, at the latest sample."""

    pid: int | None
    tool: str
    """The busiest process of the job: "cc1plus", "cicc", "ld", ..."""
    kind: str
    file: str | None
    cpu_percent: float
    """CPU over the last second, in % of ONE core (like top); the header's is of all cores."""
    rss: int
    running_s: float
    user: str = "?"
    derivation: str | None = None
    driver: str | None = None
    """The compiler driver folded into this row ("c++", "nvcc"), when there was one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "tool": self.tool,
            "kind": self.kind,
            "file": self.file,
            "cpu_percent": self.cpu_percent,
            "rss": self.rss,
            "running_s": self.running_s,
            "user": self.user,
            "derivation": self.derivation,
            "driver": self.driver,
        }

    @classmethod
    def from_json(cls, data: object) -> ProcessView:
        data = _mapping(data)
        return cls(
            pid=_opt_int(data.get("pid")),
            tool=_str(data.get("tool"), "?"),
            kind=_str(data.get("kind"), "?"),
            file=_opt_str(data.get("file")),
            cpu_percent=_float(data.get("cpu_percent")),
            rss=_int(data.get("rss")),
            running_s=_float(data.get("running_s")),
            user=_str(data.get("user"), "?"),
            derivation=_opt_str(data.get("derivation")),
            driver=_opt_str(data.get("driver")),
        )


@dataclass(frozen=True)
class RunningEdge:
    """Something the build is working on now: a file a compiler compiles, an output a linker
    links, a derivation a builder builds (seen by the 1 Hz sampler)."""

    what: str
    tool: str
    kind: str
    running_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "tool": self.tool,
            "kind": self.kind,
            "running_s": self.running_s,
        }

    @classmethod
    def from_json(cls, data: object) -> RunningEdge:
        data = _mapping(data)
        return cls(
            _str(data.get("what"), "?"),
            _str(data.get("tool"), "?"),
            _str(data.get("kind"), "?"),
            _float(data.get("running_s")),
        )


@dataclass(frozen=True)
class Peaks:
    """The build's own peaks since it started (every sample, not a graph's window)."""

    rss: int = 0
    rss_at: float | None = None
    cpu_cores: float = 0.0
    compile_jobs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "rss": self.rss,
            "rss_at": self.rss_at,
            "cpu_cores": self.cpu_cores,
            "compile_jobs": self.compile_jobs,
        }

    @classmethod
    def from_json(cls, data: object) -> Peaks:
        data = _mapping(data)
        return cls(
            _int(data.get("rss")),
            _opt_float(data.get("rss_at")),
            _float(data.get("cpu_cores")),
            _int(data.get("compile_jobs")),
        )


@dataclass(frozen=True)
class EtaView:
    """Seconds left, the range the truth is likely in, and what the figure rests on."""

    remaining_s: float
    low_s: float | None
    high_s: float | None
    basis: str
    first_build: bool = False
    """Nothing earlier to learn from: the figure is this build's own pace, extrapolated."""


@dataclass(frozen=True)
class Contention:
    """The rest of the host while the build ran: what competed with it for cores."""

    cpu_cores: float
    """CPU the host's other processes used over the last second, in cores."""
    mean_cpu_cores: float
    """The same, averaged over the build's life so far."""
    build_processes: int
    """Other build processes (compilers, linkers, ninja/make, nixbld) at the latest census."""
    summary: str
    """Those processes in words ("10 other build processes: 4 cc1plus, ..."); "" when none."""
    samples: int

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_cores": self.cpu_cores,
            "mean_cpu_cores": self.mean_cpu_cores,
            "build_processes": self.build_processes,
            "summary": self.summary,
            "samples": self.samples,
        }

    @classmethod
    def from_json(cls, data: object) -> Contention | None:
        if not isinstance(data, Mapping):
            return None
        return cls(
            _float(data.get("cpu_cores")),
            _float(data.get("mean_cpu_cores")),
            _int(data.get("build_processes")),
            _str(data.get("summary")),
            _int(data.get("samples")),
        )


@dataclass(frozen=True)
class LiveView:
    """The build at its latest sample (the history's `live` column)."""

    t: float | None = None
    """Epoch seconds of the sample; None: nothing sampled yet."""
    cpus: int = 0
    cpu_percent: float | None = None
    """The build's CPU as a share of ALL the host's cores, 0–100; None where the sample measured
    none (the sampler's first reading, with no interval behind it)."""
    cpu_cores: float | None = None
    rss: int = 0
    memory_available: int = 0
    memory_total: int = 0
    processes: int = 0
    compile_jobs: int = 0
    cuda_jobs: int = 0
    link_jobs: int = 0
    running: tuple[RunningEdge, ...] = ()
    peak: Peaks = field(default_factory=Peaks)
    eta: EtaView | None = None
    other: Contention | None = None
    jobs: tuple[ProcessView, ...] = ()

    @property
    def sampled(self) -> bool:
        """Whether anything was measured yet."""
        return self.t is not None

    @property
    def memory_scale(self) -> float:
        """What the build uses plus what it could still use: a memory graph's full scale."""
        return float(self.rss + self.memory_available)

    def to_json(self) -> dict[str, Any]:
        eta = self.eta
        return {
            "t": self.t,
            "cpus": self.cpus,
            "cpu_percent": self.cpu_percent,
            "cpu_cores": self.cpu_cores,
            "rss": self.rss,
            "memory_available": self.memory_available,
            "memory_total": self.memory_total,
            "processes": self.processes,
            "compile_jobs": self.compile_jobs,
            "cuda_jobs": self.cuda_jobs,
            "link_jobs": self.link_jobs,
            "eta_s": None if eta is None else eta.remaining_s,
            "eta_low_s": None if eta is None else eta.low_s,
            "eta_high_s": None if eta is None else eta.high_s,
            "eta_basis": None if eta is None else eta.basis,
            "eta_first_build": None if eta is None else eta.first_build,
            "running": [edge.to_json() for edge in self.running],
            "peak": self.peak.to_json(),
            "other_builds": None if self.other is None else self.other.to_json(),
            "jobs": [job.to_json() for job in self.jobs],
        }

    @classmethod
    def from_json(cls, data: object) -> LiveView:
        data = _mapping(data)
        remaining = _opt_float(data.get("eta_s"))
        eta = (
            None
            if remaining is None
            else EtaView(
                remaining,
                _opt_float(data.get("eta_low_s")),
                _opt_float(data.get("eta_high_s")),
                _str(data.get("eta_basis")),
                data.get("eta_first_build") is True,
            )
        )
        return cls(
            t=_opt_float(data.get("t")),
            cpus=_int(data.get("cpus")),
            cpu_percent=_opt_float(data.get("cpu_percent")),
            cpu_cores=_opt_float(data.get("cpu_cores")),
            rss=_int(data.get("rss")),
            memory_available=_int(data.get("memory_available")),
            memory_total=_int(data.get("memory_total")),
            processes=_int(data.get("processes")),
            compile_jobs=_int(data.get("compile_jobs")),
            cuda_jobs=_int(data.get("cuda_jobs")),
            link_jobs=_int(data.get("link_jobs")),
            running=tuple(RunningEdge.from_json(e) for e in _items(data.get("running"))),
            peak=Peaks.from_json(data.get("peak")),
            eta=eta,
            other=Contention.from_json(data.get("other_builds")),
            jobs=tuple(ProcessView.from_json(job) for job in _items(data.get("jobs"))),
        )
