"""Before a build, Nix's own plan (what it builds, with last times; what it fetches, from which
binary cache and how much): through `build --dry-run` and the TUI's preview, against a real
file:// binary cache."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from cache_flake import DEP, DEP_BYTES, TOP, make_cache_flake, nix, renew, with_substituter
from needed_tools import needs
from nix_testing import NIX_CONFIG
from supervised import Bench, build_id_from

from workbench.history.records import SUCCEEDED
from workbench.planning.launch import host_platform

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix", debian="nix-bin"),
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
    fetched = re.search(rf"#   fetch {DEP}: 293.\d KiB from (\S+)", dry.stderr)
    assert fetched and fetched.group(1) == cache, dry.stderr
    # The TUI's preview asks the same plan and shows the same lines.
    from workbench.history.store import History
    from workbench.planning.plan import prepare_build

    monkeypatch.setenv("NIX_CONFIG", with_substituter(cache))
    with History(bench.state) as history:
        preview = prepare_build(flake / "configs", history, ["cpu"], ask_nix=True)
    assert preview.nix_plan is not None
    assert [f"# {line}" for line in preview.plan_lines()] == [
        line
        for line in dry.stderr.splitlines()
        if line.startswith(("# Nix's plan", "#   "))
        and ("build " in line or "fetch " in line or "Nix's plan" in line)
    ]


def test_a_build_is_pushed_signed_and_a_second_store_fetches_it_instead_of_building(
    bench: Bench, tmp_path: Path
) -> None:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    secret, public = tmp_path / "cache-key.sec", tmp_path / "cache-key.pub"
    done = subprocess.run(
        ["nix-store", "--generate-binary-cache-key", "workbench-test-1", str(secret), str(public)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cache_dir = tmp_path / "cache"
    cache = f"file://{cache_dir}"
    hosts = flake / "configs" / "hosts.toml"
    hosts.write_text(
        hosts.read_text().replace(
            "local_builds = true",
            f'local_builds = true\npush_to = "{cache}"\nsigning_key = "{secret}"',
        )
    )
    # The build, then the push hosts.toml asks for, each supervised.
    built = bench.run("--config", str(flake / "configs"), "build", "cpu", "-C", str(flake),
                      "--jobs", "1", timeout=300)  # fmt: skip
    build_id = build_id_from(built.stderr)
    assert bench.record(build_id).state == SUCCEEDED, built.stderr[-3000:]
    top = _out(flake)
    assert f"workbench: pushed {top} to {cache}" in built.stderr, built.stderr[-3000:]
    listed = bench.json("push", str(build_id), "--list", "--json")
    (push,) = listed["pushes"]
    assert (push["output"], push["store"], push["signed_by"]) == (top, cache, str(secret))
    copy = bench.record(push["push_build"])
    assert copy.state == SUCCEEDED and copy.name == f"push-{build_id}"
    assert copy.argv[:4] == ("nix", "--extra-experimental-features", "nix-command", "copy")
    # The closure went: the top and its dependency, each signed with the key.
    dep = next(path for path in nix("path-info", "-r", top).split() if path.endswith(DEP))
    for path in (top, dep):
        narinfo = cache_dir / f"{Path(path).name.split('-', 1)[0]}.narinfo"
        assert "Sig: workbench-test-1:" in narinfo.read_text(), path
    # A second store (another machine's, here a store under tmp_path) with the cache as its
    # substituter and only the key's public half trusted: Nix's plan is to fetch, not build.
    second = tmp_path / "second"
    config = NIX_CONFIG.replace("substituters =", f"substituters = {cache}") + (
        f"\nstore = local?root={second}\ntrusted-public-keys = {public.read_text().strip()}"
        "\nrequire-sigs = true"
    )
    env = {**os.environ, "NIX_CONFIG": config, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    from workbench.flake.nix_plan import plan_from_nix

    plan = plan_from_nix(flake, [".#onnxruntime-cpu"], None, env=env)
    assert plan.ok, plan.error
    assert [item.name for item in plan.to_build] == []
    assert sorted(item.name for item in plan.to_fetch) == [DEP, TOP]
    assert {item.substituter for item in plan.to_fetch} == {cache}
    assert plan.download_bytes() and plan.download_bytes() > DEP_BYTES
    (bench.state / "second-store-plan.json").write_text(json.dumps(plan.to_json(), indent=2))
    fetched = subprocess.run(
        ["nix", "--extra-experimental-features", "nix-command flakes", "build", "--no-link",
         "--no-write-lock-file", ".#onnxruntime-cpu"],
        cwd=flake, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert f"copying path '{top}' from '{cache}'" in fetched.stderr, fetched.stderr
    assert "building '" not in fetched.stderr, fetched.stderr
    assert (second / top.lstrip("/")).read_text().strip() == dep


def test_a_push_to_a_store_it_cannot_copy_to_is_one_error_line(bench: Bench) -> None:
    refused = bench.run("push", "1", "--to", "http://cache.example.org")
    assert refused.returncode == 2
    assert refused.stderr.startswith("workbench: error: ")
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "'http://cache.example.org': refused (not a store URL); allowed: file:///" in (
        refused.stderr
    )
