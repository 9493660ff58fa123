"""The command line as a newcomer meets it (issue 14): nothing matched is an error, piped
tables keep each name on its line, `patches list --for` lists what applies, `logs` needs no
ID, and other builds on the host are one line (each process with --verbose)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from supervision.supervised import Bench

from workbench.configs.matrix import load_matrix
from workbench.configs.variants import expand

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    bench = Bench(tmp_path / "state")
    try:
        yield bench
    finally:
        bench.cleanup()


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
