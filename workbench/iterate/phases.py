"""The derivation's phases in the workspace: the supervised program of a slow iterate cycle.

`python -m workbench.iterate.phases ROOT (--flake DIR | --package-file FILE --nixpkgs-rev REV)
--attr ATTR --config DIR --target NAME --jobs N [--refresh]` runs under the supervisor (so its
output is the build's log, with progress, and the history has it) and does, as far as needed:

1. record the environment (dev_env.record: `nix print-dev-env`, building the inputs);
2. make the working copy, when there is none: `unpackPhase` in ROOT/unpack, the tree committed
   as "upstream source"; `patchPhase` with nixpkgs' own patches (the derivation's `patches`
   that are not files of the series, and its `prePatch`) as one commit; one commit per series
   patch (workspace.create, workspace.apply_series); then its `postPatch` as the last commit.
   When there is one, make again what the derivation changed since (sync_source): a new `src`
   (the whole source), other own patches (them, the series, postPatch) or another postPatch;
3. configure, when what configure depends on changed (dev_env.configure_inputs), from a fresh
   cache (CMake keeps a value it read once, such as CXXFLAGS, for ever), saying why;
4. exec the build tool of the build phase (ninja, else make) in the recorded environment.

Every phase runs in bash after sourcing env.sh, exactly as in `nix develop`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from workbench.errors import WorkbenchError
from workbench.iterate import dev_env
from workbench.iterate.workspace import (
    OWN_PATCHES_NOTE,
    POST_PATCH_NOTE,
    TRAILER_UPSTREAM,
    Git,
    Step,
    WantedPatch,
    WorkspacePaths,
    apply_as_commit,
    apply_series,
    create,
    load_state,
    read_history,
    rebuild_from,
    save_state,
    sha256_of,
)

# Each phase: env.sh sourced (as nix develop does), its temporary NIX_BUILD_TOP removed at exit.
PRELUDE = (
    'source "$1" || exit 1; '
    'trap \'case "$NIX_BUILD_TOP" in */nix-shell.*) rm -rf -- "$NIX_BUILD_TOP";; esac\' EXIT; '
    "set -e; "
)
UNPACK = PRELUDE + 'cd "$2"; runPhase unpackPhase; printf "%s" "$sourceRoot" > "$3"'
# patchPhase is prePatch, each of `patches` (nixpkgs' own, then the series: nix/overrides.nix
# appends it), then postPatch. The workspace cuts it in two around the series: the own
# patches with postPatch switched off, and postPatch alone on top of the series, so that its
# tree is patchPhase's (a postPatch that rewrites what a series patch touched, as ORT's
# substituteInPlace on cmake files may, sees the patched file, as in `nix build`) while each
# series patch stays a commit of its own that can be edited and re-applied. The price: a new
# series re-runs postPatch (workspace.update), which is cheap next to the build.
OWN_PATCHES = (
    PRELUDE + 'cd "$2"; patches="$3"; postPatch=""; unset -f postPatch; runPhase patchPhase'
)
POST_PATCH = PRELUDE + 'cd "$2"; patches=""; prePatch=""; unset -f prePatch; runPhase patchPhase'
PATCH_AS_IS = PRELUDE + 'cd "$2"; runPhase patchPhase'
CONFIGURE = PRELUDE + 'cd "$2"; runPhase configurePhase; pwd > "$3"'
# The build tool in the recorded environment: only the exported variables, no functions.
RUN_IN_ENV = 'source "$1" || exit 1; shift; exec "$@"'
OWN_SUBJECT = "nixpkgs: the derivation's own patches"
POST_PATCH_SUBJECT = "nixpkgs: the derivation's postPatch"
# The layers, lowest first: the source, the own patches, postPatch (what each is made from:
# dev_env.SOURCE_INPUTS, OWN_PATCH_INPUTS, POST_PATCH_INPUTS).
LAYERS = ("source", "own", "post_patch")


class PhaseError(WorkbenchError):
    """A phase of the derivation failed in the workspace; its output is in the build log."""

    def __init__(self, message: str, phase: str = "") -> None:
        super().__init__(message)
        self.phase = phase


def in_env_argv(root: Path, argv: list[str]) -> list[str]:
    """`argv` run in the recorded environment (env-build.sh sourced first)."""
    return [
        "bash",
        "--norc",
        "--noprofile",
        "-c",
        RUN_IN_ENV,
        "workbench-iterate-env",
        str(root / dev_env.BUILD_ENV),
        *argv,
    ]


def build_tool_argv(build: Path, jobs: int, *targets: str) -> list[str]:
    """The build phase's tool, incremental: ninja when CMake generated for it, else make."""
    tool = "ninja" if (build / "build.ninja").is_file() else "make"
    return [tool, "-C", str(build), "-j", str(jobs), *targets]


def run_phase(script: str, *args: str, out: IO[str] | None = None) -> None:
    """One phase script in bash (args: env.sh, the directory, then its own); its output goes
    to `out` (this process's stdout by default: the build log under the supervisor)."""
    name = script.split("runPhase ", 1)[1].split(";", 1)[0]
    stream = out or sys.stdout
    print(f"workbench iterate: {name} in {args[1]}", file=stream, flush=True)
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script, "bash", *args],
        stdout=stream if out is not None else None,
        stderr=subprocess.STDOUT if out is not None else None,
    )
    if done.returncode != 0:
        raise PhaseError(f"{name} failed (exit {done.returncode}); its output is above", name)


def series_checksums(config_directory: Path) -> set[str]:
    """sha256 of every patch file of the series directory: how a series patch is told from
    nixpkgs' own in the derivation's `patches`."""
    from workbench.configs.paths import patches_dir

    directory = patches_dir(config_directory)
    return {sha256_of(path) for path in directory.glob("*") if path.is_file()}


def own_patches(env: dev_env.DevEnv, series: set[str]) -> list[str]:
    """The derivation's patches that are not series patches, in order."""
    own = []
    for patch in env.words("patches"):
        path = Path(patch)
        if path.is_file() and sha256_of(path) in series:
            continue
        own.append(patch)
    return own


def unpack_into(root: Path, into: Path) -> tuple[str, int]:
    """unpackPhase in ROOT/unpack, its sourceRoot moved to `into`: (sourceRoot, files)."""
    unpack_directory = root / "unpack"
    shutil.rmtree(unpack_directory, ignore_errors=True)
    unpack_directory.mkdir()
    record = root / "unpack.sourceRoot"
    run_phase(UNPACK, str(root / dev_env.ENV_SCRIPT), str(unpack_directory), str(record))
    source_root = record.read_text().strip()
    unpacked = (unpack_directory / source_root).resolve()
    if not source_root or not unpacked.is_dir() or unpack_directory not in unpacked.parents:
        raise PhaseError(f"unpackPhase left sourceRoot {source_root!r}, not a directory")
    unpacked.rename(into)
    shutil.rmtree(unpack_directory, ignore_errors=True)
    record.unlink()
    return source_root, sum(len(files) for _, _, files in os.walk(into))


def own_patches_step(root: Path, own: list[str], made: dict[str, str]) -> Step:
    """The commit of the derivation's own patches (and prePatch), postPatch switched off;
    its hash goes to made["commit"]."""

    def step(git: Git) -> str:
        before = git.untracked()
        run_phase(OWN_PATCHES, str(root / dev_env.ENV_SCRIPT), str(git.tree), " ".join(own))
        names = "\n".join(f"  {Path(patch).name}" for patch in own) or "  (none)"
        made["commit"] = git.commit_changes(
            f"{OWN_SUBJECT}\n\nApplied by the derivation's patchPhase (with its prePatch), "
            f"before the series:\n{names}\n\n{TRAILER_UPSTREAM}: {OWN_PATCHES_NOTE}\n",
            before,
        )
        return made["commit"]

    return step


def post_patch_step(root: Path, quiet: bool = False) -> Step:
    """The commit of the derivation's postPatch, run on top of the series as patchPhase runs
    it after all the patches (see POST_PATCH). `quiet`: its output is kept out of the
    terminal (a cycle's preparation, which the TUI runs too), and its end is in the error
    when it fails."""

    def step(git: Git) -> str:
        before = git.untracked()
        script = str(root / dev_env.ENV_SCRIPT)
        if not quiet:
            run_phase(POST_PATCH, script, str(git.tree))
        else:
            import tempfile

            with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
                try:
                    run_phase(POST_PATCH, script, str(git.tree), out=out)
                except PhaseError as failure:
                    out.seek(0)
                    said = "\n".join(out.read().splitlines()[-20:])
                    failed = str(failure).replace("; its output is above", "")
                    raise PhaseError(
                        f"postPatch: {failed}; its output ends:\n{said}", "patchPhase"
                    ) from None
        return git.commit_changes(
            f"{POST_PATCH_SUBJECT}\n\nRun by the derivation's patchPhase after all the "
            "patches, the series included; run again whenever the series changes.\n\n"
            f"{TRAILER_UPSTREAM}: {POST_PATCH_NOTE}\n",
            before,
        )

    return step


def series_step(patch: WantedPatch) -> Step:
    def step(git: Git) -> str:
        return apply_as_commit(git, patch)

    return step


def layer_inputs(env: dev_env.DevEnv, own: list[str]) -> dict[str, dict[str, str]]:
    """What each layer of the source is made from now: a digest to compare, and what a person
    is shown when it changed."""

    def digest(names: tuple[str, ...], *extra: str) -> str:
        parts = [json.dumps([env.value(name), env.functions.get(name)]) for name in names]
        return hashlib.sha256("\0".join([*parts, *extra]).encode()).hexdigest()

    return {
        "source": {"digest": digest(dev_env.SOURCE_INPUTS), "shown": str(env.value("src") or "")},
        "own": {
            "digest": digest(dev_env.OWN_PATCH_INPUTS, *own),
            "shown": ", ".join(Path(patch).name for patch in own) or "none",
        },
        "post_patch": {"digest": digest(dev_env.POST_PATCH_INPUTS), "shown": ""},
    }


# Per layer: what changed when its shown value (src's path, the own patches' names) differs,
# and what changed when only the rest of its inputs did.
_LAYER_CHANGED = {
    "source": (
        "src changed",
        "how the source is unpacked changed (sourceRoot, unpackPhase or its hooks)",
    ),
    "own": (
        "nixpkgs' own patches changed",
        "nixpkgs' own patches changed (their contents, prePatch or patchFlags)",
    ),
    "post_patch": ("postPatch changed", "postPatch changed"),
}


def layer_changes(
    recorded: dict[str, Any] | None, now: dict[str, dict[str, str]]
) -> tuple[str | None, list[str]]:
    """The lowest layer to make again (None: none) and why, in words."""
    if not recorded:
        return "own", [
            "the workspace was made with postPatch before the series; patchPhase runs it after "
            "all the patches, so its layers are made again in that order"
        ]
    lowest = None
    reasons = []
    for layer in LAYERS:
        before, after = recorded.get(layer) or {}, now[layer]
        if before.get("digest") == after["digest"]:
            continue
        lowest = lowest or layer
        named, otherwise = _LAYER_CHANGED[layer]
        shown = (before.get("shown"), after["shown"])
        reasons.append(f"{named} ({shown[0]} -> {shown[1]})" if shown[0] != shown[1] else otherwise)
    return lowest, reasons


def make_source(
    paths: WorkspacePaths,
    state: dict[str, Any],
    env: dev_env.DevEnv,
    config_directory: Path,
    wanted: list[WantedPatch],
) -> None:
    """The working copy: unpackPhase, nixpkgs' own patches as one commit, the series (one
    commit per patch), postPatch as the last commit. What it was made from goes to `state`,
    saved before the series (a patch that does not apply leaves a working copy that the
    next cycle goes on from, workspace.update, not one iterate disowns)."""
    root = paths.root
    own = own_patches(env, series_checksums(config_directory))
    pristine: dict[str, str] = {}
    made: dict[str, str] = {}

    def unpack(into: Path) -> int:
        pristine["source_root"], count = unpack_into(root, into)
        return count

    def nixpkgs_commit(git: Git) -> str:
        pristine["commit"] = git.head()
        return own_patches_step(root, own, made)(git)

    src = env.value("src") or "(the derivation's src)"
    base = create(paths, unpack, f"unpackPhase of {src}", print, nixpkgs_commit)
    state["pristine_commit"] = pristine.get("commit", "")
    state["upstream_commit"] = base
    state["layers"] = layer_inputs(env, own)
    state["created"] = time.time()
    save_state(paths, state)
    git = Git(paths.src)
    apply_series(git, wanted)
    post_patch_step(root)(git)


def sync_source(
    paths: WorkspacePaths,
    state: dict[str, Any],
    env: dev_env.DevEnv,
    config_directory: Path,
    wanted: list[WantedPatch],
) -> list[str]:
    """Make again the layers of the source that the derivation changed since the workspace was
    made from it (its `src`, its own patches or prePatch, its postPatch: none of them feeds
    configure, so nothing else would notice), keeping the series commits and the user's
    uncommitted edits (a commit of the user's own is refused, naming it). Returns why (empty:
    nothing changed)."""
    own = own_patches(env, series_checksums(config_directory))
    now = layer_inputs(env, own)
    lowest, reasons = layer_changes(state.get("layers"), now)
    if lowest is None:
        return []
    try:
        return _remake_layers(paths, state, env, wanted, own, now, lowest, reasons)
    except WorkbenchError as exc:  # the next cycle tries again (failed_phase), and says so
        raise PhaseError(f"making the source again failed: {exc}", "patchPhase") from None


def _remake_layers(
    paths: WorkspacePaths,
    state: dict[str, Any],
    env: dev_env.DevEnv,
    wanted: list[WantedPatch],
    own: list[str],
    now: dict[str, dict[str, str]],
    lowest: str,
    reasons: list[str],
) -> list[str]:
    root = paths.root
    git = Git(paths.src)
    history = read_history(git, state["upstream_commit"])
    history.refuse_others(git, "the derivation's source changed (" + "; ".join(reasons) + ")")
    print(
        "workbench iterate: making the source again from its "
        + {"source": "unpackPhase", "own": "own patches", "post_patch": "postPatch"}[lowest]
        + ", because "
        + "; ".join(reasons),
        flush=True,
    )
    made: dict[str, str] = {}
    steps = [
        own_patches_step(root, own, made),
        *(series_step(patch) for patch in wanted),
        post_patch_step(root),
    ]
    pristine = state["pristine_commit"]
    if lowest == "source":
        partial = paths.partial
        shutil.rmtree(partial, ignore_errors=True)
        try:
            unpack_into(root, partial)
            pristine = git.commit_directory(
                partial,
                f"upstream source\n\nThe pristine source, before any patch of the series.\n\n"
                f"{TRAILER_UPSTREAM}: unpackPhase of {env.value('src')}\n",
            )
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        base = pristine
    elif lowest == "own":
        base = pristine
    else:
        base = history.patches[-1].commit if history.patches else state["upstream_commit"]
        steps = steps[-1:]
    rebuild_from(git, base, steps)
    state["pristine_commit"] = pristine
    state["upstream_commit"] = made.get("commit", state["upstream_commit"])
    state["layers"] = now
    state["source_remade"] = {"at": time.time(), "reasons": reasons}
    save_state(paths, state)
    return reasons


def configure(paths: WorkspacePaths, state: dict[str, Any], env: dev_env.DevEnv) -> Path:
    """configurePhase from a fresh cache; the build directory it left."""
    src = paths.src
    previous = state.get("build_dir")
    if previous:
        cache = Path(previous) / "CMakeCache.txt"
        if cache.is_file():
            cache.unlink()  # a value CMake read once (CXXFLAGS) must not outlive its source
    record = paths.root / "configure.pwd"
    run_phase(CONFIGURE, str(paths.root / dev_env.ENV_SCRIPT), str(src), str(record))
    build = Path(record.read_text().strip())
    record.unlink()
    _exclude(src, build)
    return build


def _exclude(src: Path, build: Path) -> None:
    """The build directory (inside the source, as the cmake hook makes it) is no change to
    the source: git leaves it out."""
    try:
        relative = build.resolve().relative_to(src.resolve())
    except ValueError:
        return
    exclude = src / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    line = f"/{relative.as_posix()}/"
    lines = exclude.read_text().splitlines() if exclude.is_file() else []
    if line not in lines:
        exclude.write_text("\n".join([*lines, line]) + "\n")


def run(args: argparse.Namespace) -> list[str]:
    """Steps 1-3; the build tool's argv (step 4) is returned for the caller to exec.

    A phase that fails is named in workspace.json (`failed_phase`): the summary says so, and
    the next cycle runs the phases again instead of the build tool alone."""
    paths = WorkspacePaths(Path(args.root))
    try:
        return _run(args, paths)
    except PhaseError as exc:
        state = load_state(paths)
        state["failed_phase"] = {"phase": exc.phase, "at": time.time()}
        save_state(paths, state)
        raise


def _run(args: argparse.Namespace, paths: WorkspacePaths) -> list[str]:
    from workbench.configs.matrix import load_matrix
    from workbench.iterate.workspace import wanted_patches
    from workbench.patches.series import load_series

    root = paths.root
    state = load_state(paths)
    failed = (state.pop("failed_phase", None) or {}).get("phase")
    origin = origin_of(args)
    env_json = root / dev_env.ENV_JSON
    if args.refresh or not env_json.is_file():
        print(f"workbench iterate: recording the environment of {origin.label}", flush=True)
        env = dev_env.record(root, origin)
        state["drv_path"] = args.drv_path or dev_env.drv_path(origin)
        state["flake_fingerprint"] = args.fingerprint or state.get("flake_fingerprint")
        state["env_recorded"] = time.time()
        save_state(paths, state)
    else:
        env = dev_env.load(env_json)
    config = Path(args.config)
    if not (paths.src / ".git").is_dir():
        wanted = wanted_patches(load_series(config, load_matrix(config)), args.target)
        make_source(paths, state, env, config, wanted)
    elif state.get("upstream_commit"):
        wanted = wanted_patches(load_series(config, load_matrix(config)), args.target)
        sync_source(paths, state, env, config, wanted)
    inputs = env.configure_inputs()
    configured = state.get("configured") or {}
    reasons = []
    build_dir = state.get("build_dir")
    if not configured:
        reasons.append("the workspace is new")
    elif failed == "configurePhase":
        reasons.append("configurePhase failed last time")
        reasons += dev_env.changed_inputs(configured.get("inputs") or {}, inputs)
    elif not build_dir or not any(
        (Path(build_dir) / name).is_file() for name in ("build.ninja", "Makefile")
    ):
        reasons.append("the build directory has no build files")
    else:
        reasons += dev_env.changed_inputs(configured.get("inputs") or {}, inputs)
    if reasons:
        print("workbench iterate: configuring, because " + "; ".join(reasons), flush=True)
        build = configure(paths, state, env)
        state["build_dir"] = str(build)
        state["configured"] = {"at": time.time(), "reasons": reasons, "inputs": inputs}
        save_state(paths, state)
    else:
        print("workbench iterate: configure inputs unchanged (configure not run)", flush=True)
    return in_env_argv(root, build_tool_argv(Path(state["build_dir"]), args.jobs))


def origin_of(args: argparse.Namespace) -> dev_env.Origin:
    """The derivation the arguments name (session._origin_arguments writes them)."""
    if args.package_file:
        return dev_env.Origin(
            args.attr, package_file=Path(args.package_file), nixpkgs_rev=args.nixpkgs_rev or ""
        )
    return dev_env.Origin(args.attr, flake=Path(args.flake))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.iterate.phases")
    parser.add_argument("root")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--flake")
    where.add_argument("--package-file", help="a Flox package file (.flox/pkgs/NAME.nix)")
    parser.add_argument("--nixpkgs-rev", help="the pin a Flox file is called with")
    parser.add_argument("--attr", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--refresh", action="store_true")
    parser.add_argument("--drv-path")
    parser.add_argument("--fingerprint")
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="stop before the build tool: the workspace made and configured, nothing built",
    )
    args = parser.parse_args(argv)
    try:
        build = run(args)
    except WorkbenchError as exc:
        print(f"workbench: error: {exc}", file=sys.stderr, flush=True)
        return 2
    if args.no_build:
        print(f"workbench iterate: not building (--no-build): {' '.join(build[7:])}", flush=True)
        return 0
    print(f"workbench iterate: building: {' '.join(build[7:])}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(build[0], build)
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
