"""The README's `config set` examples run as written, on a copy of the repository's configs.

Issue 14: `config set optimization_flags -O3` needed `--` without saying so; it works now, and
the README shows it (a value starting with "-"). Each example the README's command table gives
is run through the real CLI and read back with `config get`.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from workbench_cli import run_workbench

REPO = Path(__file__).resolve().parents[2]


def readme_config_set_examples() -> list[list[str]]:
    """The `config set KEY VALUE...` examples in the README's row for `workbench config set`."""
    row = next(
        line
        for line in (REPO / "README.md").read_text().splitlines()
        if line.startswith("| `workbench config set KEY VALUE` |")
    )
    return [shlex.split(example) for example in re.findall(r"`(config set [^`]+)`", row)]


def test_the_readme_shows_a_value_starting_with_a_dash() -> None:
    examples = readme_config_set_examples()
    assert len(examples) >= 3, examples
    assert any(words[3].startswith("-") for words in examples), examples


def test_every_readme_config_set_example_is_written_and_read_back(tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    shutil.copytree(REPO / "configs", configs)

    def cli(*words: str) -> subprocess.CompletedProcess[str]:
        return run_workbench(*words, config=configs)

    for words in readme_config_set_examples():
        key = words[2]
        before = cli("config", "get", key)
        done = cli(*words)
        assert done.returncode == 0, (words, done.stderr)
        assert "error" not in done.stderr, (words, done.stderr)
        after = cli("config", "get", key)
        assert after.returncode == 0 and after.stdout != before.stdout, (words, after)
    flags = cli("config", "get", "optimization_flags")
    assert flags.stdout == "-O3,-march=native\n", flags
