"""The workspace's source layers follow the derivation, against the stand-in flake
(tests/iterate/standin_flake: a STAND-IN for the builder flake's onnxruntime-cpu, built by real
Nix) with real bash, git, cmake, ninja and g++ under the real supervisor.

- The tree is patchPhase's: nixpkgs' own patches, the series, then postPatch (nixpkgs'
  pkgs/stdenv/generic/setup.sh `patchPhase`: prePatch, each of `patches`, postPatch; the
  flake appends the series to `patches`, nix/overrides.nix), so a postPatch that rewrites a
  line a series patch wrote sees the patched line, as `nix build` does.
- A changed postPatch, own patch or src is made again in the workspace (none of them is a
  configure input, so before nothing noticed and the old source was built).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix

from workbench.patches.series import set_enabled

pytestmark = [needs_tools, *needs_nix, pytest.mark.slow]

SUBJECTS = [
    "nixpkgs: the derivation's postPatch",
    "tune-light-7: light_7 allocates seventy more",
    "tune-light-3: light_3 returns a constant",
    "nixpkgs: the derivation's own patches",
    "upstream source",
]
POST_PATCH_END = "          echo 'install(TARGETS fixture fixture_main)' >> CMakeLists.txt\n"


def _add_to_post_patch(loop: Loop, line: str) -> None:
    """One more line at the end of the stand-in derivation's postPatch."""
    flake = loop.repo / "flake.nix"
    text = flake.read_text()
    assert POST_PATCH_END in text
    flake.write_text(text.replace(POST_PATCH_END, POST_PATCH_END + f"          {line}\n"))


def _commits(loop: Loop) -> dict[str, str]:
    """subject -> commit hash, of the workspace's history."""
    lines = loop.git("log", "--format=%H %s").splitlines()
    return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in lines}


def _commit_as_user(loop: Loop, message: str) -> None:
    env = {"GIT_AUTHOR_NAME": "me", "GIT_AUTHOR_EMAIL": "me@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "me", "GIT_COMMITTER_EMAIL": "me@example.invalid"}
    subprocess.run(
        ["git", "commit", "-qam", message], cwd=loop.src, env={**os.environ, **env}, check=True
    )


def test_post_patch_runs_after_the_series_as_in_nix_build(loop: Loop) -> None:
    # postPatch rewrites the very line tune-light-3 writes ("0) + 3;"): in patchPhase the
    # patch comes first, so nix build's light_3.cc says "* 3"; run before the series, the sed
    # would find nothing and the workspace would say "+ 3".
    _add_to_post_patch(loop, "sed -i 's/0) + 3;/0) * 3;/' light_3.cc")
    first = loop.iterate_json("--no-smoke")
    assert first["build"]["state"] == "succeeded"
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert "0) * 3;" in (loop.src / "light_3.cc").read_text()
    check = loop.iterate("--check", timeout=600)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert '"agrees": true' in check.stdout

    # The series changes (tune-light-7 off): postPatch is run again on top of it, its
    # rewrite kept; light_3.cc's content and mtime are as they were, so only light_7 builds.
    three = (loop.src / "light_3.cc").stat().st_mtime_ns
    set_enabled(loop.configs, "tune-light-7", False)
    cycle = loop.iterate_json("--no-smoke")
    assert cycle["series_change"]["replaced_from"] == 1
    assert cycle["series_change"]["post_patch"] is True
    assert loop.git("log", "--format=%s").splitlines() == [SUBJECTS[0], *SUBJECTS[2:]]
    assert "0) * 3;" in (loop.src / "light_3.cc").read_text()
    assert (loop.src / "light_3.cc").stat().st_mtime_ns == three
    assert cycle["ninja"]["sources"] == ["light_7.cc"]


def test_a_changed_post_patch_own_patch_or_src_is_made_again(loop: Loop) -> None:
    loop.iterate_json("--no-smoke")
    five = loop.src / "light_5.cc"
    five.write_text(five.read_text().replace("x) + 5);", "x) + 55);"))  # the user's edit
    series_commits = {k: v for k, v in _commits(loop).items() if k.startswith("tune-")}

    # postPatch: its commit made again on the same series commits; the cycle says why.
    _add_to_post_patch(loop, "sed -i 's/x) + 9);/x) + 99);/' light_9.cc")
    cycle = loop.iterate_json("--no-smoke")
    assert cycle["source_remade"] == ["postPatch changed"]
    assert "the source is made again: postPatch changed" in cycle["steps"]
    assert "x) + 99);" in (loop.src / "light_9.cc").read_text()
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert {k: v for k, v in _commits(loop).items() if k.startswith("tune-")} == series_commits
    assert loop.git("diff", "--name-only").split() == ["light_5.cc"]
    assert "x) + 55);" in five.read_text()
    assert sorted(cycle["ninja"]["sources"]) == ["light_5.cc", "light_9.cc"]

    # nixpkgs' own patch: its commit, the series and postPatch made again on the pristine
    # source; the user's edit kept; the summary says why; only what changed is compiled.
    own = loop.repo / "nixpkgs-own.patch"
    assert "STANDIN_DEP_VALUE - 7;" in own.read_text()
    own.write_text(own.read_text().replace("STANDIN_DEP_VALUE - 7;", "STANDIN_DEP_VALUE - 6;"))
    text = loop.iterate("--no-smoke", json=False)
    assert text.returncode == 0, text.stdout[-3000:] + text.stderr[-3000:]
    assert "  source:    made again: nixpkgs' own patches changed (" in text.stdout
    assert "nixpkgs-own.patch -> " in text.stdout
    assert "1 file compiled (light_1.cc)" in text.stdout
    assert "STANDIN_DEP_VALUE - 6;" in (loop.src / "light_1.cc").read_text()
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert "x) + 99);" in (loop.src / "light_9.cc").read_text()
    assert loop.git("diff", "--name-only").split() == ["light_5.cc"]

    # src (the flake's ./source): the whole source unpacked again, a new pristine commit.
    two = loop.source / "light_2.cc"
    two.write_text(two.read_text().replace("x) + 2);", "x) + 22);"))
    cycle = loop.iterate_json("--no-smoke")
    assert len(cycle["source_remade"]) == 1
    assert cycle["source_remade"][0].startswith("src changed (/nix/store/")
    assert "x) + 22);" in (loop.src / "light_2.cc").read_text()
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert "STANDIN_DEP_VALUE - 6;" in (loop.src / "light_1.cc").read_text()
    assert loop.git("diff", "--name-only").split() == ["light_5.cc"]
    assert cycle["ninja"]["sources"] == ["light_2.cc"]

    # A commit of the user's own cannot be carried over: refused, naming it; nothing moves.
    _commit_as_user(loop, "my own change")
    head = loop.git("rev-parse", "HEAD")
    _add_to_post_patch(loop, "echo '// again' >> light_9.cc")
    refused = loop.iterate("--no-smoke")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "not patches of the series" in refused.stderr
    assert "'my own change'" in refused.stderr and "postPatch changed" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert loop.git("rev-parse", "HEAD") == head
    # The next cycle tries again (the phase failed), and says so.
    again = loop.iterate("--no-smoke")
    assert again.returncode == 2 and "'my own change'" in again.stderr
    assert "the last cycle's patchPhase failed" in again.stderr


def test_check_reports_a_committed_change_and_the_files_it_makes_differ(loop: Loop) -> None:
    loop.iterate_json("--no-smoke")
    five = loop.src / "light_5.cc"
    five.write_text(five.read_text() + '\nextern "C" int workbench_extra() { return 5; }\n')
    _commit_as_user(loop, "an extra symbol")
    result = loop.iterate("--check", timeout=600)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    found = json.loads(result.stdout)["disagreements"]
    assert {"area": "source", "what": "light_5.cc: differs from nix build's patched source"} in (
        found
    )
    files = [d["what"] for d in found if d["area"] == "files"]
    assert files == [
        "lib/libfixture.so: other symbols (workspace only: workbench_extra; nix build only: -)"
    ], found
    assert not any(d["area"] == "flags" for d in found)
    text = loop.iterate("--check", json=False, timeout=600)
    assert text.returncode == 1
    assert "source:  1 differ" in text.stdout and "files:   1 differ" in text.stdout


def test_a_post_patch_that_fails_on_the_new_series_rolls_it_back(loop: Loop) -> None:
    _add_to_post_patch(
        loop, "grep -q 'x) + 70);' light_7.cc || { echo 'postPatch wants tune-light-7'; exit 1; }"
    )
    loop.iterate_json("--no-smoke")
    head = loop.git("rev-parse", "HEAD")
    set_enabled(loop.configs, "tune-light-7", False)
    result = loop.iterate("--no-smoke")
    assert result.returncode == 2, result.stderr[-3000:]
    error = result.stderr
    assert error.count("workbench: error:") == 1 and "Traceback" not in error
    assert "postPatch: patchPhase failed (exit 1); its output ends:" in error
    assert "postPatch wants tune-light-7" in error and "Rolled back" in error
    assert loop.git("rev-parse", "HEAD") == head
    assert "x) + 70);" in (loop.src / "light_7.cc").read_text()  # as it was


def test_a_workspace_made_before_the_layers_is_made_again_in_patch_phase_order(
    loop: Loop,
) -> None:
    # A workspace of the earlier layout (own patches and postPatch as one commit) has no
    # record of its layers: the next cycle makes them again, in patchPhase's order.
    _add_to_post_patch(loop, "sed -i 's/0) + 3;/0) * 3;/' light_3.cc")
    loop.iterate_json("--no-smoke")
    state_file = loop.workspace / "workspace.json"
    state = json.loads(state_file.read_text())
    del state["layers"]
    state_file.write_text(json.dumps(state))
    cycle = loop.iterate_json("--no-smoke")
    assert any("made with postPatch before the series" in step for step in cycle["steps"])
    assert cycle["source_remade"] and "patchPhase runs it after" in cycle["source_remade"][0]
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert "0) * 3;" in (loop.src / "light_3.cc").read_text()
    assert json.loads(state_file.read_text())["layers"]
    assert cycle["ninja"]["sources"] == []  # every file as it was: nothing to compile
