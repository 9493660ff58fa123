"""The derivation's own build environment, as `nix develop .#ATTR` gives it, recorded once.

`nix print-dev-env --json --profile ROOT/env-profile FLAKE#ATTR`, run in the workspace root,
builds the derivation's inputs (its compiler wrapper, cmake, abseil, protobuf, ... from the
store) and prints the environment its builder would see: variables and bash functions (the
phases). Nix rewrites `$out` to ROOT/outputs/out there, so the workspace's install prefix does
not change when the derivation does. The profile is a GC root: the inputs stay in the store.

Three files come of it, in the workspace root:

    env.json      Nix's JSON, what the workspace was made and configured with
    env.sh        `nix print-dev-env ./env-profile`: the bash script `nix develop` sources, for
                  the phases (unpackPhase, patchPhase, configurePhase)
    env-build.sh  only the exported variables (what the compiler wrapper reads), sourced before
                  each cycle's build tool: a few milliseconds, no Nix evaluation

What configure depends on (`configure_inputs`) is every variable and function of the
environment except those that only feed other phases (patches, postPatch, src, install...) or
that change on every evaluation; `changed_inputs` says which changed, word by word.

The derivation comes from a flake's package (`FLAKE#ATTR`) or from a Flox package file
(`.flox/pkgs/NAME.nix`): `Origin` gives Nix the one or the other. Flox calls such a file with
callPackage from a nixpkgs of its own choosing and builds the result (flox/flox
package-builder/flox-build.mk: `nix eval --file <nef> --argstr nixpkgs-url
$BUILDTIME_NIXPKGS_URL ... pkgs.NAME`, then `nix build DRV^*`; nef/default.nix imports that
nixpkgs and adds each .flox/pkgs file to it with callPackage). iterate does the same with
`--impure --expr`, taking the nixpkgs nix/flox-package.nix builds against: `<workbench-nixpkgs>`
when it is on the Nix search path, else the pin of configs/matrix.toml.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

NIX_FEATURES = "nix-command flakes"
ENV_JSON = "env.json"
ENV_SCRIPT = "env.sh"
BUILD_ENV = "env-build.sh"
PROFILE = "env-profile"
# nix develop's own list of variables it does not carry into the shell (Nix 2.8,
# src/nix/develop.cc `ignoreVars`): per-build or per-user values.
IGNORED = frozenset(
    {
        "BASHOPTS",
        "HOME",
        "NIX_BUILD_TOP",
        "NIX_ENFORCE_PURITY",
        "NIX_LOG_FD",
        "NIX_REMOTE",
        "PPID",
        "SHELLOPTS",
        "SSL_CERT_FILE",
        "TEMP",
        "TEMPDIR",
        "TERM",
        "TMP",
        "TMPDIR",
        "TZ",
        "UID",
    }
)
# Bash's own variables, which get-env.sh's `declare -p` dumps along with the derivation's.
BASH_OWN = frozenset(
    {
        "BASH",
        "BASHPID",
        "BASH_ARGC",
        "BASH_ARGV",
        "BASH_LINENO",
        "BASH_SOURCE",
        "BASH_VERSINFO",
        "BASH_VERSION",
        "COMP_WORDBREAKS",
        "DIRSTACK",
        "EPOCHREALTIME",
        "EPOCHSECONDS",
        "EUID",
        "FUNCNAME",
        "GROUPS",
        "HISTCMD",
        "HOSTNAME",
        "HOSTTYPE",
        "IFS",
        "LINENO",
        "MACHTYPE",
        "OLDPWD",
        "OPTERR",
        "OPTIND",
        "OSTYPE",
        "PIPESTATUS",
        "PS4",
        "PWD",
        "RANDOM",
        "SECONDS",
        "SHELL",
        "SHLVL",
        "SRANDOM",
        "_",
    }
)
# What each layer of the workspace's source is made from (iterate.phases remakes a layer when
# one of them changes): the source, nixpkgs' own patches, postPatch.
SOURCE_INPUTS = (
    "src",
    "srcs",
    "sourceRoot",
    "setSourceRoot",
    "unpackPhase",
    "preUnpack",
    "postUnpack",
    "dontUnpack",
)
OWN_PATCH_INPUTS = ("prePatch", "patchFlags", "patchPhase")
POST_PATCH_INPUTS = ("postPatch",)
# Variables that feed only the phases before configure or after the build, or that differ per
# invocation: a change to them never makes the workspace configure again.
NOT_CONFIGURE_INPUTS = frozenset(
    {
        "NIX_BUILD_CORES",
        "IN_NIX_SHELL",
        "patches",
        *SOURCE_INPUTS,
        *OWN_PATCH_INPUTS,
        *POST_PATCH_INPUTS,
        "installPhase",
        "preInstall",
        "postInstall",
        "installFlags",
        "fixupPhase",
        "preFixup",
        "postFixup",
        "checkPhase",
        "doCheck",
        "installCheckPhase",
        "doInstallCheck",
        "distPhase",
        "shellHook",
        "passthru",
        "meta",
    }
)


class DevEnvError(WorkbenchError):
    """Nix could not give the derivation's environment; the message has Nix's own words."""


def nix(*args: str) -> list[str]:
    """A `nix` command line with flakes on."""
    return ["nix", "--extra-experimental-features", NIX_FEATURES, *args]


def installable(flake: Path, attr: str) -> str:
    return f"{flake.resolve()}#{attr}"


FLOX_PACKAGES = (".flox", "pkgs")


@dataclass(frozen=True)
class Origin:
    """Where the derivation comes from: a flake's package, or a Flox package file (then
    `attr` is the attribute path inside what the file gives, "" for the file's own value)."""

    attr: str
    flake: Path | None = None
    package_file: Path | None = None
    nixpkgs_rev: str = ""
    """The pin the Flox file is called with when `<workbench-nixpkgs>` is not on the search
    path (nix/flox-package.nix's own fallback)."""

    @property
    def directory(self) -> Path:
        """What the evaluation reads: the flake, or the Flox environment (.flox's parent)."""
        if self.package_file is not None:
            return flox_environment(self.package_file)
        assert self.flake is not None
        return self.flake

    @property
    def label(self) -> str:
        """The derivation as a person reads it in a message."""
        if self.package_file is not None:
            return str(self.package_file) + (f" ({self.attr})" if self.attr else "")
        return f".#{self.attr}"

    def expression(self) -> str:
        """The Flox file called as Flox calls it (see the module's docstring)."""
        assert self.package_file is not None
        pinned = f"https://github.com/NixOS/nixpkgs/archive/{self.nixpkgs_rev}.tar.gz"
        selected = "".join(f".{nix_string(part)}" for part in self.attr.split(".") if part)
        return (
            "let local = builtins.tryEval <workbench-nixpkgs>; nixpkgs = if local.success then "
            f"local.value else builtins.fetchTarball {nix_string(pinned)}; "
            "pkgs = import nixpkgs { }; "
            f"in (pkgs.callPackage {nix_string(str(self.package_file))} {{ }}){selected}"
        )

    def installable(self, attribute: str = "") -> list[str]:
        """Nix's arguments naming the derivation (or one of its attributes: "drvPath")."""
        if self.package_file is not None:
            suffix = f".{attribute}" if attribute else ""
            return ["--impure", "--expr", f"({self.expression()}){suffix}"]
        assert self.flake is not None
        return [installable(self.flake, f"{self.attr}.{attribute}" if attribute else self.attr)]

    def to_json(self) -> dict[str, str | None]:
        return {
            "flake": str(self.flake) if self.flake else None,
            "attr": self.attr,
            "package_file": str(self.package_file) if self.package_file else None,
        }


def nix_string(text: str) -> str:
    """`text` as a Nix string literal (nothing in it interpolated)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    return f'"{escaped}"'


def flox_environment(package_file: Path) -> Path:
    """The Flox environment a package file belongs to: the directory holding .flox/pkgs/."""
    for parent in package_file.parents:
        if parent.name == FLOX_PACKAGES[1] and parent.parent.name == FLOX_PACKAGES[0]:
            return parent.parent.parent
    raise DevEnvError(
        f"{package_file} is not in a Flox environment's .flox/pkgs/ directory (`workbench flox "
        "sync` writes one file there per variant and flavour)"
    )


def flox_package_name(package_file: Path) -> str:
    """The package a .flox/pkgs file defines, as Flox names it: NAME.nix and NAME/default.nix
    are NAME (flox.dev/docs/concepts/nix-expression-builds, "Defining builds")."""
    pkgs = flox_environment(package_file) / Path(*FLOX_PACKAGES)
    relative = package_file.relative_to(pkgs)
    parts = list(relative.parts)
    if parts[-1] == "default.nix":
        parts.pop()
    else:
        parts[-1] = parts[-1].removesuffix(".nix")
    return ".".join(parts)


@dataclass(frozen=True)
class DevEnv:
    """Nix's JSON of a derivation's environment: variables and bash functions."""

    variables: dict[str, dict[str, Any]]
    functions: dict[str, str]

    @classmethod
    def from_json(cls, text: str) -> DevEnv:
        data = json.loads(text)
        return cls(dict(data.get("variables") or {}), dict(data.get("bashFunctions") or {}))

    def value(self, name: str) -> Any:
        entry = self.variables.get(name)
        return None if entry is None else entry.get("value")

    def words(self, name: str) -> list[str]:
        """A variable as a list: an array's items, or a string split on whitespace."""
        value = self.value(name)
        if value is None:
            return []
        if isinstance(value, list):
            return [str(item) for item in value]
        if isinstance(value, dict):
            return [str(item) for item in value.values()]
        return str(value).split()

    def exported(self) -> dict[str, str]:
        """The exported string variables a build tool runs with (nix develop's ignore list
        left out)."""
        return {
            name: str(entry.get("value"))
            for name, entry in self.variables.items()
            if entry.get("type") == "exported" and name not in IGNORED
        }

    def output_names(self) -> list[str]:
        return self.words("outputs") or ["out"]

    def configure_inputs(self) -> dict[str, str]:
        """What configure depends on: name (functions as `name()`) -> its value as text.

        The outputs (and `prefix`, made from `out`) are left out: in the JSON they are the
        `-env` derivation's store paths, new with every change, while the phases see them
        rewritten to ROOT/outputs/NAME (nix develop's rewriting), which never changes."""
        inputs: dict[str, str] = {}
        outputs = {*self.output_names(), "prefix"}
        for name, entry in self.variables.items():
            if name in IGNORED or name in BASH_OWN or name in NOT_CONFIGURE_INPUTS:
                continue
            if name in outputs:
                continue
            value = entry.get("value")
            inputs[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        for name, body in self.functions.items():
            if name not in NOT_CONFIGURE_INPUTS:
                inputs[f"{name}()"] = body
        return inputs


def load(path: Path) -> DevEnv:
    try:
        return DevEnv.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DevEnvError(
            f"{path}: the recorded environment cannot be read ({exc}); run iterate again with "
            "--refresh"
        ) from None


def record(root: Path, origin: Origin) -> DevEnv:
    """Build and record the environment of the derivation in `root` (env.json, env.sh,
    env-build.sh, the env-profile GC root). Nix's progress goes to this process's stderr."""
    root.mkdir(parents=True, exist_ok=True)
    argv = nix(
        "print-dev-env", "--json", "--profile", str(root / PROFILE), "-L", *origin.installable()
    )
    print(f"$ {shlex.join(argv)}", flush=True)
    done = subprocess.run(argv, cwd=root, stdout=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise DevEnvError(
            f"`nix print-dev-env {origin.label}` failed in {origin.directory} (exit "
            f"{done.returncode}); its output is above"
        )
    text = done.stdout.decode("utf-8", "surrogateescape")
    env = DevEnv.from_json(text)
    _write(root / ENV_JSON, text)
    script = subprocess.run(
        nix("print-dev-env", f"./{PROFILE}"), cwd=root, stdout=subprocess.PIPE, check=False
    )
    if script.returncode != 0:
        raise DevEnvError(f"`nix print-dev-env ./{PROFILE}` failed in {root}")
    _write(root / ENV_SCRIPT, script.stdout.decode("utf-8", "surrogateescape"))
    write_build_env(env, root / BUILD_ENV, root)
    return env


def fresh(origin: Origin, cwd: Path) -> tuple[DevEnv, str]:
    """The environment the derivation has now (JSON and the bash script), recorded nowhere;
    run in `cwd` so that `$out` is cwd/outputs/out."""
    done = subprocess.run(
        nix("print-dev-env", "--json", *origin.installable()),
        cwd=cwd,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.decode("utf-8", "replace").strip().splitlines()[-10:])
        raise DevEnvError(
            f"`nix print-dev-env {origin.label}` failed in {origin.directory}:\n{tail}"
        )
    script = subprocess.run(
        nix("print-dev-env", *origin.installable()), cwd=cwd, capture_output=True, check=False
    )
    return (
        DevEnv.from_json(done.stdout.decode("utf-8", "surrogateescape")),
        script.stdout.decode("utf-8", "surrogateescape"),
    )


def output_directory(root: Path, name: str = "out") -> Path:
    """Where an output goes in the workspace: nix develop rewrites each output to
    $PWD/outputs/NAME (Nix 2.8, src/nix/develop.cc), and the environment is recorded in ROOT."""
    return root / "outputs" / name


def write_build_env(env: DevEnv, path: Path, root: Path) -> None:
    """env-build.sh: `export NAME='value'` for each exported variable, the outputs rewritten as
    nix develop rewrites them; the derivation's PATH first, then the caller's, as nix develop
    does."""
    lines = ["# The derivation's exported variables (workbench iterate, from env.json)."]
    exported = env.exported()
    for output in env.output_names():
        if output in exported:
            exported[output] = str(output_directory(root, output))
    for name, value in sorted(exported.items()):
        if not name.isidentifier() or not name.isascii():
            continue
        if name == "PATH":
            lines.append(f'export PATH={shlex.quote(value)}"${{PATH:+:$PATH}}"')
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    _write(path, "\n".join(lines) + "\n")


def _write(path: Path, text: str) -> None:
    from workbench.configs.toml_files import write_atomically

    write_atomically(path, text)


def changed_inputs(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Why configure must run again, one line per changed input, word by word."""
    reasons = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if before is None:
            reasons.append(f"{name} is new: {_short(after or '')}")
        elif after is None:
            reasons.append(f"{name} is gone (was {_short(before)})")
        else:
            gone = [word for word in before.split() if word not in after.split()]
            added = [word for word in after.split() if word not in before.split()]
            if gone or added:
                reasons.append(
                    f"{name}: {_short(' '.join(gone)) or '(nothing)'} -> "
                    f"{_short(' '.join(added)) or '(nothing)'}"
                )
            else:
                reasons.append(f"{name} changed (same words, other order or spacing)")
    return reasons


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fingerprint(origin: Origin) -> str:
    """What the derivation's evaluation can depend on, cheaply: each file's path, size and
    mtime.

    A git flake sees its tracked files (`git ls-files`); a path flake its whole directory. A
    Flox file, evaluated with --impure, reads whatever its paths name: the environment's files
    that git does not ignore, and the Nix search path (which may name the nixpkgs it is called
    with). The same fingerprint means the same evaluation, so a cycle need not ask Nix; a
    different one means asking (the derivation may still be the same).
    """
    digest = hashlib.sha256()
    directory = origin.directory
    flox = origin.package_file is not None
    if flox:
        digest.update(f"NIX_PATH={os.environ.get('NIX_PATH', '')}\n".encode())
    for relative in _evaluated_files(directory, untracked=flox):
        try:
            info = os.lstat(directory / relative)
        except OSError:
            continue
        digest.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _evaluated_files(flake: Path, untracked: bool = False) -> Iterable[str]:
    if (flake / ".git").exists():
        others = ["--others", "--exclude-standard"] if untracked else []
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", *others],
            cwd=flake,
            capture_output=True,
            check=False,
        )
        if done.returncode == 0:
            return sorted(
                name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name
            )
    found = []
    for directory, subdirectories, files in os.walk(flake):
        subdirectories[:] = sorted(d for d in subdirectories if d != ".git")
        for name in files:
            found.append(os.path.relpath(os.path.join(directory, name), flake))
    return sorted(found)


def drv_path(origin: Origin) -> str:
    """The derivation the origin evaluates to now (`nix eval --raw .#ATTR.drvPath`)."""
    done = subprocess.run(
        nix("eval", "--raw", *origin.installable("drvPath")),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise DevEnvError(
            f"`nix eval {origin.label}.drvPath` failed in {origin.directory}:\n{tail}"
        )
    return done.stdout.strip()


def develop_attr(target: Any) -> str:
    """The derivation iterate works in: a variant's C++ package, or the flavour's package."""
    if target.variant is not None:
        return f"{target.attr}.cpp"
    return str(target.attr)
