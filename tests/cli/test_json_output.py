"""Every `--json` the CLI has prints one document with its keys sorted at every level, as the
README's "JSON output" section promises (issue 14: `bt --json` did not).

One test runs each command for real against one checkout: the iterate tests' stand-in flake
(tests/iterate/standin_repo.py, built by real Nix) with its configs, patch series and fixture
source; real gdb on a live `sleep`, a real iterate cycle (ninja under the supervisor, whose
build then feeds status, history, report and trace), the local host probed for `hosts`. The
command list is checked against the parser, so a new `--json` command without a case here fails.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from iterate.standin_repo import write_standin_repo
from needed_tools import needs
from nix_testing import needs_nix, nix_env
from patch_fixture import diff_of, edited
from supervision.supervised import Bench

from workbench.cli.common import print_json
from workbench.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]


def json_commands() -> set[str]:
    """Every command whose parser has --json (or --format json), as its words."""
    found: set[str] = set()
    pending: list[tuple[str, argparse.ArgumentParser]] = [("", build_parser())]
    while pending:
        words, parser = pending.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    pending.append((f"{words} {name}".strip(), sub))
            elif "--json" in action.option_strings or (
                "--format" in action.option_strings and "json" in (action.choices or ())
            ):
                found.add(words)
    return found


def unsorted_objects(text: str) -> list[list[str]]:
    """The key lists, at any depth, that are not in sorted order."""
    wrong: list[list[str]] = []

    def check(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if keys != sorted(keys):
            wrong.append(keys)
        return dict(pairs)

    json.loads(text, object_pairs_hook=check)
    return wrong


def test_print_json_sorts_the_keys_at_every_level(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"z": {"y": [{"b": 1, "a": {"d": 2, "c": 1}}], "x": None}, "m": 0})
    text = capsys.readouterr().out
    assert unsorted_objects(text) == []
    assert text.index('"m"') < text.index('"z"') and text.index('"c"') < text.index('"d"')


def test_every_json_the_cli_writes_is_dumped_with_sorted_keys() -> None:
    """The fast half of the end-to-end test below: every json.dump/dumps in the CLI's code
    sorts its keys (print_json, through which the commands print, and trace's own)."""
    calls = []
    for path in sorted((REPO / "workbench" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("dump", "dumps")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "json"
            ):
                sorted_keys = any(
                    k.arg == "sort_keys" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in node.keywords
                )
                calls.append((f"{path.name}:{node.lineno}", sorted_keys))
    assert len(calls) >= 2, calls  # print_json's and trace's at least
    assert [where for where, sorted_keys in calls if not sorted_keys] == []


def test_the_unsorted_check_sees_a_nested_object() -> None:
    assert unsorted_objects('{"a": [{"b": 1, "c": {"e": 1, "d": 2}}], "z": 0}') == [["e", "d"]]
    nested = {"b": {"y": 1, "x": [{"q": 1, "p": 2}]}}
    assert unsorted_objects(json.dumps(nested, sort_keys=True)) == []


@pytest.mark.slow
@needs_nix[0]
@needs_nix[1]
@needs("gdb", "git", "cmake", "ninja", "g++", "nix")
def test_every_json_command_sorts_its_keys_at_every_level(bench: Bench, tmp_path: Path) -> None:
    repo = write_standin_repo(tmp_path / "repo")
    bench.extra_env.update(nix_env(tmp_path))
    config = ["--config", str(repo.configs)]
    incoming_directory = tmp_path / "incoming"
    incoming_directory.mkdir()
    incoming = str(incoming_directory)
    (incoming_directory / "import-me.patch").write_text(
        diff_of({"light_5.cc": edited(repo.source, "light_5.cc", "+ digits;", "+ 5;")})
    )
    source = repo.source
    empty_output = tmp_path / "empty-result"  # a flavour's result with nothing in it
    empty_output.mkdir()
    sleeper = subprocess.Popen(["sleep", "120"], start_new_session=True)
    build_id: list[int] = []

    def iterate() -> list[str]:
        return [*config, "iterate", "cpu", "-j", "2", "--no-smoke", "--json"]

    def after_the_build(*words: str) -> Callable[[], list[str]]:
        # The iterate cycle above was a build of the workspace, under the supervisor.
        return lambda: [word.replace("ID", str(build_id[0])) for word in words]

    # In order: iterate first, as the later ones read its build. (argv, the exit codes allowed)
    cases: dict[str, tuple[Callable[[], list[str]], tuple[int, ...]]] = {
        "iterate": (iterate, (0,)),
        "status": (after_the_build("status", "--json"), (0,)),
        "history": (after_the_build("history", "--json"), (0,)),
        "report": (after_the_build("report", "ID", "--format", "json"), (0,)),
        "variants": (lambda: [*config, "variants", "--json"], (0,)),
        "doctor": (lambda: [*config, "doctor", "--json"], (0,)),
        "config show": (lambda: [*config, "config", "show", "--json"], (0,)),
        "patches list": (lambda: [*config, "patches", "list", "--json"], (0,)),
        "patches check": (
            lambda: [*config, "patches", "check", "--source", str(repo.source), "--json"],
            (0, 1),  # the fixture series holds patches that do not apply: exit 1, still JSON
        ),
        "patches import": (
            lambda: [*config, "patches", "import", incoming, "--source", str(source), "--json"],
            (0, 1),
        ),
        "env": (lambda: [*config, "env", "cpu", "--result", str(empty_output), "--json"], (0,)),
        "layout": (
            lambda: [*config, "layout", "cpu", "--result", str(empty_output), "--json"],
            (1,),  # every promised file missing
        ),
        "flox sync": (lambda: [*config, "flox", "sync", "--json"], (0,)),
        "hosts": (lambda: [*config, "hosts", "--json"], (0,)),
        "init": (lambda: ["init", str(tmp_path / "initialised"), "--json"], (0,)),
        "push": (after_the_build("push", "ID", "--list", "--json"), (0,)),
        "bt": (lambda: ["bt", str(sleeper.pid), "--json"], (0,)),
        "debug-bt": (lambda: ["debug-bt", "--after", "0.5", "--json", "--", "sleep", "30"], (0,)),
        "smoke": (lambda: ["smoke", "--json", "--", "true"], (0,)),
    }
    assert set(cases) == json_commands()
    try:
        problems = []
        for name, (argv, allowed) in cases.items():
            result = bench.run(*argv(), cwd=repo.root, timeout=240)
            if result.returncode not in allowed:
                problems.append(f"{name}: exit {result.returncode}: {result.stderr[-1500:]}")
                continue
            try:
                wrong = unsorted_objects(result.stdout)
            except json.JSONDecodeError as error:
                problems.append(f"{name}: not one JSON document ({error}): {result.stdout[:300]}")
                continue
            if wrong:
                problems.append(f"{name}: keys not sorted: {wrong[:3]}")
            if name == "iterate":
                build_id.append(json.loads(result.stdout)["build"]["id"])
        # `trace -o -` is JSON on stdout too (a Chrome trace), sorted like the rest ...
        to_stdout = bench.run("trace", str(build_id[0]), "-o", "-", cwd=repo.root)
        assert to_stdout.returncode == 0, to_stdout.stderr
        assert unsorted_objects(to_stdout.stdout) == []
        # ... and so is the trace written to a file (`-o FILE`, or build-ID.trace.json).
        written = repo.root / "sorted.trace.json"
        to_file = bench.run("trace", str(build_id[0]), "-o", str(written), cwd=repo.root)
        assert to_file.returncode == 0, to_file.stderr
        assert json.loads(written.read_text()) == json.loads(to_stdout.stdout)
        assert unsorted_objects(written.read_text()) == []
        assert problems == []
    finally:
        sleeper.kill()
        sleeper.wait()
