"""`workbench hosts [--json]`: the build hosts of configs/hosts.toml, probed over SSH."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workbench.history.records import BuildRecord
    from workbench.history.store import History
    from workbench.host.nix_daemon import DaemonReality
    from workbench.remote.daemon_builders import HostUnderDaemon


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "hosts",
        help="build hosts (configs/hosts.toml): reachability, Nix, cores, memory, load",
        description="Probe every host of configs/hosts.toml over one multiplexed SSH "
        "connection each; a host that cannot build (bad key, no Nix, unreachable) is one line "
        "saying why. Exit 1 when an enabled host cannot build. `watch` follows a matrix build to "
        "its end and exits as `attach` does: the build's exit status, 128+signal, or 1.",
    )
    parser.add_argument(
        "action",
        nargs="?",
        choices=("list", "watch"),
        default="list",
        help="list (default): probe the hosts; watch [ID]: a matrix build per host, live",
    )
    parser.add_argument("id", nargs="?", type=int, help="build id for watch (default: latest)")
    parser.add_argument(
        "--once", action="store_true", help="watch: print the view once (exit 0 whatever the end)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "watch":
        return run_watch(args)
    from workbench.cli.common import print_json
    from workbench.configs.paths import config_dir, state_dir
    from workbench.remote.config import load_hosts
    from workbench.remote.probe import local_status, probe_hosts
    from workbench.remote.ssh import prepare_ssh

    config = load_hosts(config_dir(args.config))
    enabled = config.enabled_hosts
    setup = prepare_ssh(config.hosts, state_dir(args.state_dir))
    statuses = [local_status(config.local_builds), *probe_hosts(setup, enabled)]
    stores = {"local": "local", **{host.name: host.store_uri for host in config.hosts}}
    from workbench.host.nix_daemon import check_daemon
    from workbench.remote.daemon_builders import hosts_under_daemon, local_only_warning

    daemon = check_daemon()
    under_daemon = hosts_under_daemon(daemon, config)
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
                "nix_store": daemon.to_json(),
                "hosts_under_daemon": [row.to_json() for row in under_daemon],
                "daemon_warning": local_only_warning(under_daemon, daemon),
            }
        )
    else:
        from workbench.host.units import byte_size

        print(f"{'host':<16} {'state':<11} {'nix':<8} {'cores':>5} {'memory free/total':>20} load")
        for status in statuses:
            state = "ready" if status.ready else ("unreachable" if not status.reachable else "no")
            if status.name == "local" and not config.local_builds:
                state = "not used"
            free, total = status.memory_available_bytes, status.memory_total_bytes
            memory = f"{byte_size(free)}/{byte_size(total)}"
            load = " ".join(f"{value:.2f}" for value in status.load) if status.load else "-"
            print(
                f"{status.name:<16} {state:<11} {status.nix_version or '-':<8} "
                f"{status.cores if status.cores is not None else '-':>5} {memory:>20} {load}"
            )
            if status.problem and status.name != "local":
                print(f"  {status.name}: {status.problem}")
        for host in config.hosts:
            if not host.enabled:
                print(f"{host.name:<16} disabled (enabled = false in {config.path.name})")
        if not config.hosts:
            print(f"no build hosts in {config.path}: builds stay on this machine")
        print_daemon_view(daemon, under_daemon)
    failing = [s for s in statuses if s.name != "local" and not s.ready]
    return 1 if failing else 0


def print_daemon_view(
    daemon: DaemonReality, rows: Sequence[HostUnderDaemon], file: TextIO | None = None
) -> None:
    """This user's store and daemon, then each host as the daemon treats it, with the lines to
    add where it will not build there."""
    from workbench.host.nix_daemon import reality_lines
    from workbench.progress.visible import visible
    from workbench.remote.daemon_builders import local_only_warning

    print("\nNix store and daemon", file=file)
    for line in reality_lines(daemon):
        print(f"  {visible(line)}", file=file)
    for row in rows:
        builds = {True: "builds there", False: "will NOT build there", None: "builds there if "
                  "root reaches it"}[row.daemon_builds_there]  # fmt: skip
        print(f"  {row.name}: the daemon {builds}: {visible(row.why)}", file=file)
        detail = f" ({visible(row.reach_detail)})" if row.reach_detail else ""
        print(f"    reaches it as root: {row.reach}{detail}", file=file)
        for fix in row.fixes:
            print(f"    {visible(fix.why)}: add to {visible(fix.where)}:", file=file)
            for line in fix.lines:
                print(f"      {visible(line)}", file=file)
    warning = local_only_warning(rows, daemon)
    if warning:
        print(f"  warning: {warning}", file=file)


def run_matrix_build(args: argparse.Namespace) -> int:
    """`workbench build A B C` / `--match WORDS`: one supervised nix build over the hosts."""
    import sys
    from pathlib import Path

    from workbench.cli.build_common import history as _history
    from workbench.cli.build_common import say_nix_plan, say_planned_jobs
    from workbench.cli.build_common import state as _state
    from workbench.cli.common import load_config
    from workbench.cli.follow_loop import launch_and_follow
    from workbench.planning.launch import LaunchError, display
    from workbench.remote.matrix_build import prepare_matrix_build

    if args.backend != "nix":
        raise LaunchError("a matrix build runs on Nix's remote builders: --backend nix only")
    directory, _matrix = load_config(args)
    history = _history(args)
    planned = prepare_matrix_build(
        directory,
        _state(args),
        history,
        list(args.variant),
        args.match,
        jobs=args.jobs,
        max_jobs=args.max_jobs,
        flake=Path(args.directory).expanduser() if args.directory else None,
        ort=getattr(args, "ort", None),
        forced=args.force,
    )
    for line in planned.said:
        print(f"workbench: {line}", file=sys.stderr)
    if planned.daemon is not None:
        print("workbench: warning: the nix-daemon builds this, not `nix build`:", file=sys.stderr)
        print_daemon_view(planned.daemon, planned.daemon_rows, file=sys.stderr)
    flake = planned.flake
    if planned.plan is None:
        evaluated = planned.evaluated
        print(f"all {len(evaluated)} targets are in the store already: nothing to build")
        from workbench.artefacts.out_links import link_results

        made, problems = link_results(flake, {t.target.name: t.out for t in evaluated})
        if made:
            print(f"  out-links in {flake}: {', '.join(made)}")
        for problem in problems:
            print(f"workbench: could not link a result: {problem}", file=sys.stderr)
        return 0
    if planned.plan.unread_configs:
        print(f"workbench: warning: {planned.plan.unread_configs}", file=sys.stderr)
    plan = planned.plan.build
    choice = planned.plan.jobs
    note = planned.plan.checks_note
    # Nix's own plan before the matrix starts: what it builds (last times) and fetches.
    say_nix_plan(history, Path(plan.cwd), plan.argv)
    if args.dry_run:
        print(display(plan.argv))
        print(f"# in {plan.cwd}", file=sys.stderr)
        say_planned_jobs(choice)
        if choice.warning:
            print(f"workbench: warning: {choice.warning}", file=sys.stderr)
        if note:
            print(f"# {note}", file=sys.stderr)
        return 0
    if note:
        print(f"workbench: note: {note}", file=sys.stderr)
    from workbench.cli.push_command import follow_push
    from workbench.remote.config import with_push_request

    plan = with_push_request(plan, directory)  # each target that built, pushed by its supervisor
    followed = launch_and_follow(args, history, plan, list(planned.plan.warnings))
    if not followed.finished:
        return followed.code
    print_target_rows(_state(args), followed.build_id, Path(plan.cwd))
    follow_push(args, history, followed.build_id)
    return followed.code


def print_target_rows(state_directory: Path, build_id: int, checkout: Path) -> None:
    """Work out, store and print the per-target rows of an ended matrix build; link each
    target's result as result-NAME in the checkout."""
    import sys

    from workbench.artefacts.out_links import link_results
    from workbench.history.store import History
    from workbench.progress.visible import visible
    from workbench.remote.target_history import record_rows, work_out_rows

    with History(state_directory) as history:
        record = history.get(build_id)
        rows = work_out_rows(history, record)
    record_rows(state_directory, build_id, rows)
    print(f"build #{build_id}: {len(rows)} targets")
    for row in rows:
        seconds = (
            f"{row.ended - row.started:.1f}s" if row.started is not None and row.ended else "-"
        )
        size = f"{row.nar_size} B" if row.nar_size is not None else "-"
        where = row.host or "-"
        tried = f" (tried {row.tried_on} first)" if row.tried_on else ""
        error = f"  {visible(row.first_error)}" if row.first_error else ""
        print(
            f"  {row.outcome:<9} {row.name:<44} {where:<10} {seconds:>7} {size:>10}{tried}{error}"
        )
    results = {row.name: row.out_path for row in rows if row.outcome in ("built", "in store")}
    made, problems = link_results(checkout, results) if results else ([], [])
    if made:
        print(f"  out-links in {checkout}: {', '.join(made)}")
    for problem in problems:
        print(f"workbench: could not link a result: {visible(problem)}", file=sys.stderr)


WATCH_INTERVAL_S = 1.0


def run_watch(args: argparse.Namespace) -> int:
    """`workbench hosts watch [ID]`: what each host builds now and the matrix, until the end
    (or until its supervisor is found gone: the build is then marked lost, as `status` does);
    exits as `attach` does, with the build's exit status (0 with --once: a view)."""
    import time

    from workbench.cli.build_common import state as _state
    from workbench.cli.follow_loop import say_ended
    from workbench.errors import WorkbenchError
    from workbench.history.store import History
    from workbench.progress.visible import visible
    from workbench.remote.fleet import Fleet, fleet_lines
    from workbench.remote.matrix_view import LogFleet, host_list, hosts_seen
    from workbench.remote.target_history import matrix_of
    from workbench.supervision import liveness

    state = _state(args)
    with History(state) as history:
        record = _matrix_build(history, args.id)
    matrix = matrix_of(record) or {}
    if not matrix:
        raise WorkbenchError(f"build #{record.id} is not a matrix build (workbench build A B ...)")
    host_names = matrix.get("hosts", {})
    hosts = host_list(matrix)
    # Read READ_CHUNK bytes at a time (a 2 GB log is never held whole), to the end each round.
    reader = LogFleet(Path(record.log_path), Fleet(host_names=host_names))
    while True:
        with History(state) as history:
            record = history.get(record.id)
            if record.active:  # a supervisor that died leaves its build "running" for ever
                record = liveness.check(history, [record])[0]
        while True:
            read_before = reader.offset
            reader.catch_up()
            if reader.offset == read_before or reader.caught_up():
                break
        view = fleet_lines(reader.fleet, hosts_seen(reader.fleet, hosts), matrix.get("targets", []))
        print(f"build #{record.id} ({record.name}): {record.state}")
        for line in view:
            print(visible(line))
        if args.once or not record.active:
            break
        print("", flush=True)
        time.sleep(WATCH_INTERVAL_S)
    # Watched to its end (or found ended): it exits as `attach` of the build does, its exit
    # status, 128+signal, or 1; --once prints a view, as `status` reports, and exits 0.
    code = 0 if args.once or record.active else say_ended(args, record)
    if not record.active:
        print_target_rows(state, record.id, Path(record.cwd))
    return code


def _matrix_build(history: History, build_id: int | None) -> BuildRecord:
    """The build named, else the latest matrix build."""
    from workbench.errors import WorkbenchError
    from workbench.remote.target_history import matrix_of

    if build_id is not None:
        return history.get(build_id)
    for record in history.builds(limit=50):
        if matrix_of(record) is not None:
            return record
    raise WorkbenchError("no matrix build in the history yet (workbench build A B ... starts one)")
