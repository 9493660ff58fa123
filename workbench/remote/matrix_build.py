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
    from workbench.planning.availability import Availability

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
) -> NewBuild:
    """The supervised build of the targets not in the store yet."""
    pending = [t for t in targets if not t.in_store]
    if not pending:
        raise WorkbenchError("every target is in the store already: nothing to build")
    local_jobs = max_jobs if config.local_builds else 0
    argv = matrix_argv(
        [t.target.attr for t in pending], cores, local_jobs, builders_spec(config), ssh
    )
    recorded = dict(settings_record)
    recorded["matrix"] = {
        "targets": [t.to_json() for t in targets],
        "hosts": {host.store_uri: host.name for host in config.enabled_hosts},
        "local_builds": config.local_builds,
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
