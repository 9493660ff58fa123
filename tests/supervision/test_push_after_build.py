"""hosts.toml's push_to after builds nobody follows to the end: a detached build (`build
--detach`, as the TUI starts them) is pushed by its own supervisor side, once, however many
readers look at it afterwards; a matrix build has each target that built pushed (the failed one
not). Real Nix, a real file:// binary cache, the stand-in flakes of the plan and push tests."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from cache_flake import DEP, REPO, make_cache_flake, nix
from needed_tools import needs
from nix_testing import NIX_CONFIG
from supervised import TOKEN_ENV, Bench, build_id_from

from workbench.history.records import FAILED, SUCCEEDED
from workbench.planning.launch import host_platform

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix", debian="nix-bin"),
]


def _push_to(configs: Path, cache: str) -> None:
    hosts = configs / "hosts.toml"
    text = hosts.read_text()
    assert "local_builds = true" in text
    hosts.write_text(
        text.replace("local_builds = true", f'local_builds = true\npush_to = "{cache}"')
    )


def _narinfo(cache_dir: Path, path: str) -> Path:
    return cache_dir / f"{Path(path).name.split('-', 1)[0]}.narinfo"


def test_a_detached_build_is_pushed_by_its_supervisor_once_whoever_reads_it(
    bench: Bench, tmp_path: Path
) -> None:
    flake = make_cache_flake(tmp_path / "flake", host_platform())
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    cache_dir = tmp_path / "cache"
    cache = f"file://{cache_dir}"
    _push_to(flake / "configs", cache)
    configs = ("--config", str(flake / "configs"))
    started = bench.run(*configs, "build", "cpu", "-C", str(flake), "--jobs", "1", "--detach")
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    assert "running in the background" in started.stderr
    assert "pushed" not in started.stderr  # the command left before the build ended
    assert bench.wait_ended(build_id, timeout=300).state == SUCCEEDED

    def push_started() -> int | None:
        with bench.history() as history:
            claim = history.push_request(build_id)
        assert claim is None or claim[2] is None, claim  # no "not pushed: why"
        return None if claim is None else claim[1]

    push_id = bench.wait_for(f"the push of build #{build_id} to start", push_started, 120)
    push = bench.wait_ended(push_id, timeout=300)
    assert push.state == SUCCEEDED, push.note
    assert push.name == f"push-{build_id}" and "copy" in push.argv
    top = nix("eval", "--raw", "--no-write-lock-file", ".#onnxruntime-cpu.outPath", cwd=flake)
    dep = next(path for path in nix("path-info", "-r", top).split() if path.endswith(DEP))
    for path in (top, dep):  # the closure went: the output and its dependency
        assert _narinfo(cache_dir, path).is_file(), path
    # Readers that see the success afterwards (attach follows it to its end, history lists it)
    # start no second push, and the history says once where the output went.
    attached = bench.run(*configs, "attach", str(build_id), timeout=120)
    assert attached.returncode == 0, attached.stderr
    listed = bench.run(*configs, "history")
    assert listed.returncode == 0, listed.stderr
    with bench.history() as history:
        pushes = [b for b in history.builds(limit=50) if b.name == f"push-{build_id}"]
        recorded = history.pushes(build_id)
    assert [b.id for b in pushes] == [push_id]
    assert [(p.output, p.store, p.push_build) for p in recorded] == [(top, cache, push_id)]
    shown = bench.json(*configs, "push", str(build_id), "--list", "--json")
    assert [p["push_build"] for p in shown["pushes"]] == [push_id]


# Variants no other test builds: a Nix target's lock is the host's, whichever state directory
# builds it, so a test building the same attribute at the same time would refuse this one.
MATRIX_TARGETS = [
    "onnxruntime-python313-cuda12_9-sm86-avx2",
    "onnxruntime-python313-cuda12_9-sm86-avx512vnni",
]
MATRIX_FAILING = "onnxruntime-python313-cuda12_9-sm80-avx512vnni"


def _matrix_flake(directory: Path) -> Path:
    """Stand-in packages named like three variants of configs/matrix.toml; the sm80 one fails."""
    stamp = uuid.uuid4().hex
    directory.mkdir()
    system = host_platform()
    ok = "\n".join(f'      {name} = mk "{name.rsplit("-", 1)[1]}" "echo ok > $out";'
                   for name in MATRIX_TARGETS)  # fmt: skip
    (directory / "flake.nix").write_text(
        f"""{{
  outputs = {{ self }}: let
    mk = name: script: derivation {{
      inherit name; system = "{system}"; builder = "/bin/sh"; args = [ "-c" script ];
      stamp = "{stamp}";
    }};
  in {{
    packages.{system} = {{
{ok}
      {MATRIX_FAILING} = mk "sm80" "echo 'error: no such intrinsic' >&2; exit 1";
    }};
  }};
}}
"""
    )
    shutil.copytree(REPO / "configs", directory / "configs")
    return directory


def test_a_matrix_build_pushes_each_target_that_built(bench: Bench, tmp_path: Path) -> None:
    flake = _matrix_flake(tmp_path / "flake")
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    cache_dir = tmp_path / "cache"
    cache = f"file://{cache_dir}"
    _push_to(flake / "configs", cache)
    targets = [*MATRIX_TARGETS, MATRIX_FAILING]
    built = bench.run("--config", str(flake / "configs"), "build", *targets, "-C", str(flake),
                      "--jobs", "1", timeout=300)  # fmt: skip
    assert built.returncode == 1, built.stderr[-3000:]  # the failing target fails the build
    build_id = build_id_from(built.stderr)
    assert bench.record(build_id).state == FAILED
    outs = {name: nix("eval", "--raw", f".#{name}.outPath", cwd=flake) for name in targets}
    with bench.history() as history:
        recorded = history.pushes(build_id)
        claim = history.push_request(build_id)
    assert claim is not None and claim[1] is not None, claim
    assert sorted(p.output for p in recorded) == sorted(outs[name] for name in MATRIX_TARGETS)
    assert {(p.store, p.push_build) for p in recorded} == {(cache, claim[1])}
    for name in MATRIX_TARGETS:
        assert _narinfo(cache_dir, outs[name]).is_file(), name
        assert f"workbench: pushed {outs[name]} to {cache}" in built.stderr
    assert not _narinfo(cache_dir, outs[MATRIX_FAILING]).exists()
    assert bench.record(claim[1]).state == SUCCEEDED


def test_a_build_started_as_the_tui_starts_it_is_pushed(
    bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The TUI's b: the plan it previews (asking for the push, and saying so) handed to a
    supervisor as its worker does (control.start); nobody follows it, its supervisor pushes."""
    from workbench.planning.plan import prepare_build
    from workbench.supervision import control
    from workbench.tui.launching import with_push_to

    flake = make_cache_flake(tmp_path / "flake", host_platform())
    configs = flake / "configs"
    cache_dir = tmp_path / "cache"
    cache = f"file://{cache_dir}"
    _push_to(configs, cache)
    # The supervisor inherits this process's environment: the tests' Nix, and the bench's token
    # (its cleanup ends what carries it).
    monkeypatch.setenv("NIX_CONFIG", NIX_CONFIG)
    monkeypatch.setenv(TOKEN_ENV, bench.token)
    with bench.history() as history:
        planned = with_push_to(prepare_build(configs, history, ["cpu"]), configs)
        assert f"then pushed to {cache} (push_to in hosts.toml)" in planned.lines()
        started = control.start(bench.state, history, planned.build, False, [])
    build_id = started.record.id
    assert bench.wait_ended(build_id, timeout=300).state == SUCCEEDED

    def push_started() -> int | None:
        with bench.history() as history:
            claim = history.push_request(build_id)
        return None if claim is None else claim[1]

    push_id = bench.wait_for(f"the push of build #{build_id} to start", push_started, 120)
    assert bench.wait_ended(push_id, timeout=300).state == SUCCEEDED
    with bench.history() as history:
        (pushed,) = history.pushes(build_id)
    assert pushed.store == cache and pushed.push_build == push_id
    assert _narinfo(cache_dir, pushed.output).is_file()


TWO_FLAVOURS = """{{
  outputs = {{ self }}: let
    mk = name: derivation {{
      inherit name; system = "{system}"; builder = "/bin/sh";
      args = [ "-c" "echo {nonce} > $out" ];
    }};
  in {{
    packages.{system}.onnxruntime-cpu = mk "standin-push-cpu";
    packages.{system}.onnxruntime-cuda-dyn = mk "standin-push-cuda-dyn";
  }};
}}
"""


@pytest.mark.parametrize("planner", ["tui-marked-rows", "one-nix-build"])
def test_a_build_of_several_targets_pushes_each_target(
    bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planner: str
) -> None:
    """The TUI's marked rows (a matrix build, as `workbench build A B`), and one `nix build`
    of several installables with no result link each (its supervisor asks Nix where each
    output is): either way every target's output is pushed."""
    from workbench.planning.plan import prepare_build
    from workbench.supervision import control
    from workbench.tui.launching import plan_several, with_push_to

    flake = tmp_path / "flake"
    flake.mkdir()
    system = host_platform()
    (flake / "flake.nix").write_text(TWO_FLAVOURS.format(system=system, nonce=uuid.uuid4().hex))
    shutil.copytree(REPO / "configs", flake / "configs")
    configs = flake / "configs"
    cache_dir = tmp_path / "cache"
    cache = f"file://{cache_dir}"
    _push_to(configs, cache)
    monkeypatch.setenv("NIX_CONFIG", NIX_CONFIG)
    monkeypatch.setenv(TOKEN_ENV, bench.token)
    with bench.history() as history:
        names = ["cpu", "cuda-dyn"]
        if planner == "tui-marked-rows":
            several = plan_several(configs, bench.state, history, names)
            assert several is not None and "matrix" in several.build.settings
        else:
            several = prepare_build(configs, history, names)
            assert " " in (several.build.target or "")  # several installables, one build
        planned = with_push_to(several, configs)
        # force: a Nix target's lock is the host's, and other tests build onnxruntime-cpu too.
        started = control.start(bench.state, history, planned.build, True, [])
    build_id = started.record.id
    assert bench.wait_ended(build_id, timeout=300).state == SUCCEEDED

    def push_started() -> int | None:
        with bench.history() as history:
            claim = history.push_request(build_id)
        assert claim is None or claim[2] is None, claim  # no "not pushed: why"
        return None if claim is None else claim[1]

    push_id = bench.wait_for(f"the push of build #{build_id} to start", push_started, 120)
    assert bench.wait_ended(push_id, timeout=300).state == SUCCEEDED
    outs = [
        nix("eval", "--raw", f".#{attr}.outPath", cwd=flake)
        for attr in ("onnxruntime-cpu", "onnxruntime-cuda-dyn")
    ]
    with bench.history() as history:
        pushed = sorted(p.output for p in history.pushes(build_id))
    assert pushed == sorted(outs)
    for out in outs:
        assert _narinfo(cache_dir, out).is_file(), out
