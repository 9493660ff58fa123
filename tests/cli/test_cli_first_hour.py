"""The command line as a newcomer meets it (issue 14): nothing matched is an error, piped
tables keep each name on its line, `patches list --for` lists what applies, `logs` needs no
ID, and other builds on the host are one line (each process with --verbose)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cli_errors import one_error_line
from needed_tools import needs
from supervision.supervised import Bench

from workbench.configs.matrix import load_matrix
from workbench.configs.variants import expand

REPO = Path(__file__).resolve().parents[2]


def test_variants_match_nothing_exits_1_and_prints_no_table(bench: Bench) -> None:
    result = bench.run("variants", "--match", "nothing")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip() == "workbench: no variant name contains all of: nothing"
    found = bench.run("variants", "--match", "sm90 armv9")
    assert found.returncode == 0 and "2 variants" in found.stdout


def test_piped_variants_keep_every_name_and_note_on_one_line(bench: Bench) -> None:
    result = bench.run("variants")  # stdout is a pipe here
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for variant in expand(load_matrix(REPO / "configs")):
        assert any(line.split()[:1] == [variant.name] for line in lines), variant.name
    note = [line for line in lines if line.startswith("✗ not offered")]
    assert note and note[0].endswith(")")  # the whole sentence on its line, not wrapped


def test_patches_list_for_a_target_lists_what_applies(bench: Bench) -> None:
    result = bench.run("patches", "list", "--for", "cuda-static")
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert "apply to cuda-static" in first
    applied = [line for line in rest if line[:3].strip().isdigit()]
    count = int(first.split(": ", 1)[1].split()[0])
    assert count == len(applied) > 0
    none = bench.run("patches", "list", "--for", "cpu")
    assert none.returncode == 0
    lines = none.stdout.splitlines()
    assert lines[0].split(": ", 1)[1].startswith("0 of its")
    assert "none:" in lines[1]  # says so, instead of a count and then nothing


def test_logs_without_an_id_shows_the_latest_build(bench: Bench, tmp_path: Path) -> None:
    first = bench.run("run", "--name", "one", "--", "sh", "-c", "echo first-build", cwd=tmp_path)
    second = bench.run("run", "--name", "two", "--", "sh", "-c", "echo second-build", cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    result = bench.run("logs")
    assert result.returncode == 0, result.stderr
    assert "second-build" in result.stdout and "first-build" not in result.stdout
    empty = Bench(tmp_path / "empty").run("logs")
    assert empty.returncode == 2 and "no builds yet" in empty.stderr


def test_other_builds_on_the_host_are_one_line_unless_verbose(bench: Bench, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "build.ninja").write_text("rule nap\n  command = sleep 120\nbuild x: nap\n")
    ninja = subprocess.Popen(["ninja", "-C", str(other)], stdout=subprocess.DEVNULL)
    try:
        quiet = bench.run("run", "--", "true", cwd=tmp_path)
        loud = bench.run("run", "--verbose", "--", "true", cwd=tmp_path)
    finally:
        ninja.kill()
        ninja.wait()
    said = [line for line in quiet.stderr.splitlines() if "other build process" in line]
    assert len(said) == 1 and "(--verbose lists them)" in said[0]
    assert f"pid {ninja.pid} " not in quiet.stderr
    assert f"pid {ninja.pid} ninja" in loud.stderr


def test_config_set_takes_a_value_that_starts_with_a_dash(bench: Bench, config_copy: Path) -> None:
    config = ("--config", str(config_copy))
    flags = bench.run(*config, "config", "set", "optimization_flags", "-O3")
    assert flags.returncode == 0, flags.stderr
    assert bench.run(*config, "config", "get", "optimization_flags").stdout == "-O3\n"
    several = bench.run(*config, "config", "set", "optimization_flags", "-O2", "-march=native")
    assert several.returncode == 0, several.stderr
    assert bench.run(*config, "config", "get", "optimization_flags").stdout == "-O2,-march=native\n"
    # `--` still works, and --config after the value is still the global option.
    dashes = bench.run(*config, "config", "set", "optimization_flags", "--", "-Os")
    assert dashes.returncode == 0, dashes.stderr
    assert bench.run(*config, "config", "get", "optimization_flags").stdout == "-Os\n"
    after = bench.run("config", "set", "optimization_flags", "-O1", "--config", str(config_copy))
    assert after.returncode == 0, after.stderr
    assert bench.run("config", "get", "optimization_flags", *config).stdout == "-O1\n"
    assert "give the value" in one_error_line(bench.run(*config, "config", "set", "ninja_jobs"))


def test_a_config_directory_the_nix_build_does_not_read_is_warned_about(
    bench: Bench, config_copy: Path, tmp_path: Path
) -> None:
    from workbench.history.store import History
    from workbench.planning.plan import prepare_build

    def preview_lines(config: Path) -> list[str]:
        with History(tmp_path / "preview") as history:
            return prepare_build(config, history, ["cpu"]).lines()

    outside = bench.run("--config", str(config_copy), "build", "cpu", "--dry-run", cwd=tmp_path)
    said = [line for line in outside.stderr.splitlines() if str(config_copy) in line]
    assert said == [
        f"workbench: warning: the Nix build evaluates {REPO / 'configs'}, not the chosen config "
        f"directory {config_copy}: only its job counts reach the build (keep it as configs/ "
        f"beside a flake.nix, or edit {REPO / 'configs'})"
    ]
    inside = bench.run("build", "cpu", "--dry-run", cwd=tmp_path)
    assert "the Nix build evaluates" not in inside.stderr
    checkout = tmp_path / "checkout"  # configs/ beside a flake.nix: that flake reads them
    shutil.copytree(config_copy, checkout / "configs")
    (checkout / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    beside = bench.run("--config", str(checkout / "configs"), "build", "cpu", "--dry-run")
    assert "the Nix build evaluates" not in beside.stderr
    assert beside.stdout.startswith("nix ") and f"# in {checkout}\n" in beside.stderr
    # The TUI's `b` shows the same line before it asks.
    warnings = [line for line in preview_lines(config_copy) if "the Nix build evaluates" in line]
    assert warnings == [said[0].removeprefix("workbench: ")]
    assert not any("the Nix build evaluates" in line for line in preview_lines(REPO / "configs"))


@needs("gdb")
def test_bt_shows_the_whole_command_shell_quoted(bench: Bench) -> None:
    from workbench.planning.launch import display

    # Longer than the 100 characters the header once cut it to, with words that need quoting.
    argv = ["sh", "-c", 'sleep 120; : "$@"', "workbench-test", "it's " + "long " * 30 + "end"]
    waiting = subprocess.Popen(argv, start_new_session=True)
    try:
        result = bench.run("bt", str(waiting.pid))
    finally:
        waiting.kill()
        waiting.wait()
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0]
    assert header.startswith(f"process {waiting.pid} ({display(argv)}): ")
    assert "'it'\"'\"'s long" in header and "end'" in header
