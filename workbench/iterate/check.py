"""`workbench iterate --check`: where the workspace and a clean `nix build` disagree.

Three comparisons, each against what the flake gives now:

- flags: the derivation's configure inputs now against those the workspace last configured
  with, and every `-DNAME=VALUE` of its `cmakeFlags` against the workspace's CMakeCache.txt;
- source: the derivation's own unpackPhase and patchPhase (all its patches, in its order, and
  its postPatch) run in a scratch directory, its tree against the workspace's HEAD (through
  git's object store, so only differing files are named), and the workspace's uncommitted
  edits, which no clean build has;
- files produced: the clean build's output against the workspace's install (the build tool's
  `install` target into the workspace's `$out`): the same files, and per file the same bytes,
  or for ELF files and archives the same defined symbols (paths and RPATHs always differ), or
  for text the same text once each side's own prefix is replaced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from workbench.iterate import dev_env, phases
from workbench.iterate.workspace import Git, WorkspacePaths

SHOWN = 5


@dataclass(frozen=True)
class Disagreement:
    area: str
    """"flags", "source" or "files"."""
    what: str


@dataclass
class CheckResult:
    disagreements: list[Disagreement] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    """What was compared, in words (shown when everything agrees too)."""

    @property
    def agrees(self) -> bool:
        return not self.disagreements

    def add(self, area: str, what: str) -> None:
        self.disagreements.append(Disagreement(area, what))

    def to_json(self) -> dict[str, object]:
        return {
            "agrees": self.agrees,
            "checked": self.checked,
            "disagreements": [{"area": d.area, "what": d.what} for d in self.disagreements],
        }


# -- flags -------------------------------------------------------------------------------------


def cmake_definitions(words: list[str]) -> dict[str, str]:
    """NAME -> VALUE of each -DNAME[:TYPE]=VALUE (the form the cmake hook passes on)."""
    found = {}
    for word in words:
        if not word.startswith("-D") or "=" not in word:
            continue
        key, _, value = word[2:].partition("=")
        found[key.split(":", 1)[0]] = value
    return found


def read_cache(path: Path) -> dict[str, str]:
    """CMakeCache.txt's NAME -> VALUE."""
    cache = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line or line.startswith(("#", "//")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        cache[key.split(":", 1)[0]] = value
    return cache


def compare_flags(result: CheckResult, state: dict[str, object], now: dev_env.DevEnv) -> None:
    configured = state.get("configured") or {}
    recorded = configured.get("inputs") if isinstance(configured, dict) else None
    for reason in dev_env.changed_inputs(recorded or {}, now.configure_inputs()):
        result.add("flags", f"configure input {reason} (workspace -> nix build)")
    wanted = cmake_definitions([*now.words("cmakeFlags"), *now.words("cmakeFlagsArray")])
    build = Path(str(state.get("build_dir") or ""))
    cache_path = build / "CMakeCache.txt"
    if not cache_path.is_file():
        result.add("flags", f"{cache_path}: no CMake cache (the workspace is not configured)")
        return
    cache = read_cache(cache_path)
    for name, value in wanted.items():
        if name not in cache:
            result.add("flags", f"{name}: not in the workspace's cache; nix build has {value!r}")
        elif cache[name] != value:
            result.add(
                "flags", f"{name}: the workspace's cache has {cache[name]!r}, nix build {value!r}"
            )
    result.checked.append(
        f"{len(wanted)} cmakeFlags against {cache_path}, and the configure inputs"
    )


# -- source ------------------------------------------------------------------------------------


def patched_tree(env_script: str, scratch: Path) -> Path:
    """The derivation's unpackPhase and whole patchPhase in `scratch`; the source tree."""
    script_path = scratch / "env.sh"
    script_path.write_text(env_script)
    unpack = scratch / "unpack"
    unpack.mkdir()
    record = scratch / "sourceRoot"
    # Their output goes to stderr: stdout is the check's result.
    phases.run_phase(phases.UNPACK, str(script_path), str(unpack), str(record), out=sys.stderr)
    tree = unpack / record.read_text().strip()
    phases.run_phase(phases.PATCH_AS_IS, str(script_path), str(tree), out=sys.stderr)
    return tree


def compare_source(result: CheckResult, paths: WorkspacePaths, tree: Path) -> None:
    git = Git(paths.src)
    with tempfile.TemporaryDirectory(prefix="workbench-check-index-") as temporary:
        env = {**git.env, "GIT_INDEX_FILE": str(Path(temporary) / "index")}
        argv = ["git", f"--git-dir={paths.src / '.git'}", f"--work-tree={tree}"]
        subprocess.run(
            [*argv, "add", "-A", "--force", "."], env=env, check=True, capture_output=True
        )
        theirs = subprocess.run(
            [*argv, "write-tree"], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
    out = git.text("diff", "--name-status", "--no-renames", "HEAD", theirs)
    for line in out.splitlines():
        status, _, name = line.partition("\t")
        words = {"A": "only in nix build's source", "D": "only in the workspace's commits"}
        differs = "differs from nix build's patched source"
        result.add("source", f"{name}: {words.get(status, differs)}")
    for name in git.dirty_files():
        result.add("source", f"{name}: your uncommitted edit (no clean build has it)")
    result.checked.append("the workspace's commits against nix build's unpackPhase + patchPhase")


# -- files produced ----------------------------------------------------------------------------


def install_workspace(paths: WorkspacePaths, state: dict[str, object], jobs: int) -> Path:
    """The build tool's install target into the workspace's $out (its recorded prefix)."""
    out = dev_env.output_directory(paths.root)
    if out.is_dir():
        shutil.rmtree(out)
    build = Path(str(state.get("build_dir")))
    argv = phases.in_env_argv(paths.root, phases.build_tool_argv(build, jobs, "install"))
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise phases.PhaseError(
            f"installing the workspace failed (exit {done.returncode}):\n"
            + "\n".join(done.stdout.splitlines()[-10:] + done.stderr.splitlines()[-10:])
        )
    return out


def _files(root: Path) -> dict[str, Path]:
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            found[str(path.relative_to(root))] = path
    return found


def _is_binary_object(data: bytes) -> bool:
    return data.startswith(b"\x7fELF") or data.startswith(b"!<arch>\n")


def _symbols(path: Path) -> set[str] | None:
    dynamic = ".so" in path.name
    argv = ["nm", "-D" if dynamic else "-g", "--defined-only", "-P", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    return {line.split()[0] for line in done.stdout.splitlines() if line and not line.endswith(":")}


def compare_outputs(result: CheckResult, ours: Path, theirs: Path) -> None:
    mine, clean = _files(ours), _files(theirs)
    for name in sorted(set(clean) - set(mine)):
        result.add("files", f"{name}: nix build produces it, the workspace does not")
    for name in sorted(set(mine) - set(clean)):
        result.add("files", f"{name}: the workspace produces it, nix build does not")
    same = 0
    for name in sorted(set(mine) & set(clean)):
        a, b = mine[name].read_bytes(), clean[name].read_bytes()
        if a == b:
            same += 1
            continue
        if _is_binary_object(a) and _is_binary_object(b):
            left, right = _symbols(mine[name]), _symbols(clean[name])
            if left is None or right is None:
                result.add("files", f"{name}: the bytes differ and its symbols cannot be read")
            elif left != right:
                only_ours = sorted(left - right)[:SHOWN]
                only_theirs = sorted(right - left)[:SHOWN]
                result.add(
                    "files",
                    f"{name}: other symbols (workspace only: {', '.join(only_ours) or '-'}; "
                    f"nix build only: {', '.join(only_theirs) or '-'})",
                )
            else:
                same += 1
            continue
        if a.replace(bytes(ours), b"$out") != b.replace(bytes(theirs), b"$out"):
            result.add("files", f"{name}: the contents differ (besides the prefix)")
        else:
            same += 1
    result.checked.append(
        f"{len(clean)} files of {theirs} against the workspace's install ({same} the same)"
    )
