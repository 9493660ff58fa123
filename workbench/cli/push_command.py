"""`workbench push ID|NAME --to STORE`: a build's outputs, with their closures, copied to a
binary cache or another store; supervised like a build, and recorded in the history."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "push",
        help="copy a build's outputs and closure to a binary cache or store (nix copy)",
        description="Copy the outputs of a successful build (and everything they need) to a "
        "store: file:///DIR (a binary cache others substitute from), ssh-ng://HOST, ssh://HOST "
        "or s3://BUCKET. Runs under a supervisor like a build; the history records where each "
        "output went. --list shows where a build's outputs were pushed.",
    )
    parser.add_argument("build", help="a build id, or a build's name (its latest success)")
    parser.add_argument("--to", metavar="STORE", help="the store (default: push_to in hosts.toml)")
    parser.add_argument(
        "--signing-key",
        metavar="FILE",
        help="sign with this secret key (default: signing_key in hosts.toml; none: unsigned)",
    )
    parser.add_argument("--list", action="store_true", help="where its outputs were pushed")
    parser.add_argument("--json", action="store_true", help="print JSON (with --list)")
    parser.add_argument("--force", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(handler=run)


def find_build(history: Any, which: str) -> Any:
    """The build `which` names: an id, else the latest successful build of that name."""
    from workbench.errors import WorkbenchError
    from workbench.history.records import SUCCEEDED

    if which.isdigit():
        return history.get(int(which))
    for record in history.builds(limit=500):
        if record.name == which and record.state == SUCCEEDED:
            return record
    raise WorkbenchError(
        f"no successful build named {which!r} in the history; give a build id (workbench history)"
    )


def outputs_of(history: Any, record: Any) -> tuple[str, ...]:
    """The store paths a build produced: its recorded outputs, or a matrix build's targets."""
    from workbench.artefacts.sizes import from_json

    found = from_json(history.artefacts(record.id))
    paths = [output.path for output in found.outputs] if found else []
    paths += [
        target.out_path
        for target in history.targets(record.id)
        if target.out_path and target.outcome in ("built", "in store")
    ]
    return tuple(dict.fromkeys(paths))


def run(args: argparse.Namespace) -> int:
    from workbench.cli.build_common import history as _history
    from workbench.errors import WorkbenchError

    if args.to:
        from workbench.artefacts.push import ALLOWED, store_url_problem
        from workbench.errors import ConfigError

        problem = store_url_problem(args.to)
        if problem:
            raise ConfigError(f"--to {args.to!r}: refused ({problem}); allowed: {ALLOWED}")
    history = _history(args)
    record = find_build(history, args.build)
    if args.list:
        return _list(history, record, args.json)
    from workbench.configs.paths import config_dir
    from workbench.remote.config import load_hosts

    hosts = load_hosts(config_dir(args.config))
    store = args.to or hosts.push_to
    if not store:
        raise WorkbenchError(
            f"push build #{record.id} where? give --to STORE, or set push_to in {hosts.path}"
        )
    key = args.signing_key or hosts.signing_key or None
    return push_build(args, history, record, store, key)


def push_build(args: argparse.Namespace, history: Any, record: Any, store: str, key: Any) -> int:
    """Plan, sign where needed, copy under a supervisor and record where each output went."""
    from pathlib import Path

    from workbench.artefacts.push import ALLOWED, plan_push, sign_locally, store_url_problem
    from workbench.cli.follow_loop import launch_and_follow
    from workbench.errors import ConfigError, WorkbenchError
    from workbench.history.records import SUCCEEDED
    from workbench.planning.launch import plan_run

    problem = store_url_problem(store)
    if problem:
        raise ConfigError(f"--to {store!r}: refused ({problem}); allowed: {ALLOWED}")
    if record.state != SUCCEEDED:
        raise WorkbenchError(f"build #{record.id} is {record.state}: only a success is pushed")
    outputs = outputs_of(history, record)
    if not outputs:
        raise WorkbenchError(
            f"build #{record.id} recorded no store paths (not a Nix build, or its result link "
            "was gone when it ended): nothing to push"
        )
    if key and not Path(key).expanduser().is_file():
        raise ConfigError(f"signing key {key}: no such file; allowed: a secret key file "
                          "(nix-store --generate-binary-cache-key NAME SECRET PUBLIC)")  # fmt: skip
    plan = plan_push(record.id, outputs, store, key)
    failed = sign_locally(plan)
    if failed:
        raise WorkbenchError(f"signing build #{record.id}'s outputs failed: {failed}")
    print(
        f"workbench: pushing build #{record.id}'s {len(outputs)} output"
        f"{'' if len(outputs) == 1 else 's'} and their closure to "
        f"{store}" + (f", signed with {plan.signing_key}" if plan.signing_key else ", unsigned"),
        file=sys.stderr,
    )
    copy = plan_run(list(plan.argv), f"push-{record.id}", Path(record.cwd))
    followed = launch_and_follow(args, history, copy, [])
    if not followed.finished:
        return followed.code
    if followed.code == 0:
        history.record_pushes(record.id, outputs, store, followed.build_id, plan.signing_key)
        for output in outputs:
            print(f"workbench: pushed {output} to {store}", file=sys.stderr)
    return followed.code


def _list(history: Any, record: Any, as_json: bool) -> int:
    from workbench.cli.common import print_json
    from workbench.progress.visible import visible

    pushes = history.pushes(record.id)
    if as_json:
        print_json({"build": record.id, "pushes": [push.to_json() for push in pushes]})
        return 0
    if not pushes:
        print(f"build #{record.id}: never pushed")
    for push in pushes:
        signed = f", signed with {push.signed_by}" if push.signed_by else ", unsigned"
        print(visible(f"{push.output} -> {push.store} (push build #{push.push_build}{signed})"))
    return 0
