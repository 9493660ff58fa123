"""A fixture source tree and a patch series against it, made with real git.

The tree is the sample project with a few dozen translation units (CMake + ninja). The series
(in patches/ beside a `config_copy`) has, in this order:

    tune-light-3      applies: changes light_3.cc
    tune-light-7      applies: changes light_7.cc
    stale-context     does not apply: written against an older light_9.cc (its hunk's context
                      changed), plus a light_10.cc hunk that still applies
    already-upstream  already applied: the tree already holds its change to light_12.cc
    gone-file         touches src/gone.cc, which the tree does not have

The first two are enabled (for the "cpu" flavour and every variant); the three broken ones are
disabled unless `broken_enabled`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workbench.configs.paths import patches_dir
from workbench.samples.sample_project import write_project

UNITS = 36
GOOD = ("tune-light-3", "tune-light-7")
BROKEN = ("stale-context", "already-upstream", "gone-file")


def write_fixture_source(directory: Path, units: int = UNITS) -> list[str]:
    """The sample project with `units` translation units (one heavy) in `directory`."""
    return write_project(directory, units=units, heavy=(0,))


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "fixture",
        "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
        "GIT_COMMITTER_NAME": "fixture",
        "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
        "GIT_CEILING_DIRECTORIES": str(cwd.parent),
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def diff_of(files: dict[str, tuple[str, str]]) -> str:
    """A git-style patch taking each file from its first text to its second (paths a/ b/)."""
    with tempfile.TemporaryDirectory(prefix="fixture-patch-") as temporary:
        repo = Path(temporary) / "repo"
        repo.mkdir()
        _git(repo, "init", "-q")
        for name, (before, _) in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(before)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "before")
        for name, (_, after) in files.items():
            (repo / name).write_text(after)
        return _git(repo, "diff")


def edited(source: Path, name: str, old: str, new: str) -> tuple[str, str]:
    """(current text, text with `old` replaced by `new`) of source/name; `old` must be there."""
    text = (source / name).read_text()
    assert old in text, f"{old!r} not in {name}"
    return text, text.replace(old, new, 1)


@dataclass(frozen=True)
class FixtureSeries:
    directory: Path
    """patches/ holding series.toml and the patch files."""
    names: tuple[str, ...]


def _entry(name: str, fixes: str, enabled: bool) -> str:
    return (
        f'[[patches]]\nname = "{name}"\nfile = "{name}.patch"\ngroup = "local"\n'
        f'fixes = "{fixes}"\nflavours = ["cpu"]\nvariants = ["*"]\n'
        f"enabled = {'true' if enabled else 'false'}\n"
    )


def write_fixture_series(
    config_directory: Path, source: Path, broken_enabled: bool = False
) -> FixtureSeries:
    """Write the series described above into patches/ beside `config_directory`.

    Changes `source` too: light_12.cc gets already-upstream's change.
    """
    directory = patches_dir(config_directory)
    directory.mkdir(exist_ok=True)
    patches = {
        "tune-light-3": diff_of({"light_3.cc": edited(source, "light_3.cc", "+ digits;", "+ 3;")}),
        "tune-light-7": diff_of(
            {"light_7.cc": edited(source, "light_7.cc", "x) + 7);", "x) + 70);")}
        ),
    }
    # Written against a light_9.cc whose `digits` line was different: that line is the
    # context of the hunk, so the hunk no longer matches the tree.
    _, old_nine = edited(source, "light_9.cc", "std::to_string(x).size()", "1")
    stale_nine = (old_nine, old_nine.replace("+ digits;", "- digits;"))
    patches["stale-context"] = diff_of(
        {
            "light_10.cc": edited(source, "light_10.cc", "+ digits;", "+ 10;"),
            "light_9.cc": stale_nine,
        }
    )
    upstream = edited(source, "light_12.cc", "+ digits;", "* 2;")
    patches["already-upstream"] = diff_of({"light_12.cc": upstream})
    (source / "light_12.cc").write_text(upstream[1])
    patches["gone-file"] = diff_of({"gone.cc": ("int gone() { return 1; }\n", "int gone();\n")})

    fixes = {
        "tune-light-3": "light_3 returns a constant",
        "tune-light-7": "light_7 allocates seventy more",
        "stale-context": "light_9 subtracts its digits",
        "already-upstream": "light_12 doubles",
        "gone-file": "a file the tree no longer has",
    }
    entries = []
    for name, text in patches.items():
        (directory / f"{name}.patch").write_text(text)
        entries.append(_entry(name, fixes[name], name in GOOD or broken_enabled))
    (directory / "series.toml").write_text(
        "# The fixture's patch series (tests/patch_fixture.py).\n\n" + "\n".join(entries)
    )
    return FixtureSeries(directory, tuple(patches))


def copy_tree(source: Path, destination: Path) -> Path:
    """A plain copy of a source tree (for tests that must compare it afterwards)."""
    shutil.copytree(source, destination)
    return destination


def run_workbench(config: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """`python -m workbench --config CONFIG ARGS...` as a user runs it, from the repository."""
    import sys

    return subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "COLUMNS": str(columns)},
        timeout=60,
        check=False,
    )
