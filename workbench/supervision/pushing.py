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

import functools
import os
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
S3_PROBE_TIMEOUT_S = 20.0
# A bucket behind a port nothing listens on: a Nix built with S3 support (aws-sdk-cpp) fails to
# reach it at once; one built without it (Debian's nix-bin 2.8) cannot open such a store at all
# and says so before any network (Nix's src/libstore/store-api.cc, openStore: "don't know how
# to open Nix store"; 2.20 and later add "with scheme 's3'").
_S3_PROBE = "s3://workbench-s3-probe?endpoint=http://127.0.0.1:9&region=us-east-1"
_NO_SUCH_STORE = "don't know how to open Nix store"
# A claim taken over by a command that found its claimant gone: the note until the push starts.
TAKEN_OVER = "taken over by pid "


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


@functools.cache
def s3_support_problem() -> str | None:
    """Why this machine's Nix cannot push to an s3:// store (None: it has S3 support, or it
    could not be asked and the push itself will say)."""
    from workbench.host.bounded_command import run_bounded

    argv = ["nix", "--extra-experimental-features", "nix-command", "store", "ping", "--store"]
    try:
        done = run_bounded([*argv, _S3_PROBE], S3_PROBE_TIMEOUT_S)
        version = run_bounded(["nix", "--version"], S3_PROBE_TIMEOUT_S).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    said = next((line for line in done.stderr.splitlines() if _NO_SUCH_STORE in line), None)
    if said is None:
        return None
    return (
        f"this Nix ({version or 'nix'}) was built without S3 support: it cannot open any s3:// "
        f"store (`nix store ping --store s3://...` says: {said.removeprefix('error: ')})"
    )


def store_support_problem(store: str) -> str | None:
    """Why this machine's Nix cannot copy to `store` at all (None: it can try)."""
    return s3_support_problem() if store.startswith("s3://") else None


def wants_push(record: BuildRecord, state: str) -> bool:
    """Whether a build that ended in `state` is pushed: a success; a matrix build also when
    some target failed (--keep-going built the others: those are pushed)."""
    if requested(record) is None:
        return False
    return state == SUCCEEDED or (state == FAILED and "matrix" in (record.settings or {}))


def _invalid_in_store(paths: list[str]) -> set[str] | None:
    """Those of `paths` not valid in this machine's store; None when Nix cannot be asked."""
    if not paths:
        return set()
    from workbench.host.bounded_command import run_bounded

    try:
        check = run_bounded(["nix-store", "--check-validity", "--print-invalid", *paths], 60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if check.returncode != 0:
        return None
    return set(check.stdout.split())


def _valid(paths: list[str]) -> list[str]:
    """Those of `paths` valid in this machine's store (none when Nix cannot be asked)."""
    invalid = _invalid_in_store(paths)
    return [] if invalid is None else [path for path in paths if path not in invalid]


def _invalid(paths: list[str]) -> list[str]:
    """Those of `paths` known to be gone from this machine's store (none when Nix cannot be
    asked: the copy itself will say)."""
    invalid = _invalid_in_store(paths) or set()
    return [path for path in paths if path in invalid]


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
    gone = _invalid(list(outputs))
    if gone:
        raise WorkbenchError(
            f"build #{record.id}'s outputs are no longer in this store (collected as garbage "
            f"since?): {', '.join(gone)}; build it again, then push"
        )
    if signing_key and not Path(signing_key).expanduser().is_file():
        raise WorkbenchError(f"signing key {signing_key}: no such file")
    unsupported = store_support_problem(store)
    if unsupported:
        raise WorkbenchError(f"{store}: {unsupported}")
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
    asked = requested(record)
    if asked is None:
        return None
    return _start_push(history, record, asked, say)


def predecessors_claim(history: History, build_id: int) -> bool:
    """Whether the build's push is claimed, not started and taken by no command: the claim of
    a supervisor of this build, which an adopting supervisor (the keeper's) starts as its own
    when its lost predecessor claimed it before recording the build's end."""
    claim = history.push_request(build_id)
    return claim is not None and claim[1:] == (None, None)


def _start_push(
    history: History, record: BuildRecord, asked: tuple[str, str | None], say: Callable[[str], None]
) -> int | None:
    from workbench.supervision import control

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


def _claimant_alive(history: History, record: BuildRecord, note: str | None) -> bool:
    """Whether whoever holds an unstarted claim may still start it: the build's supervisor
    (no note; also while the build's end is not recorded yet), else the command that took it
    over (its pid in the note)."""
    import psutil

    from workbench.supervision import liveness

    if note is None:
        if record.active:
            record = liveness.check(history, [record])[0]
        return record.active or liveness.supervisor_running(record)
    try:
        pid = int(note.removeprefix(TAKEN_OVER).split()[0])
    except (ValueError, IndexError):
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _push_build_of(history: History, build_id: int, store: str) -> int | None:
    """A push build of `build_id` to `store` that started already (its starter died before
    recording it in the claim)."""
    for record in history.builds(limit=200):
        done_by = (record.settings or {}).get(DONE_BY)
        if isinstance(done_by, dict) and (done_by.get("build"), done_by.get("store")) == (
            build_id,
            store,
        ):
            return record.id
    return None


def take_over_lost_claims(
    history: History, say: Callable[[str], None], only: int | None = None
) -> list[int]:
    """Claimed pushes whose claimant died before starting them (a supervisor killed between
    its claim and the push's start): started by this command now, once whoever looks first;
    a build whose end was never recorded is not pushed, and the claim says what to run.
    The push builds started (`only`: that build's claim alone)."""
    started: list[int] = []
    for build_id, store, note in history.unstarted_push_claims():
        if only is not None and build_id != only:
            continue
        record = history.get(build_id)
        if _claimant_alive(history, record, note):
            continue
        if not history.take_push_claim(build_id, note, f"{TAKEN_OVER}{os.getpid()}"):
            continue  # another command took it first
        record = history.get(build_id)
        already = _push_build_of(history, build_id, store)
        if already is not None:
            history.push_started(build_id, already, None)
            continue
        asked = requested(record)
        if asked is None or not wants_push(record, record.state):
            why = (
                f"the supervisor of build #{build_id} died before it started the push, and the "
                f"build is {record.state}: once `{record.name}` succeeds again, "
                f"`workbench push {record.name} --to {store}`"
            )
            history.push_started(build_id, None, why)
            say(f"build #{build_id}: not pushed to {store}: {why}")
            continue
        say(f"build #{build_id}: its supervisor died before starting the push to {store}; "
            "starting it now")  # fmt: skip
        try:
            push_id = _start_push(history, record, asked, say)
        except OSError as error:  # no supervisor could be started (no memory, no processes)
            history.push_started(build_id, None, f"could not start the push: {error}")
            say(f"build #{build_id}: not pushed to {store}: could not start the push: {error}")
            continue
        if push_id is not None:
            started.append(push_id)
    return started
