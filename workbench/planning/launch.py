"""The argv of a build, always a list: `nix build`, `flox build`, or any command to supervise.

Every name that reaches a command line is checked first: a variant against the matrix (unknown
names get the matrix's suggestions), a flavour by name or flake attribute, and the result
against a plain-name pattern, so nothing can smuggle an option or a second argument in.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import platform
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.artefacts.out_links import out_link_name
from workbench.errors import WorkbenchError
from workbench.history.records import NewBuild
from workbench.planning.shell_command import display as display  # re-exported: imported from here

if TYPE_CHECKING:  # `workbench run` needs none of the matrix and settings machinery
    from workbench.configs.matrix import Flavour, Matrix
    from workbench.configs.settings import BuildSettings
    from workbench.configs.variants import Variant

# Flake attributes, Flox package names and --name values: no leading dash (an option), no
# spaces, slashes, quotes or shell characters.
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")
NIX_FEATURES = "nix-command flakes"
BACKENDS = ("nix", "flox")


class LaunchError(WorkbenchError):
    """A build cannot be launched as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Target:
    """What `workbench build NAME` builds: a variant of the matrix or a linkage flavour."""

    name: str
    """The history's name for it: the variant name, or the flavour's name ("cuda-dyn")."""
    attr: str
    """The flake package: the variant name, or the flavour's attribute ("onnxruntime-cuda-dyn")."""
    variant: Variant | None
    flavour: Flavour | None
    ort_version: str = ""
    """The ONNX Runtime release it builds (configs/releases.toml); names of releases other
    than the pin's carry it (`cpu-ort1_24_2`, `onnxruntime-cpu-ort1_24_2`)."""

    @property
    def base_name(self) -> str:
        """The name without the release: the series' and the seeds' name."""
        if self.flavour is not None:
            return self.flavour.name
        return self.variant.base_name if self.variant is not None else self.name

    @property
    def cuda(self) -> bool:
        """Whether it compiles CUDA (nvcc jobs, with their much larger memory)."""
        if self.variant is not None:
            return self.variant.is_gpu
        return bool(self.flavour and self.flavour.cuda)


def resolve_target(name: str, matrix: Matrix, ort: str | None = None) -> Target:
    """The variant or flavour called `name` of ONNX Runtime `ort` (default: the release the
    name carries, else the pin's); unknown names get the nearest known ones."""
    from workbench.configs.releases import UnknownReleaseError
    from workbench.configs.variants import UnknownVariantError, parse

    try:
        base, named = matrix.releases.split_name(name) if matrix.releases else (name, None)
        if named is not None and ort is not None and named.version != ort:
            raise LaunchError(f"{name!r} is ONNX Runtime {named.version}, but --ort says {ort}")
        release = matrix.release(ort or (named.version if named else None))
    except UnknownReleaseError as error:
        raise LaunchError(str(error)) from None
    try:
        flavour = matrix.flavour(base)
    except KeyError:
        flavour = None
    if flavour is not None:
        problem = release.flavour_problem(flavour.name)
        if problem:
            raise LaunchError(f"{flavour.name}{release.suffix} cannot be built: {problem}")
        return Target(
            flavour.name + release.suffix,
            _checked(flavour.attr + release.suffix, "flake attribute"),
            None,
            flavour,
            release.version,
        )
    try:
        variant = parse(base, matrix, release.version)
    except UnknownVariantError as exc:
        flavour_names = [f.name for f in matrix.flavours] + [f.attr for f in matrix.flavours]
        near = exc.suggestions or difflib.get_close_matches(name, flavour_names, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise LaunchError(
            f"unknown variant {name!r}: {exc.reason}{hint} (flavours: "
            f"{', '.join(f.name for f in matrix.flavours)}; `workbench variants` lists all)"
        ) from None
    from workbench.planning.availability import of_variant

    # Nothing can force a build the nixpkgs pin cannot evaluate: say why, and what instead.
    said = of_variant(variant, matrix)
    if not said.evaluates:
        raise LaunchError(
            f"{variant.name} cannot be built: {said.reason}; build {said.instead} instead"
        )
    return Target(
        variant.name, _checked(variant.name, "variant name"), variant, None, release.version
    )


def release_notes(target: Target, series_directory: Path | None) -> list[str]:
    """What a user should know before a build of `target`'s release starts: what it is, and
    each enabled patch of the series that this release goes without (its `releases`)."""
    from workbench.errors import WorkbenchError
    from workbench.patches.series import load_series

    if not target.ort_version:
        return []
    notes = []
    if series_directory is not None and (series_directory / "matrix.toml").is_file():
        try:
            series = load_series(series_directory)
        except WorkbenchError:
            series = None
        if series is not None:
            for patch in series.left_out_at(target.name, target.ort_version):
                written = ", ".join(patch.releases or ())
                notes.append(
                    f"patch {patch.name} is written for ONNX Runtime {written}, not "
                    f"{target.ort_version}: this build goes without it (patches/series.toml "
                    f"`releases`; `workbench patches check --ort {target.ort_version} --source "
                    f"DIR` checks whether it applies)"
                )
    return notes


def _checked(name: str, what: str) -> str:
    if not PLAIN_NAME.match(name):
        raise LaunchError(
            f"{name!r} is not a usable {what}: letters, digits and . _ + - only, not starting "
            "with a dash"
        )
    return name


def check_name(name: str) -> str:
    """A `--name` for the history, checked (the same rule as flake attributes)."""
    return _checked(name, "build name")


def host_platform() -> str:
    """This machine's Nix system ("x86_64-linux", "aarch64-linux")."""
    machine = platform.machine()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)
    return f"{machine}-linux"


def target_problems(target: Target) -> list[str]:
    """Why a target cannot build on this host (wrong platform, toolkit too old), if it cannot."""
    problems: list[str] = []
    if target.variant is not None:
        here = host_platform()
        if target.variant.platform != here:
            problems.append(
                f"{target.name} is built on {target.variant.platform}; this host is {here}, "
                "where the flake does not offer it"
            )
        if target.variant.caveat:
            problems.append(f"{target.name}: {target.variant.caveat}")
    return problems


def nix_build_argv(attr: str, cores: int, max_jobs: int, out_link: str | None = None) -> list[str]:
    """`nix build .#ATTR` with the log format the supervisor parses and the given parallelism.

    `out_link` (result-NAME) is where the result goes, as `flox build NAME` leaves it, so the
    rest of the loop (smoke, env, layout) finds a target's result whichever backend built it.

    `-L` must come before `--log-format internal-json`: Nix 2.8's `-L` resets the log format.
    `--cores` reaches the builder as NIX_BUILD_CORES (ninja's -j) and never changes the
    derivation's hash, so changing it never forces a rebuild.
    """
    _checked(attr, "flake attribute")
    if cores < 1 or max_jobs < 1:
        raise LaunchError(f"--jobs and --max-jobs must be at least 1 (got {cores}, {max_jobs})")
    return [
        "nix",
        "--extra-experimental-features",
        NIX_FEATURES,
        "build",
        f".#{attr}",
        "-L",
        "--log-format",
        "internal-json",
        "--cores",
        str(cores),
        "--max-jobs",
        str(max_jobs),
        *(["--out-link", _checked(out_link, "out-link")] if out_link else []),
    ]


def flox_build_argv(name: str, cores: int | None = None, max_jobs: int | None = None) -> list[str]:
    """`flox build NAME`: a Nix-expression package of the Flox environment (.flox/pkgs).

    `flox build` takes no job count, but the Nix it runs reads NIX_CONFIG: the jobs reach the
    build as `cores` (NIX_BUILD_CORES, ninja's -j) and `max-jobs` that way, appended to any
    NIX_CONFIG the user has."""
    argv = ["flox", "build", _checked(name, "Flox package name")]
    if cores is None and max_jobs is None:
        return argv
    settings = [os.environ.get("NIX_CONFIG", "").strip()]
    settings += [f"cores = {cores}"] if cores is not None else []
    settings += [f"max-jobs = {max_jobs}"] if max_jobs is not None else []
    return ["env", "NIX_CONFIG=" + "\n".join(line for line in settings if line), *argv]


def find_checkout(directory: Path) -> Path:
    """The checkout a directory belongs to: the nearest folder above with `.git`, else itself.

    The per-checkout build lock is keyed by this path, so `run` from a subdirectory of a
    checkout that is already building is refused like a second build of the checkout.
    """
    resolved = directory.resolve()
    for candidate in (resolved, *resolved.parents):
        if (candidate / ".git").exists():
            return candidate
    return resolved


# Options that name the tree a build command writes, per program: `ninja -C DIR`,
# `make -C DIR` / `--directory=DIR`, `cmake --build DIR` / `-B DIR`, ORT's `build.sh
# --build_dir DIR` (build.py's option).
_TREE_OPTIONS = {
    "ninja": ("-C",),
    "make": ("-C", "--directory"),
    "gmake": ("-C", "--directory"),
    "cmake": ("--build", "-B"),
    "build.sh": ("--build_dir",),
    "build.py": ("--build_dir",),
}
# Programs that run the next argument as the command (`env A=1 ninja`, `nice -n 5 make`).
_WRAPPERS = ("env", "nice", "time", "ionice", "taskset", "chrt", "stdbuf", "ccache")


def _named_trees(argv: Sequence[str]) -> list[str]:
    """The directories a command's own options name as its build tree."""
    start = _program_start(argv)
    if start >= len(argv):
        return []
    program = os.path.basename(argv[start])
    if program in ("python", "python3") and start + 1 < len(argv):
        program = os.path.basename(argv[start + 1])
    options = _TREE_OPTIONS.get(program, ())
    found: list[str] = []
    rest = list(argv[start + 1 :])
    for index, arg in enumerate(rest):
        for option in options:
            if arg == option and index + 1 < len(rest):
                found.append(rest[index + 1])
            elif arg.startswith(option + "=") and arg != option + "=":
                found.append(arg.partition("=")[2])
            elif option == "-C" and arg.startswith("-C") and len(arg) > 2:
                found.append(arg[2:])
    return found


# A flake installable's attribute: `.#onnxruntime-cpu`, `/src/builder#cuda-dyn`, `nixpkgs#hello`.
_INSTALLABLE = re.compile(r"^[^-\s][^\s#]*#([A-Za-z0-9_][A-Za-z0-9._+-]{0,199})$")
NIX_TARGET_KEY = "the Nix target "
# `nix build` options whose value (or second value) could look like an installable.
_NIX_VALUED_OPTIONS: tuple[str, ...]
_NIX_VALUED_OPTIONS = ("--builders", "--store", "--eval-store", "--out-link", "-o", "--expr")
_NIX_VALUED_OPTIONS += ("--file", "-f", "--include", "-I", "--reference-lock-file")
_NIX_TWO_VALUED_OPTIONS = ("--option", "--override-input", "--arg", "--argstr")


def _program_start(argv: Sequence[str]) -> int:
    """Where the program proper starts after wrappers (`env A=1`, `nice -n 5`, `taskset 0x3`)."""
    start = 0
    while start < len(argv) and (
        os.path.basename(argv[start]) in _WRAPPERS
        or "=" in argv[start]
        or (start > 0 and argv[start].startswith("-"))
        or (start > 0 and re.fullmatch(r"[0-9][0-9a-fx,-]*", argv[start]) is not None)
    ):
        start += 1
    return start


def nix_targets(argv: Sequence[str]) -> list[str]:
    """The flake attributes a `nix build` (or `flox build NAME`) command builds.

    Nix locks a derivation's outputs itself, so two builds of one derivation never write the
    same store path, and a builder's directory (/tmp/nix-build-NAME.drv-N) is new for every
    build: neither is a tree a second build could spoil. What a user must not get is a second
    build of a target that silently waits on Nix's lock ("waiting for lock on ...") behind a
    build nobody follows any more, or one started beside an orphaned builder of the same
    derivation after its Nix (and so Nix's lock) is gone. So a Nix build is also keyed on its
    target, whichever flake directory it is built from."""
    start = _program_start(argv)
    if start + 1 >= len(argv):
        return []
    program = os.path.basename(argv[start])
    rest = list(argv[start + 1 :])
    if program == "flox":
        if "build" not in rest:
            return []
        after = rest[rest.index("build") + 1 :]
        return [arg for arg in after if PLAIN_NAME.match(arg)][:1]
    if program == "nix-build":
        return [rest[i + 1] for i, arg in enumerate(rest[:-1]) if arg in ("-A", "--attr")]
    if program != "nix" or "build" not in rest:
        return []
    after = rest[rest.index("build") + 1 :]
    return [
        found.group(1)
        for index, arg in enumerate(after)
        if (found := _INSTALLABLE.match(arg)) is not None
        and "://" not in arg
        and not (index > 0 and after[index - 1] in _NIX_VALUED_OPTIONS)
        and not (index > 1 and after[index - 2] in _NIX_TWO_VALUED_OPTIONS)
    ]


def build_trees(argv: Sequence[str], cwd: str | Path, checkout: str | None = None) -> list[str]:
    """Every tree a build works in, for its locks: its checkout, the build tree its command
    names (`ninja -C DIR`...) and that tree's checkout, in that order, without repeats; and
    for a Nix build, its targets ("the Nix target ATTR": `nix_targets` says why)."""
    here = Path(cwd)
    trees = [checkout or str(find_checkout(here))]
    for named in _named_trees(argv):
        directory = (here / os.path.expanduser(named)).resolve()
        trees += [str(directory), str(find_checkout(directory))]
    trees += [NIX_TARGET_KEY + attr for attr in nix_targets(argv)]
    return list(dict.fromkeys(trees))


def default_flake_directory(config_directory: Path) -> Path:
    """The flake beside the configs (their checkout), else the checkout this package runs from;
    the installed package's own defaults are no flake to build in (ConfigError saying how to
    get a checkout: `workbench init DIR`)."""
    from workbench.configs.paths import needs_checkout, repo_root

    needs_checkout(config_directory, "building")
    beside = config_directory.resolve().parent
    if (beside / "flake.nix").is_file():
        return beside
    if (repo_root() / "flake.nix").is_file():
        return repo_root()
    from workbench.errors import ConfigError

    raise ConfigError(
        f"{config_directory}: no flake.nix beside this config directory to build with; "
        "`workbench init DIR` writes a checkout (flake, nix/, configs/, patches/), or pass "
        "--directory FLAKE"
    )


def jobs_in_argv(argv: Sequence[str]) -> int | None:
    """The parallel jobs a command asks for (`ninja -j4`, `make -j 8`, `build.sh --parallel 8`,
    `nix build --cores 8`), for the history's label; None when it does not say."""
    found: int | None = None
    for index, arg in enumerate(argv):
        value: str | None = None
        if arg in ("-j", "--jobs", "--parallel", "--cores") and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("-j") and arg[2:].isdigit():
            value = arg[2:]
        elif arg.startswith(("--jobs=", "--parallel=", "--cores=")):
            value = arg.partition("=")[2]
        if value is not None and value.isdigit() and int(value) > 0:
            found = int(value)
    return found


def eta_key(backend: str, name: str, settings: dict[str, Any]) -> str:
    """Builds with the same key take comparable time: same target, same settings."""
    kept = {key: value for key, value in settings.items() if key != "jobs_source"}
    text = json.dumps([backend, name, kept], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_settings_record(
    settings: BuildSettings,
    jobs: int,
    max_jobs: int,
    source: str,
    patches: list[str],
    ort_version: str = "",
) -> dict[str, Any]:
    """The settings a `workbench build` ran with, as the history keeps them (with the ONNX
    Runtime release it built, when known)."""
    release = {"ort_version": ort_version} if ort_version else {}
    return {
        **release,
        "jobs": jobs,
        "jobs_source": source,
        "max_jobs": max_jobs,
        "nvcc_threads": settings.nvcc_threads,
        "cuda_architectures": list(settings.cuda_architectures),
        "optimization_flags": list(settings.optimization_flags),
        "ccache": settings.ccache,
        "patches": patches,
    }


def series_patches(flake: Path, target: Target) -> list[str]:
    """The patches the flake in `flake` applies to `target`, in order (from its
    patches/series.toml); empty when that flake has no series the workbench can read."""
    from workbench.errors import WorkbenchError
    from workbench.patches.series import load_series

    if not (flake / "configs" / "matrix.toml").is_file():
        return []
    try:
        series = load_series(flake / "configs")
        return [patch.name for patch in series.applied_to(target.name, target.ort_version or None)]
    except WorkbenchError:
        return []


def plan_build(
    target: Target,
    backend: str,
    directory: Path,
    settings: BuildSettings,
    jobs: int,
    max_jobs: int,
    jobs_source: str,
    forced: bool = False,
) -> NewBuild:
    """The build `workbench build` starts: argv, directory and the settings it records."""
    if backend == "nix":
        if not (directory / "flake.nix").is_file():
            raise LaunchError(
                f"{directory}: no flake.nix there; pass the builder flake's directory with "
                "--directory DIR"
            )
        argv = nix_build_argv(target.attr, jobs, max_jobs, out_link_name(target.attr))
        patches = series_patches(directory, target)
        recorded = build_settings_record(
            settings, jobs, max_jobs, jobs_source, patches, target.ort_version
        )
        count: int | None = jobs
    elif backend == "flox":
        package = directory / ".flox" / "pkgs" / f"{target.attr}.nix"
        if not package.is_file():
            raise LaunchError(
                f"{package}: no such Flox package; `workbench flox sync"
                + (f" --ort {target.ort_version}" if target.name != target.base_name else "")
                + "` writes .flox/ from "
                "configs/ (then `git add .flox`: Flox sees tracked files only)"
            )
        argv = flox_build_argv(target.attr, jobs, max_jobs)
        patches = series_patches(directory, target)
        recorded = build_settings_record(
            settings, jobs, max_jobs, jobs_source, patches, target.ort_version
        )
        count = jobs
    else:
        raise LaunchError(f"unknown backend {backend!r}; backends: {', '.join(BACKENDS)}")
    resolved = directory.resolve()
    return NewBuild(
        name=target.name,
        backend=backend,
        argv=tuple(argv),
        cwd=str(resolved),
        checkout=str(find_checkout(resolved)),
        settings=recorded,
        eta_key=eta_key(backend, target.name, recorded),
        nix=backend == "nix",
        variant=target.variant.name if target.variant else None,
        target=target.attr,
        jobs=count,
        forced=forced,
    )


def plan_run(argv: Sequence[str], name: str | None, cwd: Path, forced: bool = False) -> NewBuild:
    """Any build command (`./build.sh --parallel 8`, `ninja -C build`, `make -j8`) to supervise."""
    command = [arg for arg in argv]
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise LaunchError(
            "no command to run; usage: workbench run [--name NAME] -- CMD ARGS... "
            "(e.g. `workbench run -- ninja -C build`)"
        )
    program = command[0]
    if shutil.which(program, path=os.environ.get("PATH")) is None and not (
        os.sep in program and os.access(cwd / program, os.X_OK)
    ):
        raise LaunchError(
            f"{program}: command not found (searched PATH and {cwd}); check its name, or give "
            "its path"
        )
    label = check_name(name) if name else _default_name(program)
    resolved = cwd.resolve()
    recorded = {"argv": command, "cwd": str(resolved)}
    # The checkout a build works in: the one of the tree its command names (`ninja -C DIR`),
    # else the one it runs in. Two builds of two build directories started from one shell are
    # two builds of two trees: locking the shell's checkout refused the second (`--force`).
    named = _named_trees(command)
    tree = (resolved / os.path.expanduser(named[0])).resolve() if named else resolved
    return NewBuild(
        name=label,
        backend="run",
        argv=tuple(command),
        cwd=str(resolved),
        checkout=str(find_checkout(tree)),
        settings=recorded,
        eta_key=eta_key("run", label, recorded),
        nix=os.path.basename(program) in ("nix", "nix-build"),
        jobs=jobs_in_argv(command),
        forced=forced,
    )


def _default_name(program: str) -> str:
    base = os.path.basename(program) or "build"
    cleaned = re.sub(r"[^A-Za-z0-9._+-]", "_", base).lstrip("-._+") or "build"
    return cleaned[:200]
