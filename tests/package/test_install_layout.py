"""Where an installed workbench finds its checkout and writes its settings: per-user settings go
to the user's config directory and never dirty a checkout, derivation settings stay in the
checkout's tracked files, `workbench init DIR` writes a git checkout that commands run inside it
use, and `--version` names the commit."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_errors import one_error_line
from needed_tools import needs

REPO = Path(__file__).resolve().parents[2]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
needs_git = needs("git")


def bench(*args: str, cwd: Path, env: dict[str, str] | None = None):
    environment = {k: v for k, v in os.environ.items() if k != "WORKBENCH_CONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environment, **(env or {})},
        timeout=120,
        check=False,
    )


def git_status(directory: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(directory), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """`workbench init` run from a directory outside any checkout, committed."""
    result = bench("init", str(tmp_path / "ck"), cwd=tmp_path, env=GIT_IDENTITY)
    assert result.returncode == 0, result.stderr
    assert "committed" in result.stdout
    return tmp_path / "ck"


@needs_git
def test_init_writes_a_git_checkout_with_every_file_tracked(checkout: Path) -> None:
    tracked = subprocess.run(
        ["git", "-C", str(checkout), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in ("flake.nix", "configs/settings.toml", "patches/series.toml", "nix/config.nix"):
        assert name in tracked
    assert any(name.startswith(".flox/pkgs/") for name in tracked)
    assert "workbench/cli/main.py" in tracked  # the flake's own `workbench` package builds
    assert not any("__pycache__" in name for name in tracked)
    assert git_status(checkout) == ""
    again = bench("init", str(checkout), cwd=checkout.parent)
    assert "is not an empty directory" in one_error_line(again)


@needs_git
def test_commands_in_a_checkout_use_it_and_per_user_settings_leave_it_clean(
    checkout: Path, private_user_config: Path
) -> None:
    shown = bench("config", "show", cwd=checkout / "nix")  # any directory inside it
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].startswith(f"# {checkout / 'configs' / 'settings.toml'}")
    settings = checkout / "configs" / "settings.toml"
    before = settings.read_bytes()
    for key, value in (("ninja_jobs", "6"), ("max_jobs", "2"), ("cuda_job_memory_gb", "4.5")):
        result = bench("config", "set", key, value, cwd=checkout)
        assert result.returncode == 0, result.stderr
        user_file = private_user_config / "settings.toml"
        assert f"(written to {user_file}: yours, on this host" in result.stdout
    assert settings.read_bytes() == before and git_status(checkout) == ""
    assert bench("config", "get", "ninja_jobs", cwd=checkout).stdout == "6\n"
    assert stat.S_IMODE(private_user_config.stat().st_mode) == 0o700
    assert stat.S_IMODE((private_user_config / "settings.toml").stat().st_mode) == 0o600
    derivation = bench("config", "set", "nvcc_threads", "2", cwd=checkout)
    assert derivation.returncode == 0, derivation.stderr
    assert f"(written to {settings}: tracked by the checkout; changes what Nix builds)" in (
        derivation.stdout
    )
    assert git_status(checkout) == " M configs/settings.toml\n"
    preview = bench("build", "onnxruntime-python313-cpu-avx2", "--dry-run", cwd=checkout)
    assert preview.stdout.startswith("nix ") and "--cores 6 --max-jobs 2" in preview.stdout
    assert f"# in {checkout}\n" in preview.stderr
    assert "# 6 jobs from your settings (ninja_jobs)" in preview.stderr  # not the checkout's


@needs_git
def test_the_default_checkout_is_used_outside_any_and_a_bad_one_is_one_line(
    checkout: Path, tmp_path: Path, private_user_config: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    made = bench("config", "set", "checkout", str(checkout), cwd=outside)
    assert made.returncode == 0, made.stderr
    shown = bench("config", "show", cwd=outside)
    assert shown.stdout.splitlines()[0].startswith(f"# {checkout / 'configs' / 'settings.toml'}")
    # $WORKBENCH_CONFIG and --config still come first.
    chosen = bench("--config", str(REPO / "configs"), "config", "show", cwd=outside)
    assert chosen.stdout.startswith(f"# {REPO / 'configs' / 'settings.toml'}")
    user_file = private_user_config / "settings.toml"
    text = user_file.read_text().replace(str(checkout), str(tmp_path / "gone"))
    user_file.write_text(text)
    line = 1 + text[: text.index("checkout =")].count("\n")
    error = one_error_line(bench("variants", cwd=outside))
    assert f"{user_file}:{line}: checkout = " in error and "allowed: a checkout" in error
    refused = one_error_line(bench("config", "set", "checkout", str(outside), cwd=outside))
    assert "configs/matrix.toml does not exist" in refused


def test_a_bad_per_user_value_names_its_file_and_line(private_user_config: Path) -> None:
    user_file = private_user_config / "settings.toml"
    user_file.write_text("# mine\n\nmax_jobs = 0\n")
    error = one_error_line(bench("config", "show", cwd=REPO))
    assert f"{user_file}:3: max_jobs = 0: refused (out of range)" in error


def test_version_names_the_commit() -> None:
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not head:
        pytest.skip("the suite runs from a copy without .git")
    result = bench("--version", cwd=REPO)
    assert result.stdout.startswith(f"workbench 0.1.0 (commit {head[:12]}")


# --json commands this file does not run, and where their schema is checked instead.
JSON_ELSEWHERE = {
    "bt": "workbench-bt/1: tests/debugging/test_debug_cli.py",
    "debug-bt": "the same document as bt",
    "smoke": "workbench-smoke/1: tests/debugging/test_debug_smoke.py (needs a built variant)",
    "iterate": "its own SCHEMA (workbench/cli/iterate_command.py): needs an ORT source tree",
    "env": "needs a built flavour (result link); print_json adds workbench-env/1",
    "layout": "needs a built flavour (result link); print_json adds workbench-layout/1",
    "patches import": "needs an ORT source tree; print_json adds workbench-patches-import/1",
    "patches check": "needs an ORT source tree; print_json adds workbench-patches-check/1",
    "push": "--list needs a recorded build; print_json adds workbench-push/1",
}


def json_commands() -> list[str]:
    """Every command (and action) that takes --json, read from the real parser."""
    import argparse

    from workbench.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, prefix: list[str]):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*prefix, name])
            elif "--json" in action.option_strings:
                yield " ".join(prefix)

    return list(walk(build_parser(), []))


@needs_git
def test_every_json_document_names_its_versioned_schema(checkout: Path, tmp_path: Path) -> None:
    import json

    state = ["--state-dir", str(tmp_path / "state")]
    runs = {
        "variants": ["variants"],
        "doctor": ["doctor"],
        "config show": ["config", "show"],
        "status": [*state, "status"],
        "history": [*state, "history"],
        "patches list": ["patches", "list"],
        "hosts": ["hosts"],
        "flox sync": ["flox", "sync"],
        "init": ["init", str(tmp_path / "second")],
    }
    commands = json_commands()
    assert set(commands) == set(runs) | set(JSON_ELSEWHERE), "a --json command is unaccounted for"
    for command, argv in runs.items():
        result = bench(*argv, "--json", cwd=checkout, env=GIT_IDENTITY)
        assert result.returncode in (0, 1), (command, result.stderr)
        document = json.loads(result.stdout)
        expected = f"workbench-{command.replace(' ', '-')}/1"
        assert document["schema"] == expected, command


def test_a_piped_doctor_keeps_every_sentence_on_its_line() -> None:
    import json

    text = bench("doctor", cwd=REPO)
    assert text.returncode == 0, text.stderr
    document = json.loads(bench("doctor", "--json", cwd=REPO).stdout)
    sentences = [document["ptrace"]["reason"], *document["parallelism"]["reasons"]]
    sentences += [reason for item in document["recommended"] for reason in item["reasons"]]
    # Printed after "✗ N do not: ", so longer than 80 columns on their line.
    sentences += [t["reason"] for t in document["nixpkgs_pin"]["targets"] if t.get("reason")]
    long_ones = [sentence for sentence in sentences if len(sentence) > 60]
    assert long_ones, "nothing long enough to have wrapped at 80 columns"
    # The text and the JSON are two runs of doctor on a live host: a figure read between them
    # (the memory available, in the peak's sentence) may differ, so figures are compared as
    # "#": what is checked is that no sentence is cut across lines, not the host's figures.
    lines = [_figures_masked(line) for line in text.stdout.splitlines()]
    for sentence in long_ones:
        assert any(_figures_masked(sentence) in line for line in lines), sentence


def _figures_masked(text: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "#", text)


@needs_git
@pytest.mark.slow
@pytest.mark.nix
@needs("nix", debian="nix-bin")
def test_a_checkout_written_by_init_builds_a_variant(checkout: Path, tmp_path: Path) -> None:
    """`workbench build` from the directory init wrote, with real Nix. nixpkgs cannot be fetched
    here: the checkout's flake takes the STAND-IN nixpkgs (tests/nix/standin-nixpkgs.nix) as its
    input, the one line the tests' flake_on_the_standin changes too."""
    from nix_testing import NIX_CONFIG

    standin = tmp_path / "standin"
    standin.mkdir()
    shutil.copy(REPO / "tests" / "nix" / "standin-nixpkgs.nix", standin / "default.nix")
    (standin / "flake.nix").write_text("{ outputs = _: { }; }\n")
    flake = checkout / "flake.nix"
    text = flake.read_text()
    pinned = text[text.index('inputs.nixpkgs.url = "github:') :].split("\n", 1)[0]
    flake.write_text(text.replace(pinned, f'inputs.nixpkgs.url = "path:{standin}";'))
    subprocess.run(
        ["git", "-C", str(checkout), "commit", "-qam", "stand-in nixpkgs"],
        env={**os.environ, **GIT_IDENTITY},
        check=True,
    )
    env = {"NIX_CONFIG": NIX_CONFIG, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    state = str(tmp_path / "state")
    variant = "onnxruntime-python313-cpu-avx2"
    built = bench("--state-dir", state, "build", variant, "--jobs", "2", cwd=checkout, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"workbench: in {checkout};" in built.stderr
    assert (checkout / f"result-{variant}").is_symlink()
    report = bench("--state-dir", state, "report", "1", cwd=checkout, env=env)
    assert report.returncode == 0 and variant in report.stdout, report.stderr
