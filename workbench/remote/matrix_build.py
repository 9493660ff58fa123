"""A matrix build: several targets as ONE `nix build --keep-going`, spread by Nix's own scheduler
over this machine and the hosts of hosts.toml (`--builders`); resumable (what is in the store
already is not built again); one history row per target afterwards.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.flake.evaluation import first_error
from workbench.history.records import NewBuild
from workbench.planning.launch import (
    NIX_FEATURES,
    LaunchError,
    Target,
    check_name,
    eta_key,
    find_checkout,
    resolve_target,
)
from workbench.remote.config import HostsConfig
from workbench.remote.ssh import SshSetup

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix
    from workbench.history.store import History
    from workbench.host.nix_daemon import DaemonReality
    from workbench.planning.availability import Availability
    from workbench.planning.plan import BuildPlan
    from workbench.remote.daemon_builders import BuildersInUse, HostUnderDaemon

EVALUATE_TIMEOUT_S = 600


@dataclass(frozen=True)
class MatrixTarget:
    """A target with what Nix says it is: its derivation and output, and whether it is built."""

    target: Target
    drv: str
    out: str
    in_store: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.target.name,
            "attr": self.target.attr,
            "ort_version": self.target.ort_version or None,
            "drv": self.drv,
            "out": self.out,
            "in_store": self.in_store,
        }


@dataclass(frozen=True)
class Selection:
    """The targets a matrix build takes, and the variants its --match caught that the nixpkgs
    pin cannot build (left out, not refused: an explicit name that cannot build is refused)."""

    targets: list[Target]
    left_out: list[Availability]
    match: str | None = None

    def left_out_line(self) -> str | None:
        """One line naming the variants left out and why, or None when there are none."""
        if not self.left_out:
            return None
        reasons = "; ".join(dict.fromkeys(str(said.reason) for said in self.left_out))
        names = ", ".join(said.name for said in self.left_out)
        return (
            f"--match {self.match!r}: left out {len(self.left_out)} variants the nixpkgs pin "
            f"cannot build ({names}): {reasons}"
        )


def select_targets(
    names: list[str], match: str | None, matrix: Matrix, ort: str | None = None
) -> Selection:
    """The targets named, plus the variants whose names contain every word of `match` that the
    pin can build (the others are left out, and said)."""
    from workbench.planning.availability import of_variant

    chosen = list(names)
    left_out: list[Availability] = []
    if match is not None:
        from workbench.configs.variants import expand

        words = match.lower().split()
        matched = [v for v in expand(matrix, ort) if all(word in v.name for word in words)]
        if not matched:
            raise LaunchError(
                f"--match {match!r}: no variant's name contains every word "
                "(`workbench variants --names` lists them)"
            )
        said = {v.name: of_variant(v, matrix) for v in matched}
        left_out = [a for a in said.values() if not a.evaluates and a.name not in names]
        buildable = [name for name, a in said.items() if a.evaluates]
        if not buildable and not names:
            instead = list(dict.fromkeys(a.instead for a in left_out if a.instead))
            more = f" and {len(instead) - 3} more" if len(instead) > 3 else ""
            hint = f"; build instead: {', '.join(instead[:3])}{more}" if instead else ""
            raise LaunchError(
                f"--match {match!r}: every variant it catches cannot be built from the nixpkgs "
                f"pin: {left_out[0].reason}{hint}"
            )
        chosen += buildable
    targets = [resolve_target(name, matrix, ort) for name in dict.fromkeys(chosen)]
    unique = list({t.attr: t for t in targets}.values())
    return Selection(unique, left_out, match)


def select_build_targets(
    names: list[str], match: str | None, matrix: Matrix, explicit: str | None, ort_version: str
) -> Selection:
    """The targets of a matrix build: at `explicit` (--ort), else at `ort_version`
    (settings.toml's), except that without --ort a name carrying its release is that release,
    so that one build takes two releases of a variant side by side (`build NAME
    NAME-ort1_24_2`)."""
    own = []
    if explicit is None and matrix.releases is not None:
        own = [name for name in names if matrix.releases.split_name(name)[1] is not None]
    rest = [name for name in names if name not in own]
    selection = select_targets(rest, match, matrix, explicit or ort_version)
    if not own:
        return selection
    named = select_targets(own, None, matrix, None).targets
    unique = list({t.attr: t for t in [*selection.targets, *named]}.values())
    return Selection(unique, selection.left_out, selection.match)


def builders_spec(config: HostsConfig) -> str:
    """`--builders` for Nix: one machine per enabled host, as in /etc/nix/machines."""
    machines = []
    for host in config.enabled_hosts:
        key = str(Path(host.ssh_key).expanduser()) if host.ssh_key else "-"
        fields = [
            host.store_uri,
            ",".join(host.systems),
            key,
            str(host.max_jobs),
            str(host.speed_factor),
            ",".join(host.features) or "-",
            ",".join(host.mandatory_features) or "-",
            "-",  # the host key: in the generated ssh config (HostKeyAlias), not here
        ]
        machines.append(" ".join(fields))
    return " ; ".join(machines)


def _nix(argv: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["nix", "--extra-experimental-features", NIX_FEATURES, *argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise LaunchError("nix: command not found; install Nix (Debian: nix-bin)") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"nix {argv[0]}: no answer within {timeout_s:g} s") from None


def evaluate_targets(flake: Path, targets: list[Target]) -> list[MatrixTarget]:
    """Each target's derivation and output (one `nix eval`), and which outputs are valid
    in this store already (one `nix-store --check-validity`): those are not built again."""
    apply = "d: { drv = d.drvPath; out = d.outPath; }"
    found = []
    for target in targets:
        done = _nix(
            ["eval", "--json", f".#{target.attr}", "--apply", apply], flake, EVALUATE_TIMEOUT_S
        )
        if done.returncode != 0:
            # Nix's first error is the cause; its last line is only "(use '--show-trace' ...)".
            said = first_error(done.stderr)
            raise LaunchError(f"{target.name}: does not evaluate in {flake}: {said}")
        paths = json.loads(done.stdout)
        found.append((target, str(paths["drv"]), str(paths["out"])))
    invalid: set[str] = set()
    if found:
        check = subprocess.run(
            ["nix-store", "--check-validity", "--print-invalid", *(out for _, _, out in found)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        invalid = set(check.stdout.split())
    return [MatrixTarget(t, drv, out, out not in invalid) for t, drv, out in found]


def matrix_argv(
    attrs: list[str], cores: int, max_jobs: int, builders: str, ssh: SshSetup | None
) -> list[str]:
    """The one `nix build` of a matrix: every target, --keep-going, Nix's own scheduler."""
    argv = [
        "nix",
        "--extra-experimental-features",
        NIX_FEATURES,
        "build",
        *(f".#{attr}" for attr in attrs),
        "-L",
        "--log-format",
        "internal-json",
        "--keep-going",
        "--no-link",
        "--cores",
        str(cores),
        "--max-jobs",
        str(max_jobs),
    ]
    if builders:
        argv += ["--builders", builders]
    # The supervisor runs argv as given: the ssh config reaches Nix (and its build hook)
    # through the environment, like flox's NIX_CONFIG.
    return ["env", f"NIX_SSHOPTS={ssh.nix_sshopts()}", *argv] if ssh else argv


def plan_matrix_build(
    targets: list[MatrixTarget],
    config: HostsConfig,
    ssh: SshSetup | None,
    flake: Path,
    settings_record: dict[str, Any],
    cores: int,
    max_jobs: int,
    forced: bool = False,
    in_use: BuildersInUse | None = None,
) -> NewBuild:
    """The supervised build of the targets not in the store yet (`in_use`: the builders Nix
    will really use, where a daemon decides; hosts.toml's otherwise)."""
    pending = [t for t in targets if not t.in_store]
    if not pending:
        raise WorkbenchError("every target is in the store already: nothing to build")
    local_jobs = max_jobs if config.local_builds else 0
    hosts = {host.store_uri: host.name for host in config.enabled_hosts}
    builders = builders_spec(config)
    if in_use is not None and in_use.from_daemon:
        # The daemon drops this user's --builders and uses its own: passing them would only
        # make the command line say what does not happen.
        hosts, builders, ssh = dict(in_use.hosts), "", None
    argv = matrix_argv([t.target.attr for t in pending], cores, local_jobs, builders, ssh)
    recorded = dict(settings_record)
    recorded["matrix"] = {
        "targets": [t.to_json() for t in targets],
        "hosts": hosts,
        "local_builds": config.local_builds,
        "builders_from": "daemon" if in_use is not None and in_use.from_daemon else "hosts.toml",
    }
    name = check_name(f"matrix-{len(targets)}")
    resolved = flake.resolve()
    return NewBuild(
        name=name,
        backend="nix",
        argv=tuple(argv),
        cwd=str(resolved),
        checkout=str(find_checkout(resolved)),
        settings=recorded,
        eta_key=eta_key("nix", ",".join(sorted(t.target.attr for t in targets)), recorded),
        nix=True,
        jobs=cores,
        forced=forced,
    )


@dataclass(frozen=True)
class MatrixPlan:
    """A matrix build planned, before it starts: the build (None when every target is in the
    store already), its targets as Nix evaluated them, and what the daemon makes of the hosts."""

    plan: BuildPlan | None
    evaluated: tuple[MatrixTarget, ...]
    flake: Path
    said: tuple[str, ...]
    """Lines said before the build: targets and hosts left out, targets in the store."""
    daemon: DaemonReality | None = None
    """The nix-daemon (host.nix_daemon.check_daemon) where it will not build on every host."""
    daemon_rows: tuple[HostUnderDaemon, ...] = ()
    """Each host as that daemon treats it (remote.daemon_builders.hosts_under_daemon)."""


def prepare_matrix_build(
    config_directory: Path,
    state_directory: Path,
    history: History,
    names: list[str],
    match: str | None = None,
    *,
    jobs: int | None = None,
    max_jobs: int | None = None,
    flake: Path | None = None,
    ort: str | None = None,
    forced: bool = False,
    ask_nix: bool = False,
) -> MatrixPlan:
    """The one `nix build --keep-going` of several targets over the hosts of hosts.toml, as
    `workbench build A B` and the TUI's `b` on several marked rows start it: hosts that cannot
    build left out, targets evaluated and those in the store not built again, and the jobs
    and memory estimate from the planner every build takes them from."""
    import dataclasses

    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.planning.availability import build_time_checks_notes
    from workbench.planning.build_preview import config_not_read_warning
    from workbench.planning.launch import build_settings_record, default_flake_directory
    from workbench.planning.plan import BuildPlan
    from workbench.planning.tuning import choose_jobs_for
    from workbench.remote.config import load_hosts
    from workbench.remote.probe import probe_hosts
    from workbench.remote.ssh import prepare_ssh

    matrix = load_matrix(config_directory)
    settings = load_settings(config_directory, matrix)
    config = load_hosts(config_directory)
    selection = select_build_targets(names, match, matrix, ort, settings.ort_version)
    targets = selection.targets
    said: list[str] = []
    left_out = selection.left_out_line()
    if left_out:
        said.append(left_out)
    flake = flake or default_flake_directory(config_directory)
    ssh = prepare_ssh(config.hosts, state_directory) if config.hosts else None
    if ssh is not None and config.enabled_hosts:
        # A host that cannot build is said in one line before the build, and left out.
        ready = set()
        for status in probe_hosts(ssh, config.enabled_hosts):
            if status.ready:
                ready.add(status.name)
            else:
                said.append(f"host {status.name}: {status.problem}; left out")
        config = dataclasses.replace(
            config,
            hosts=tuple(h for h in config.hosts if h.name in ready or not h.enabled),
        )
        if not config.local_builds and not config.enabled_hosts:
            hosts = "".join(f"{line}; " for line in said if line.startswith("host "))
            raise LaunchError(
                f"{hosts}no build host can build and local_builds = false: nothing would "
                f"build (fix those hosts, or set local_builds = true in {config.path})"
            )
    daemon: DaemonReality | None = None
    daemon_rows: tuple[HostUnderDaemon, ...] = ()
    # Through a nix-daemon, --builders may be dropped or unreachable for root: said before
    # the build, with the lines to add, instead of a silent all-local build; a daemon that
    # does not trust this user builds with its own builders, which the views then name.
    from workbench.host.nix_daemon import check_daemon
    from workbench.remote.daemon_builders import builders_in_use, hosts_under_daemon

    checked = check_daemon()
    in_use = builders_in_use(checked, config)
    if in_use.note:
        said.append(in_use.note)
    if config.enabled_hosts:
        rows = tuple(hosts_under_daemon(checked, config))
        if any(row.daemon_builds_there is not True for row in rows):
            daemon, daemon_rows = checked, rows
    evaluated = evaluate_targets(flake, targets)
    said += [
        f"{t.target.name}: in the store already ({t.out}); not built again"
        for t in evaluated
        if t.in_store
    ]
    cuda = any(t.cuda for t in targets)
    choice = choose_jobs_for(history, settings, targets[0].name, cuda, jobs, nix=True)
    chosen_max = max_jobs or settings.max_jobs
    if all(t.in_store for t in evaluated):
        return MatrixPlan(None, tuple(evaluated), flake, tuple(said), daemon, daemon_rows)
    record = build_settings_record(settings, choice.jobs, chosen_max, choice.source, [])
    build = plan_matrix_build(
        evaluated, config, ssh, flake, record, choice.jobs, chosen_max, forced, in_use
    )
    nix_plan = None
    if ask_nix:
        from workbench.planning.timed_nix_plan import nix_plan_for

        nix_plan = nix_plan_for(history, Path(build.cwd), build.argv)
    plan = BuildPlan(
        build=build,
        targets=tuple(targets),
        jobs=choice,
        max_jobs=chosen_max,
        unread_configs=config_not_read_warning(config_directory, flake),
        checks_note=build_time_checks_notes(
            [t.target.variant for t in evaluated if not t.in_store]
        ),
        nix_plan=nix_plan,
        notes=tuple(said),
    )
    return MatrixPlan(plan, tuple(evaluated), flake, tuple(said), daemon, daemon_rows)
