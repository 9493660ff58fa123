"""`workbench push ID|NAME --to STORE`: a build's outputs, with their closures, copied to a
binary cache or another store; supervised like a build, and recorded in the history."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.history.records import BuildRecord
    from workbench.history.store import History


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def find_build(history: History, which: str) -> BuildRecord:
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


def outputs_of(history: History, record: BuildRecord) -> tuple[str, ...]:
    """The store paths a build produced (`supervision.pushing.outputs_of`)."""
    from workbench.supervision.pushing import outputs_of as produced

    return produced(history, record)


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
    from workbench.errors import ConfigError
    from workbench.remote.config import ALLOWED_HERE, push_to_where
    from workbench.supervision.pushing import store_support_problem

    unsupported = store_support_problem(store)
    if unsupported:  # refused before anything starts
        where = f"--to {store!r}" if args.to else push_to_where(store, hosts.path)
        raise ConfigError(f"{where}: {unsupported}; allowed here: {ALLOWED_HERE}")
    key = args.signing_key or hosts.signing_key or None
    return push_build(args, history, record, store, key)


def push_build(
    args: argparse.Namespace, history: History, record: BuildRecord, store: str, key: str | None
) -> int:
    """Plan, sign where needed and copy under a supervisor; the push build's supervisor records
    where each output went (once, as it ends)."""
    from pathlib import Path

    from workbench.artefacts.push import ALLOWED, store_url_problem
    from workbench.cli.follow_loop import launch_and_follow
    from workbench.errors import ConfigError, WorkbenchError
    from workbench.history.records import SUCCEEDED
    from workbench.supervision.pushing import push_plan

    problem = store_url_problem(store)
    if problem:
        raise ConfigError(f"--to {store!r}: refused ({problem}); allowed: {ALLOWED}")
    if record.state != SUCCEEDED:
        raise WorkbenchError(f"build #{record.id} is {record.state}: only a success is pushed")
    if key and not Path(key).expanduser().is_file():
        raise ConfigError(f"signing key {key}: no such file; allowed: a secret key file "
                          "(nix-store --generate-binary-cache-key NAME SECRET PUBLIC)")  # fmt: skip
    copy, plan = push_plan(history, record, store, key, Path(record.cwd))
    _say_pushing(record.id, len(plan.outputs), store, plan.signing_key)
    followed = launch_and_follow(args, history, copy, [])
    if followed.finished and followed.code == 0:
        _say_pushed(history, record.id, followed.build_id)
    return followed.code


def _say_pushing(build_id: int, count: int, store: str, signing_key: str | None) -> None:
    print(
        f"workbench: pushing build #{build_id}'s {count} output"
        f"{'' if count == 1 else 's'} and their closure to "
        f"{store}" + (f", signed with {signing_key}" if signing_key else ", unsigned"),
        file=sys.stderr,
    )


def _say_pushed(history: History, build_id: int, push_build: int) -> None:
    from workbench.progress.visible import visible

    for push in history.pushes(build_id):
        if push.push_build == push_build:
            print(visible(f"workbench: pushed {push.output} to {push.store}"), file=sys.stderr)


PUSH_START_WAIT_S = 420.0  # signing (at most 300 s) and the push supervisor's start
TAKE_OVER_EVERY_S = 1.0  # how often a waiting follower looks whether the claimant is gone


def _pending(note: str | None) -> bool:
    """Whether a claim without a push build may still start one (no reason why not yet)."""
    from workbench.supervision.pushing import TAKEN_OVER

    return note is None or note.startswith(TAKEN_OVER)


def follow_push(args: argparse.Namespace, history: History, build_id: int) -> None:
    """After a followed build ended: the push its supervisor claimed (hosts.toml's push_to),
    followed to its end like a build; a failure is said and leaves the build's outcome as it
    was. Nothing when the build asked for no push or ended without one."""
    import time

    from workbench.cli.build_common import command, say
    from workbench.cli.follow_loop import follow_to_end
    from workbench.progress.visible import visible
    from workbench.supervision.pushing import DONE_BY, take_over_lost_claims, wants_push

    record = history.get(build_id)
    if not wants_push(record, record.state):
        return
    deadline = time.monotonic() + PUSH_START_WAIT_S
    claim = history.push_request(build_id)
    looked = 0.0
    while claim is None or (claim[1] is None and _pending(claim[2])):
        if time.monotonic() > deadline:
            where = "claimed" if claim else "never claimed"
            say(f"warning: the push of build #{build_id} was {where} but never started within "
                f"{PUSH_START_WAIT_S:.0f} s; see its supervisor.log")  # fmt: skip
            return
        if claim is not None and time.monotonic() - looked >= TAKE_OVER_EVERY_S:
            # A supervisor killed between its claim and the push's start leaves it to us.
            looked = time.monotonic()
            take_over_lost_claims(history, say, only=build_id)
        time.sleep(0.1)
        claim = history.push_request(build_id)
    store, push_build, note = claim
    if push_build is None:
        say(
            f"warning: not pushed to {visible(store)} (push_to in hosts.toml): "
            f"{visible(note or 'no reason')}"
        )
        return
    done_by = history.get(push_build).settings.get(DONE_BY, {})
    _say_pushing(build_id, len(done_by.get("outputs", [])), store, done_by.get("signed_by"))
    say(f"push #{push_build}: following; Ctrl-C leaves it running (`{command(args)} attach "
        f"{push_build}` comes back)")  # fmt: skip
    code, finished = follow_to_end(args, history, push_build, backlog=True)
    if not finished:
        return
    if code == 0:
        _say_pushed(history, build_id, push_build)
    else:
        say(f"warning: the push to {visible(store)} failed (exit {code}); the build succeeded")


def _list(history: History, record: BuildRecord, as_json: bool) -> int:
    from workbench.cli.build_common import say
    from workbench.cli.common import print_json
    from workbench.progress.visible import visible
    from workbench.supervision.pushing import take_over_lost_claims

    take_over_lost_claims(history, say)
    claim = history.push_request(record.id)
    pushes = history.pushes(record.id)
    # hosts.toml's push_to after the build, not done (yet): running, or why not.
    pending = None
    if claim is not None and not pushes:
        pending = {"store": claim[0], "push_build": claim[1], "note": claim[2]}
    if as_json:
        document = {"build": record.id, "pushes": [push.to_json() for push in pushes]}
        print_json({**document, "claimed_push": pending})
        return 0
    if pending is not None and pending["push_build"] is not None:
        print(visible(f"build #{record.id}: being pushed to {pending['store']} by build "
                      f"#{pending['push_build']}"))  # fmt: skip
    elif pending is not None:
        note = pending["note"] or "claimed by its supervisor, not started yet"
        print(visible(f"build #{record.id}: push to {pending['store']}: {note}"))
    elif not pushes:
        print(f"build #{record.id}: never pushed")
    for push in pushes:
        signed = f", signed with {push.signed_by}" if push.signed_by else ", unsigned"
        print(visible(f"{push.output} -> {push.store} (push build #{push.push_build}{signed})"))
    return 0
