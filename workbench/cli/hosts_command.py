"""`workbench hosts [--json]`: the build hosts of configs/hosts.toml, probed over SSH."""

from __future__ import annotations

import argparse


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "hosts",
        help="build hosts (configs/hosts.toml): reachability, Nix, cores, memory, load",
        description="Probe every host of configs/hosts.toml over one multiplexed SSH "
        "connection each; a host that cannot build (bad key, no Nix, unreachable) is one line "
        "saying why. Exit 1 when an enabled host cannot build.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def _gigabytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e9:.1f}"


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import print_json
    from workbench.hosts.config import load_hosts
    from workbench.hosts.probe import local_status, probe_hosts
    from workbench.hosts.ssh import prepare_ssh
    from workbench.paths import config_dir, state_dir

    config = load_hosts(config_dir(args.config))
    enabled = config.enabled_hosts
    setup = prepare_ssh(config.hosts, state_dir(args.state_dir))
    statuses = [local_status(config.local_builds), *probe_hosts(setup, enabled)]
    stores = {"local": "local", **{host.name: host.store_uri for host in config.hosts}}
    if args.json:
        print_json(
            {
                "config": str(config.path),
                "local_builds": config.local_builds,
                "hosts": [
                    {
                        "name": status.name,
                        "store": stores[status.name],
                        "reachable": status.reachable,
                        "ready": status.ready,
                        "problem": status.problem,
                        "nix_version": status.nix_version,
                        "cores": status.cores,
                        "memory_total_bytes": status.memory_total_bytes,
                        "memory_available_bytes": status.memory_available_bytes,
                        "load": list(status.load) if status.load else None,
                        "probe_seconds": round(status.probe_seconds, 3),
                    }
                    for status in statuses
                ],
                "disabled": [host.name for host in config.hosts if not host.enabled],
            }
        )
    else:
        print(f"{'host':<16} {'state':<11} {'nix':<8} {'cores':>5} {'mem GB free/total':>18} load")
        for status in statuses:
            state = "ready" if status.ready else ("unreachable" if not status.reachable else "no")
            if status.name == "local" and not config.local_builds:
                state = "not used"
            memory = (
                f"{_gigabytes(status.memory_available_bytes)}/"
                f"{_gigabytes(status.memory_total_bytes)}"
            )
            load = " ".join(f"{value:.2f}" for value in status.load) if status.load else "-"
            print(
                f"{status.name:<16} {state:<11} {status.nix_version or '-':<8} "
                f"{status.cores if status.cores is not None else '-':>5} {memory:>18} {load}"
            )
            if status.problem and status.name != "local":
                print(f"  {status.name}: {status.problem}")
        for host in config.hosts:
            if not host.enabled:
                print(f"{host.name:<16} disabled (enabled = false in {config.path.name})")
        if not config.hosts:
            print(f"no build hosts in {config.path}: builds stay on this machine")
    failing = [s for s in statuses if s.name != "local" and not s.ready]
    return 1 if failing else 0
