"""The iterate workspace's git working copy: the pristine source, then one commit per patch.

Layout, under the state directory:

    workspaces/<TARGET>/src             git working copy: "upstream source", nixpkgs' own
                                        patches, the series, then nixpkgs' postPatch
    workspaces/<TARGET>/src/build       the build directory configurePhase made (the cmake
                                        hook's default; workspace.json has the real one)
    workspaces/<TARGET>/env*            the derivation's environment (iterate/dev_env.py)
    workspaces/<TARGET>/workspace.json  what the workspace was made from and configured with

Each patch commit's message is the patch's name and `fixes` sentence, then trailers:

    Workbench-Patch: NAME
    Workbench-Patch-File: FILE
    Workbench-Patch-Sha256: <sha256 of the patch file>

so `git log` reads as the series, and the trailers say which version of each patch is in.
When the series changes (a patch file edited, a patch enabled, disabled or moved), the patch
commits from the first one that differs onwards are replaced: the user's uncommitted edits are
stashed, HEAD is reset to the commit before, the new tail is applied (one commit per patch),
the derivation's postPatch is run again as the last commit, and the edits are put back. Any
failure rolls back to the previous HEAD and edits. Files whose content ends up as it was keep
their old modification time, so ninja rebuilds only what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.atomic_file import replace_file
from workbench.errors import PatchError, WorkbenchError
from workbench.patches.series import Series, SeriesPatch

WORKSPACES = "workspaces"
STATE_FILE = "workspace.json"
SCHEMA = "workbench-workspace/1"
UPSTREAM_SUBJECT = "upstream source"
TRAILER_PATCH = "Workbench-Patch"
TRAILER_FILE = "Workbench-Patch-File"
TRAILER_SHA = "Workbench-Patch-Sha256"
TRAILER_UPSTREAM = "Workbench-Upstream"
# Workbench-Upstream of the commit of the derivation's own patches, and of its postPatch.
OWN_PATCHES_NOTE = "nixpkgs patchPhase"
POST_PATCH_NOTE = "nixpkgs postPatch"
IDENTITY = {
    "GIT_AUTHOR_NAME": "workbench",
    "GIT_AUTHOR_EMAIL": "workbench@localhost",
    "GIT_COMMITTER_NAME": "workbench",
    "GIT_COMMITTER_EMAIL": "workbench@localhost",
}
# Settings of the user's git that would change what a commit or apply does here.
GIT_OPTIONS = (
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "gc.auto=0",
    "-c",
    "advice.detachedHead=false",
)
# HEAD and the changed tracked files in one call, NUL-separated (`parse_status` reads it).
STATUS_V2 = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=no")
Say = Callable[[str], None]
Step = Callable[["Git"], str]
"""Makes one commit on HEAD (a patch applied, a phase's changes) and returns it."""


class GitError(WorkbenchError):
    """A git command in the workspace failed; the message has the command and git's words."""


class WorkspaceError(WorkbenchError):
    """The workspace is not in a state iterate can work with; the message says what to do."""


@dataclass(frozen=True)
class WorkspacePaths:
    """Where one target's workspace lives."""

    root: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def build(self) -> Path:
        """The cmake hook's default build directory; workspace.json's build_dir is the real one."""
        return self.src / "build"

    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    @property
    def partial(self) -> Path:
        """Where a new working copy is made before it becomes `src`."""
        return self.root / "src.partial"


def workspace_paths(state_directory: Path, target_name: str) -> WorkspacePaths:
    """The workspace of `target_name` (a flavour or variant name) in the state directory."""
    return WorkspacePaths(state_directory / WORKSPACES / target_name)


# -- workspace.json --------------------------------------------------------------------------


def load_state(paths: WorkspacePaths) -> dict[str, Any]:
    """workspace.json's contents ({} when there is none yet)."""
    try:
        text = paths.state_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise WorkspaceError(
            f"{paths.state_file}: not valid JSON ({exc}); remove it and run iterate again "
            "(it is re-written; the working copy is kept)"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise WorkspaceError(
            f"{paths.state_file}: schema {data.get('schema') if isinstance(data, dict) else '?'}"
            f" is not {SCHEMA}; remove it and run iterate again"
        )
    return data


def save_state(paths: WorkspacePaths, data: dict[str, Any], durable: bool = True) -> None:
    """Write workspace.json atomically (readers see the old file or the new one).

    `durable=False` skips the fsyncs (the new file may be lost to a power cut, never half
    written): for what a cycle notes at its end (its build, the smoke command), which is not
    worth 5-10 ms of every cycle."""
    document = {**data, "schema": SCHEMA, "updated": time.time()}
    paths.root.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    replace_file(paths.state_file, text, mode=0o600, durable=durable)


# -- git ---------------------------------------------------------------------------------------


class Git:
    """git in one working copy, with a fixed identity and none of the user's hooks on commit."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.env = {**os.environ, **IDENTITY, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
        self.env.pop("GIT_DIR", None)
        self.env.pop("GIT_WORK_TREE", None)
        self.env.pop("GIT_INDEX_FILE", None)

    def run(
        self, *args: str, check: bool = True, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            ["git", *GIT_OPTIONS, *args],
            cwd=self.tree,
            env=self.env,
            input=stdin,
            capture_output=True,
            check=False,
        )
        if check and done.returncode != 0:
            said = (
                done.stderr.decode("utf-8", "replace").strip()
                or done.stdout.decode("utf-8", "replace").strip()
            )
            raise GitError(f"`git {' '.join(args)}` failed in {self.tree}: {said}")
        return done

    def text(self, *args: str, stdin: bytes | None = None) -> str:
        return self.run(*args, stdin=stdin).stdout.decode("utf-8", "surrogateescape")

    def head(self) -> str:
        return self.text("rev-parse", "HEAD").strip()

    def dirty_files(self) -> list[str]:
        """Tracked files with uncommitted changes (staged or not); untracked ones are left out."""
        out = self.text("status", "--porcelain=v1", "-z", "--untracked-files=no")
        names: list[str] = []
        entries = out.split("\0")
        index = 0
        while index < len(entries):
            entry = entries[index]
            index += 1
            if len(entry) < 4:
                continue
            names.append(entry[3:])
            if entry[0] in "RC":  # a rename's source follows
                names.append(entries[index])
                index += 1
        return names

    def start_status(self) -> subprocess.Popen[bytes]:
        """`git status` started now and read later (`read_status`), so that it runs while
        something else does (a cycle's build)."""
        return subprocess.Popen(
            ["git", *GIT_OPTIONS, *STATUS_V2],
            cwd=self.tree,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def read_status(self, started: subprocess.Popen[bytes]) -> WorkingCopy:
        """HEAD and the dirty tracked files, from `start_status`."""
        out, err = started.communicate()
        if started.returncode != 0:
            said = err.decode("utf-8", "replace").strip()
            raise GitError(f"`git status` failed in {self.tree}: {said}")
        return parse_status(out.decode("utf-8", "surrogateescape"))

    def changed_between(self, old: str, new: str) -> list[str]:
        out = self.text("diff", "--name-only", "-z", "--no-renames", old, new)
        return [name for name in out.split("\0") if name]

    def commit(self, message: str) -> str:
        self.run("commit", "-q", "--no-verify", "--allow-empty", "-F", "-", stdin=message.encode())
        return self.head()

    def untracked(self) -> list[str]:
        """Untracked files that git does not ignore (the user's new files, say)."""
        out = self.text("ls-files", "-z", "--others", "--exclude-standard")
        return [name for name in out.split("\0") if name]

    def commit_changes(self, message: str, untracked_before: list[str]) -> str:
        """Commit what a phase changed in the tree: every tracked file, and the new files it
        made, leaving out the files that were untracked before it ran (the user's own) and
        what git ignores (the build directory). A new file that upstream's .gitignore names is
        left out too, unlike at creation (`create` adds everything): --check names it then."""
        leave_out = [f":(exclude,literal){name}" for name in untracked_before]
        self.run("add", "-A", "--", ".", *leave_out)
        return self.commit(message)

    def commit_directory(self, directory: Path, message: str) -> str:
        """A new root commit holding `directory`'s files (all of them, as `create` commits
        them), made without touching the working tree or the index."""
        import tempfile  # not on a cycle's fast path

        with tempfile.TemporaryDirectory(prefix="workbench-index-") as temporary:
            env = {**self.env, "GIT_INDEX_FILE": str(Path(temporary) / "index")}
            argv = ["git", *GIT_OPTIONS, f"--git-dir={self.tree / '.git'}"]
            outside = [*argv, f"--work-tree={directory}"]
            for command in (["add", "-A", "--force", "."], ["write-tree"]):
                done = subprocess.run(
                    [*outside, *command], cwd=directory, env=env, capture_output=True, text=True
                )
                if done.returncode != 0:
                    raise GitError(f"`git {command[0]}` of {directory} failed: {done.stderr}")
            tree = done.stdout.strip()
        return self.text("commit-tree", tree, "-F", "-", stdin=message.encode()).strip()


@dataclass(frozen=True)
class WorkingCopy:
    """What `git status` says of a working copy: its HEAD and the tracked files it changed."""

    head: str | None
    edits: list[str]


# Fields before the path in each kind of `git status --porcelain=v2` entry: ordinary (1),
# renamed or copied (2, its original path follows as the next entry) and unmerged (u).
_V2_FIELDS = {"1": 8, "2": 9, "u": 10}


def parse_status(out: str) -> WorkingCopy:
    """`git status --porcelain=v2 -z --branch` read: HEAD (None before the first commit) and
    the changed tracked files, a rename's both names, in git's order."""
    head: str | None = None
    edits: list[str] = []
    entries = out.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if entry.startswith("# branch.oid "):
            oid = entry.split(" ", 2)[2]
            head = None if oid == "(initial)" else oid
            continue
        fields = _V2_FIELDS.get(entry[:1])
        if fields is None:
            continue
        edits.append(entry.split(" ", fields)[fields])
        if entry[0] == "2":
            edits.append(entries[index])
            index += 1
    return WorkingCopy(head, edits)


# -- patches -----------------------------------------------------------------------------------


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class WantedPatch:
    """A patch of the series, enabled for the target, with its file's current checksum."""

    name: str
    file: str
    path: Path
    sha256: str
    fixes: str

    def message(self) -> str:
        return (
            f"{self.name}: {self.fixes}\n\n"
            f"{TRAILER_PATCH}: {self.name}\n"
            f"{TRAILER_FILE}: {self.file}\n"
            f"{TRAILER_SHA}: {self.sha256}\n"
        )


@dataclass(frozen=True)
class AppliedPatch:
    """A patch commit of the workspace, read back from its trailers."""

    commit: str
    name: str
    file: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"commit": self.commit, "name": self.name, "file": self.file, "sha256": self.sha256}


def wanted_patches(series: Series, target: str) -> list[WantedPatch]:
    """The enabled patches of `target`, in series order, each with its file's sha256."""
    wanted = []
    for patch in series.applied_to(target):
        wanted.append(_wanted(series, patch))
    return wanted


def _wanted(series: Series, patch: SeriesPatch) -> WantedPatch:
    path = series.file_of(patch).resolve()
    if not path.is_file():
        raise PatchError(
            f"{series.path}:{patch.line}: patch {patch.name!r}: file {patch.file!r} does not "
            f"exist in {series.directory}; copy it there, or disable the patch "
            f"(`workbench patches disable {patch.name}`)"
        )
    return WantedPatch(patch.name, patch.file, path, sha256_of(path), patch.fixes)


def _trailers(body: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in body.splitlines():
        key, colon, value = line.partition(":")
        if colon and key in (TRAILER_PATCH, TRAILER_FILE, TRAILER_SHA, TRAILER_UPSTREAM):
            found[key] = value.strip()
    return found


@dataclass
class PatchCommits:
    """The workspace's commits after the upstream one: patch commits, and any others."""

    upstream: str
    patches: list[AppliedPatch] = field(default_factory=list)
    others: list[tuple[str, str]] = field(default_factory=list)
    """(commit, subject) of commits that are not patch commits (the user's own)."""
    post_patch: str | None = None
    """The commit of the derivation's postPatch, after the series (None: not made yet, or a
    workspace made before it had its own commit)."""

    def refuse_others(self, git: Git, why: str) -> None:
        """Commits of the user's own cannot be carried over a change of what is under them."""
        if not self.others:
            return
        listing = ", ".join(f"{commit[:10]} {subject!r}" for commit, subject in self.others)
        raise WorkspaceError(
            f"{git.tree} has commits that are not patches of the series ({listing}); {why} and "
            "the commits after it must be replaced. Turn your commits into a patch "
            "(`workbench patches new NAME --from DIR`) and reset them away, then run iterate "
            "again"
        )


def read_history(git: Git, upstream: str) -> PatchCommits:
    """The patch commits on top of `upstream`, oldest first, from their trailers."""
    out = git.text("log", "--reverse", "--format=%H%x00%B%x1e", f"{upstream}..HEAD")
    history = PatchCommits(upstream)
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        commit, _, body = record.partition("\0")
        trailers = _trailers(body)
        if trailers.get(TRAILER_UPSTREAM) == POST_PATCH_NOTE:
            history.post_patch = commit
        elif TRAILER_PATCH in trailers and TRAILER_SHA in trailers:
            history.patches.append(
                AppliedPatch(
                    commit,
                    trailers[TRAILER_PATCH],
                    trailers.get(TRAILER_FILE, ""),
                    trailers[TRAILER_SHA],
                )
            )
        else:
            history.others.append((commit, body.splitlines()[0] if body else ""))
    return history


def first_difference(applied: list[AppliedPatch], wanted: list[WantedPatch]) -> int | None:
    """Index of the first patch commit that is not the wanted patch there; None if all match."""
    for index, patch in enumerate(wanted):
        if index >= len(applied):
            return index
        if (applied[index].name, applied[index].sha256) != (patch.name, patch.sha256):
            return index
    return len(wanted) if len(applied) > len(wanted) else None


def _explain(tree: Path, patch: WantedPatch, git_said: str) -> str:
    """Why a patch does not apply to `tree`: per hunk, from the series checker (imported
    here: unidiff is only needed when a patch fails)."""
    from workbench.patches.checking import FAILS, check_patch_in_place

    try:
        check = check_patch_in_place(tree, patch.path, patch.name)
    except Exception as exc:  # the check is an explanation only; git's words still stand
        return f"{git_said} (the per-hunk check failed too: {exc})"
    if check.status == FAILS and check.detail:
        lines = [check.detail]
    else:
        lines = [check.status + (f": {check.detail}" if check.detail else "")]
    for hunk in check.hunks:
        text = f"  hunk #{hunk.number} {hunk.path} {hunk.header}: {hunk.status}"
        lines.append(text + (f": {hunk.detail}" if hunk.detail else ""))
    if check.ok:  # the check says it applies alone: git's own words say what clashed
        lines.append(f"  git apply: {git_said}")
    return "\n".join(lines)


class PatchDoesNotApply(PatchError):
    """One patch of the series does not apply where it goes; nothing is half-applied."""

    def __init__(self, patch: WantedPatch, explanation: str, state: str) -> None:
        self.patch = patch
        self.explanation = explanation
        self.state = state
        super().__init__(
            f"patch {patch.name} ({patch.path}) does not apply: {explanation}\n{state}"
        )


def apply_as_commit(git: Git, patch: WantedPatch) -> str:
    """`git apply --index` the patch and commit it; on failure the tree is as before."""
    done = git.run("apply", "--index", "--whitespace=nowarn", str(patch.path), check=False)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()
        # git apply is atomic, but make sure: the tree and index back to HEAD.
        git.run("reset", "-q", "--hard", "HEAD")
        raise PatchDoesNotApply(patch, _explain(git.tree, patch, said), "")
    return git.commit(patch.message())


# -- modification times ------------------------------------------------------------------------


class Stamps:
    """Content hash and mtime of files, to give back the old mtime where content is unchanged."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.files: dict[str, tuple[str, int]] = {}

    def record(self, names: Iterable[str]) -> None:
        for name in names:
            if name in self.files:
                continue
            path = self.tree / name
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                self.files[name] = (sha256_of(path), path.stat().st_mtime_ns)
            except OSError:
                continue

    def restore(self) -> list[str]:
        """Put the old mtime back on every recorded file whose content is the same; those names."""
        kept = []
        for name, (digest, mtime) in self.files.items():
            path = self.tree / name
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                current = path.stat()
                if current.st_mtime_ns == mtime or sha256_of(path) != digest:
                    continue
                os.utime(path, ns=(current.st_atime_ns, mtime))
                kept.append(name)
            except OSError:
                continue
        return kept


# -- making and updating the working copy ------------------------------------------------------


@dataclass
class Applied:
    """What preparing the workspace did to its git history."""

    created: bool = False
    replaced_from: int | None = None
    """Index of the first patch commit replaced, when the series changed."""
    reverted: list[str] = field(default_factory=list)
    """Names of patch commits taken out (old versions, disabled or moved patches)."""
    applied: list[str] = field(default_factory=list)
    """Names of patches committed now, in order."""
    kept_mtimes: int = 0
    """Files rewritten with their old content, whose old mtime was put back."""
    edits_kept: list[str] = field(default_factory=list)
    """The user's uncommitted files, stashed and put back."""
    post_patch: bool = False
    """The derivation's postPatch was run again on top of the series."""

    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "replaced_from": self.replaced_from,
            "reverted": self.reverted,
            "applied": self.applied,
            "kept_mtimes": self.kept_mtimes,
            "edits_kept": self.edits_kept,
            "post_patch": self.post_patch,
        }


def create(
    paths: WorkspacePaths,
    copy: Callable[[Path], int],
    upstream_note: str,
    say: Say,
    own_patches: Callable[[Git], str] | None = None,
) -> str:
    """Make the working copy: the copied source as "upstream source" (and, when `own_patches`
    is given, the derivation's own patches as one commit on it); the commit the series starts
    from.

    `copy(directory)` fills the new directory with the pristine tree. `own_patches(git)` adds
    the derivation's own patches as one commit and returns it. The copy is made beside `src`
    and renamed into place once committed, so an interrupted copy leaves no half workspace.
    The series is applied afterwards (`apply_series`), once the caller has recorded this
    commit: a series patch that does not apply then leaves a working copy iterate can go on
    from.
    """
    partial = paths.partial
    if partial.exists():
        shutil.rmtree(partial)
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        count = copy(partial)
        say(f"copied {count} files into {paths.src}")
        git = Git(partial)
        git.run("init", "-q")
        git.run("add", "-A", "--force", ".")
        upstream = git.commit(
            f"{UPSTREAM_SUBJECT}\n\nThe pristine source, before any patch of the series.\n\n"
            f"{TRAILER_UPSTREAM}: {upstream_note}\n"
        )
        if own_patches is not None:
            upstream = own_patches(git)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(paths.src)
    return upstream


def apply_series(git: Git, wanted: list[WantedPatch]) -> Applied:
    """The series on a new working copy, one commit per patch, in order.

    A patch that does not apply stops the series there: the working copy keeps the patches
    before it (nothing half-applied) and PatchDoesNotApply says which and why; the next cycle
    goes on from there (`update`).
    """
    result = Applied(created=True)
    for index, patch in enumerate(wanted):
        try:
            apply_as_commit(git, patch)
        except PatchDoesNotApply as failure:
            before = ", ".join(result.applied) or "none"
            raise PatchDoesNotApply(
                patch,
                failure.explanation,
                f"The workspace {git.tree} holds the derivation's patched source and the "
                f"{index} series patches before it ({before}); nothing of {patch.name} is "
                f"applied. Fix {patch.path} (or disable it: `workbench patches disable "
                f"{patch.name}`) and run iterate again: it goes on from there.",
            ) from None
        result.applied.append(patch.name)
    return result


def update(
    git: Git,
    upstream: str,
    wanted: list[WantedPatch],
    say: Say,
    history: PatchCommits | None = None,
    post_patch: Step | None = None,
) -> Applied:
    """Bring the patch commits in line with the series; the user's edits stay uncommitted.

    Nothing happens when every patch commit is the wanted patch (same name and file sha256)
    and the postPatch commit is there. Otherwise the commits from the first difference on are
    replaced (see the module's docstring), and `post_patch` (the derivation's postPatch, which
    patchPhase runs after all the patches: phases.post_patch_step) makes its commit again on
    top. On failure the working copy is as it was: HEAD, edits, and modification times.
    `history` is `read_history(git, upstream)` when the caller has read it already;
    `post_patch` is None for a workspace made before postPatch had its own commit (the phases
    make its layers again, phases.sync_source).
    """
    history = history or read_history(git, upstream)
    index = first_difference(history.patches, wanted)
    post_missing = post_patch is not None and history.post_patch is None
    if index is None and not post_missing:
        return Applied()
    if index is None:  # the series is in, its postPatch is not (a series that failed midway)
        index = len(wanted)
    history.refuse_others(git, "the series changed")
    base = history.patches[index - 1].commit if index > 0 else upstream
    dirty = git.dirty_files()
    first = wanted[index].name if index < len(wanted) else "the end"
    say(
        f"the series changed at patch #{index + 1} ({first}): replacing "
        f"{len(history.patches) - index} patch commits with {len(wanted) - index}"
        + (", then postPatch again" if post_patch is not None else "")
        + (f", your edits ({', '.join(dirty[:5])}) stashed meanwhile" if dirty else "")
    )
    result = Applied(replaced_from=index)
    result.reverted = [patch.name for patch in history.patches[index:]]

    def applying(patch: WantedPatch) -> Step:
        def step(tree: Git) -> str:
            commit = apply_as_commit(tree, patch)
            result.applied.append(patch.name)
            return commit

        return step

    steps = [applying(patch) for patch in wanted[index:]]
    if post_patch is not None:
        steps.append(post_patch)
        result.post_patch = True
    result.edits_kept, result.kept_mtimes = rebuild_from(git, base, steps)
    return result


def rebuild_from(git: Git, base: str, steps: list[Step]) -> tuple[list[str], int]:
    """HEAD reset to `base`, then `steps` (each makes one commit), the user's uncommitted edits
    stashed meanwhile and put back; returns (the edits kept, the files whose old modification
    time was put back: same content, so ninja does not rebuild them).

    Any failure rolls back to the previous HEAD and edits, with their modification times, and
    says so."""
    old_head = git.head()
    dirty = git.dirty_files()
    stamps = Stamps(git.tree)
    stamps.record(git.changed_between(base, old_head))
    stamps.record(dirty)
    stash: str | None = None
    try:
        if dirty:
            git.run(
                "stash",
                "push",
                "-q",
                "-m",
                "workbench iterate: edits kept while the series is re-applied",
            )
            stash = git.text("rev-parse", "stash@{0}").strip()
        git.run("reset", "-q", "--hard", base)
        for step in steps:
            step(git)
        if stash is not None:
            put_back = git.run("stash", "apply", "--index", stash, check=False)
            if put_back.returncode != 0:  # the staged part clashed: put it all back unstaged
                git.run("reset", "-q", "--hard", "HEAD")
                put_back = git.run("stash", "apply", stash, check=False)
            if put_back.returncode != 0:
                said = (put_back.stdout + put_back.stderr).decode("utf-8", "replace").strip()
                raise WorkspaceError(
                    "your uncommitted edits (" + ", ".join(dirty) + ") do not fit on the new "
                    f"series: {said.splitlines()[-1] if said else 'git stash apply failed'}"
                )
            _drop_stash(git, stash)
    except BaseException as failure:
        _roll_back(git, old_head, stash)
        kept = stamps.restore()
        git.run("update-index", "-q", "--refresh", check=False)
        state = (
            f"Rolled back: {git.tree} is as it was (HEAD {old_head[:12]}"
            + (f", your edits to {', '.join(dirty)} kept" if dirty else "")
            + f"; {len(kept)} files keep their modification time)."
        )
        if isinstance(failure, PatchDoesNotApply):
            name = failure.patch.name
            state += (
                f"\nFix {failure.patch.path} (or disable it: `workbench patches disable {name}`) "
                "and run iterate again."
            )
            raise PatchDoesNotApply(failure.patch, failure.explanation, state) from None
        if isinstance(failure, WorkbenchError):
            raise WorkspaceError(f"{failure}\n{state}") from failure
        raise
    kept_mtimes = len(stamps.restore())
    git.run("update-index", "-q", "--refresh", check=False)
    return dirty, kept_mtimes


def _drop_stash(git: Git, stash: str) -> None:
    listed = git.run("rev-parse", "-q", "--verify", "stash@{0}", check=False)
    if listed.returncode == 0 and listed.stdout.decode().strip() == stash:
        git.run("stash", "drop", "-q")


def _roll_back(git: Git, old_head: str, stash: str | None) -> None:
    git.run("reset", "-q", "--hard", old_head)
    if stash is not None:
        git.run("stash", "apply", "--index", stash)
        _drop_stash(git, stash)
