"""Before a build, Nix's own plan (what it builds, with last times; what it fetches, from which
binary cache and how much): through `build --dry-run` and the TUI's preview, against a real
file:// binary cache."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from cache_flake import DEP, TOP, make_cache_flake, nix, renew, with_substituter
from nix_testing import NIX_CONFIG
from supervised import Bench, build_id_from

from workbench.supervision.history import SUCCEEDED
from workbench.supervision.launch import host_platform

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Debian's nix-bin"),
]


def _out(flake: Path) -> str:
    return nix("eval", "--raw", "--no-write-lock-file", ".#onnxruntime-cpu.outPath", cwd=flake)


def test_the_dry_run_and_the_preview_show_what_nix_builds_and_fetches(
    bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    first = bench.run("build", "cpu", "-C", str(flake), "--dry-run", timeout=120)
    assert first.returncode == 0, first.stderr
    assert "# Nix's plan: 2 to build (none built here before: no time known), 0 to fetch" in (
        first.stderr
    )
    assert f"#   build {DEP}: never built here" in first.stderr
    # Built once, supervised: the history keeps each derivation's time.
    built = bench.run("build", "cpu", "-C", str(flake), "--jobs", "1", timeout=300)
    build_id = build_id_from(built.stderr)
    assert bench.record(build_id).state == SUCCEEDED, built.stderr[-2000:]
    with bench.history() as history:
        times = {
            name: ended - started for _, name, started, ended, _ in history.derivations(build_id)
        }
    assert set(times) == {DEP, TOP}
    # The dependency goes to a binary cache and leaves this store; the top gets a new nonce.
    top = _out(flake)
    dep = next(path for path in nix("path-info", "-r", top).split() if path.endswith(DEP))
    cache = f"file://{tmp_path / 'cache'}"
    nix("copy", "--to", cache, dep)
    (flake / "result-onnxruntime-cpu").unlink()
    nix("store", "delete", top, dep)
    renew(flake)
    bench.extra_env["NIX_CONFIG"] = with_substituter(cache)
    dry = bench.run("build", "cpu", "-C", str(flake), "--dry-run", timeout=120)
    assert dry.returncode == 0, dry.stderr
    last = f"{times[TOP]:.1f}s"
    summary = next(line for line in dry.stderr.splitlines() if "Nix's plan" in line)
    assert summary == (
        f"# Nix's plan: 1 to build (last time {last} for 1 of them), "
        "1 to fetch (0.29 MiB download, 0.29 MiB unpacked)"
    ), dry.stderr
    assert f"#   build {TOP}: last {last} (build #{build_id})" in dry.stderr
    fetched = re.search(rf"#   fetch {DEP}: ([\d.]+) MiB from (\S+)", dry.stderr)
    assert fetched and fetched.group(2) == cache, dry.stderr
    # The TUI's preview asks the same plan and shows the same lines.
    from workbench.supervision.build_preview import preview_targets

    monkeypatch.setenv("NIX_CONFIG", with_substituter(cache))
    preview = preview_targets(flake / "configs", bench.state, ["cpu"])
    assert preview.nix_plan is not None
    assert [f"# {line}" for line in preview.plan_lines()] == [
        line
        for line in dry.stderr.splitlines()
        if line.startswith(("# Nix's plan", "#   "))
        and ("build " in line or "fetch " in line or "Nix's plan" in line)
    ]
