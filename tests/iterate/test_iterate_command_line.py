"""`workbench iterate` parses with its own module alone: a cycle imports no other command's."""

from __future__ import annotations

import json
import subprocess
import sys

from workbench.cli.main import COMMAND_MODULES, SOLE_COMMANDS, build_parser, command_word


def test_the_command_word_is_found_past_the_global_options() -> None:
    assert command_word(["iterate", "cpu"]) == "iterate"
    assert command_word(["--config", "iterate", "build", "cpu"]) == "build"  # a value, not it
    assert command_word(["--state-dir=/s", "--config", "c", "iterate", "-j", "2"]) == "iterate"
    assert command_word(["--help"]) is None
    assert command_word(["--config"]) is None
    assert command_word([]) is None


def test_iterate_gets_a_parser_of_its_own() -> None:
    parser = build_parser(SOLE_COMMANDS["iterate"])
    args = parser.parse_args(["--config", "c", "iterate", "cpu", "-j", "3", "--state-dir", "s"])
    assert (args.command, args.variant, args.config) == ("iterate", "cpu", "c")
    assert args.tail == ["-j", "3", "--state-dir", "s"]  # iterate reads them itself
    everything = build_parser()
    assert (
        vars(everything.parse_args(["iterate", "cpu"])).keys()
        == vars(parser.parse_args(["iterate", "cpu"])).keys()
    )


# What `workbench iterate ...` has imported once its parser ran (--help ends it there).
PROBE = """
import json, sys
from workbench.cli.main import main
try:
    main(["iterate", "--help"])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def test_the_iterate_command_imports_no_other_command_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: workbench iterate VARIANT" in done.stdout
    imported = set(json.loads(done.stdout.splitlines()[-1]))
    # cli.build_common and cli.follow_loop are iterate's too (it launches and follows the
    # supervised build); neither is a command module.
    others = set(COMMAND_MODULES) - {SOLE_COMMANDS["iterate"]}
    assert SOLE_COMMANDS["iterate"] in imported and not imported & others
    assert not any(name == "textual" or name.startswith("textual.") for name in imported)
