"""hosts.toml's push_to, done by the build's own supervisor side: a build launched with a push
request (in its settings, by the CLI or the TUI that read hosts.toml) has its outputs pushed
once it succeeded, whoever launched it and whether anyone follows it (`build --detach`, the
TUI); a matrix build has each target that built pushed, even when another target failed.

Once, never twice: the build's supervisor claims the push in the history before it records the
build's end (a follower that sees the end finds the claim), starts the push as a build of its
own (`nix copy`, supervised like any build, named push-ID) after it, and records which build
that is. The push build's supervisor records where each output went, before its own end, so
the record is written once, by the one process that saw the copy succeed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.history.records import FAILED, SUCCEEDED, BuildRecord, NewBuild
from workbench.history.store import History, build_directory

if TYPE_CHECKING:
    from workbench.artefacts.push import PushPlan

PATH_INFO_TIMEOUT_S = 600.0  # an evaluation of the flake, as the build's own
REQUEST = "push_to"  # the settings key of a push request: {"store": URL, "signing_key": FILE}
DONE_BY = "push_of"  # the settings key of a push build: {"build": ID, "outputs": [...], ...}


def request(store: str, signing_key: str | None) -> dict[str, Any]:
    """The settings entry a build is launched with when hosts.toml names push_to."""
    return {"store": store, "signing_key": signing_key or None}


def requested(record: BuildRecord) -> tuple[str, str | None] | None:
    """(store, signing key) the build asks to be pushed to, else None."""
    return requested_in(record.settings if isinstance(record.settings, dict) else {})


def requested_in(settings: dict[str, Any]) -> tuple[str, str | None] | None:
    """(store, signing key) a build's settings ask it to be pushed to, else None."""
    asked = settings.get(REQUEST)
    if not isinstance(asked, dict) or not isinstance(asked.get("store"), str):
        return None
    key = asked.get("signing_key")
    return asked["store"], key if isinstance(key, str) and key else None


def wants_push(record: BuildRecord, state: str) -> bool:
    """Whether a build that ended in `state` is pushed: a success; a matrix build also when
    some target failed (--keep-going built the others: those are pushed)."""
    if requested(record) is None:
        return False
    return state == SUCCEEDED or (state == FAILED and "matrix" in (record.settings or {}))


def _valid(paths: list[str]) -> list[str]:
    """Those of `paths` valid in this machine's store (none when Nix cannot be asked)."""
    if not paths:
        return []
    from workbench.host.bounded_command import run_bounded

    try:
        check = run_bounded(["nix-store", "--check-validity", "--print-invalid", *paths], 60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if check.returncode != 0:
        return []
    invalid = set(check.stdout.split())
    return [path for path in paths if path not in invalid]


def outputs_of(history: History, record: BuildRecord) -> tuple[str, ...]:
    """The store paths a build produced: its recorded outputs; a matrix build's targets (their
    rows once written, else each target's output that is valid in this store now)."""
    from workbench.artefacts.sizes import from_json

    found = from_json(history.artefacts(record.id))
    paths = [output.path for output in found.outputs] if found else []
    if not paths and record.target and " " in record.target:
        # Several targets in one `nix build` (the TUI's marked rows): no result link names
        # each, so Nix says where each installable's output is.
        paths += _installable_outputs(record)
    rows = history.targets(record.id)
    if rows:
        paths += [
            row.out_path for row in rows if row.out_path and row.outcome in ("built", "in store")
        ]
    else:
        matrix = (record.settings or {}).get("matrix")
        targets = matrix.get("targets", []) if isinstance(matrix, dict) else []
        paths += _valid([str(t["out"]) for t in targets if isinstance(t, dict) and t.get("out")])
    return tuple(dict.fromkeys(paths))


def _installable_outputs(record: BuildRecord) -> list[str]:
    """The outputs of the build's `.#ATTR` installables, valid in this store (`nix path-info`
    in its flake's directory); none when Nix cannot say."""
    from workbench.host.bounded_command import run_bounded
    from workbench.planning.launch import NIX_FEATURES

    installables = [arg for arg in record.argv if arg.startswith(".#")]
    if not installables:
        return []
    argv = ["nix", "--extra-experimental-features", NIX_FEATURES, "path-info", *installables]
    try:
        done = run_bounded(argv, PATH_INFO_TIMEOUT_S, cwd=Path(record.cwd))
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [line for line in done.stdout.split() if line.startswith("/")]


def push_plan(
    history: History, record: BuildRecord, store: str, signing_key: str | None, cwd: Path
) -> tuple[NewBuild, PushPlan]:
    """The push build of `record`'s outputs (a NewBuild) and its PushPlan; WorkbenchError when
    there is nothing to push or the key is missing. Signs first where the store needs it."""
    from dataclasses import replace

    from workbench.artefacts.push import plan_push, sign_locally
    from workbench.planning.launch import plan_run

    outputs = outputs_of(history, record)
    if not outputs:
        raise WorkbenchError(
            f"build #{record.id} recorded no store paths (not a Nix build, or its result link "
            "was gone when it ended): nothing to push"
        )
    if signing_key and not Path(signing_key).expanduser().is_file():
        raise WorkbenchError(f"signing key {signing_key}: no such file")
    plan = plan_push(record.id, outputs, store, signing_key)
    failed = sign_locally(plan)
    if failed:
        raise WorkbenchError(f"signing build #{record.id}'s outputs failed: {failed}")
    copy = plan_run(list(plan.argv), f"push-{record.id}", cwd)
    done_by = {
        "build": record.id,
        "outputs": list(outputs),
        "store": store,
        "signed_by": plan.signing_key,
    }
    return replace(copy, settings={**copy.settings, DONE_BY: done_by}), plan


def start_push(history: History, record: BuildRecord, say: Callable[[str], None]) -> int | None:
    """After the build's end is recorded: the claimed push started as a build of its own (in
    the build's private folder, so that no tree lock of the build stands in its way); its id,
    or None when none could start (why is recorded in the claim and said)."""
    from workbench.supervision import control

    asked = requested(record)
    if asked is None:
        return None
    store, key = asked
    state = history.state_directory
    try:
        plan, _ = push_plan(history, record, store, key, build_directory(state, record.id))
        started = control.start(state, history, plan, False, [])
    except WorkbenchError as exc:
        history.push_started(record.id, None, str(exc))
        say(f"build #{record.id}: not pushed to {store}: {exc}")
        return None
    history.push_started(record.id, started.record.id, None)
    say(f"build #{record.id}: pushing to {store} as build #{started.record.id}")
    return started.record.id


def record_done(history: History, record: BuildRecord) -> None:
    """A push build that succeeded: where each output of the build it pushed went."""
    done_by = (record.settings or {}).get(DONE_BY)
    if not isinstance(done_by, dict):
        return
    history.record_pushes(
        int(done_by["build"]),
        [str(output) for output in done_by.get("outputs", [])],
        str(done_by["store"]),
        record.id,
        done_by.get("signed_by"),
    )
