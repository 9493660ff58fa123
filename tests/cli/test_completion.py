"""Shell completion as bash runs it: the script `workbench completion bash` prints is sourced
in a real bash, whose completion function (the one `complete -p workbench` names) is called
with COMP_WORDS as bash sets them for a TAB; it asks the real `workbench` for candidates.
zsh and fish are not installed here: their scripts are checked to be argcomplete's for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs

REPO = Path(__file__).resolve().parents[2]
pytestmark = needs("bash")

TAB = r"""
source "$1"
line="$2"
COMP_LINE="$line"; COMP_POINT=${#line}
read -r -a COMP_WORDS <<< "$line"
[[ "$line" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
function=$(complete -p workbench | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
"$function" workbench "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture
def tab(tmp_path: Path):
    """Press TAB after a command line in bash; the candidates bash would offer."""
    bin_directory = tmp_path / "bin"
    bin_directory.mkdir()
    command = bin_directory / "workbench"  # `workbench` on PATH, as an installed one is
    command.write_text(f'#!/bin/sh\nexec {sys.executable} -m workbench "$@"\n')
    command.chmod(0o755)
    script = tmp_path / "workbench.bash"
    made = subprocess.run(
        [str(command), "completion", "bash"], capture_output=True, text=True, check=True
    )
    script.write_text(made.stdout)
    env = {
        **{k: v for k, v in os.environ.items() if k != "WORKBENCH_CONFIG"},
        "PATH": f"{bin_directory}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }

    def press(line: str) -> list[str]:
        result = subprocess.run(
            ["bash", "-c", TAB, "tab", str(script), line],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return [word.strip() for word in result.stdout.splitlines() if word.strip()]

    return press


def test_bash_completes_commands_variants_settings_and_build_ids(tab, tmp_path: Path) -> None:
    assert tab("workbench confi") == ["config"]
    assert tab("workbench build onnxruntime-python313-cuda12_9-sm90-avx512b") == [
        "onnxruntime-python313-cuda12_9-sm90-avx512bf16"
    ]
    assert "cuda-hybrid" in tab("workbench env ")
    assert tab("workbench config set nvcc_t") == ["nvcc_threads"]
    state = tmp_path / "state"
    for _ in range(2):
        ran = subprocess.run(
            [sys.executable, "-m", "workbench", "--state-dir", str(state), "run", "--", "true"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
    offered = tab(f"workbench --state-dir {state} report ")
    assert sorted(word for word in offered if not word.startswith("-")) == ["1", "2"]


def test_zsh_and_fish_get_their_own_scripts() -> None:
    def script(shell: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "workbench", "completion", shell],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        ).stdout

    assert script("zsh").startswith("#compdef workbench")
    assert "complete --command workbench" in script("fish")
