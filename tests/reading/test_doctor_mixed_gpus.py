"""`workbench doctor` on a host with two GPUs of different architectures (issue 15, item 5).

The real CLI (`python -m workbench doctor`) asks the nvidia-smi stand-in (no GPU exists on the
test machines), which answers with the recorded output of an A100 (8.0) beside an RTX 4090
(8.9): tests/standins/nvidia-smi-fixtures/a100-and-rtx4090.toml. The CPU is this machine's, so
the variant names are read from `--json` of the same host and checked against the text: the
text must say first that no single variant name covers both GPUs, then the one build for all
(the setting, then the variant), then one variant per GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench_cli import run_workbench

MIXED = "a100-and-rtx4090.toml"
A100 = "NVIDIA A100-SXM4-80GB"
RTX4090 = "NVIDIA GeForce RTX 4090"


def doctor(nvidia_smi: str, *args: str, config: Path | None = None) -> str:
    result = run_workbench("doctor", "--nvidia-smi", nvidia_smi, *args, config=config)
    assert result.returncode == 0, result.stderr
    return result.stdout


def recommended_section(text: str) -> list[str]:
    """The lines under "Recommended variant", up to the next heading, unwrapped where Rich
    wrapped a long line at 80 columns (a continuation line starts without indentation)."""
    lines = text.split("\nRecommended variant\n", 1)[1].split("\n\n", 1)[0].splitlines()
    joined: list[str] = []
    for line in lines:
        if joined and not line.startswith(" "):
            joined[-1] += line
        else:
            joined.append(line)
    return joined


def test_the_text_says_first_no_single_variant_then_one_build_then_one_each(nvidia_smi) -> None:
    standin = nvidia_smi(MIXED)
    document = json.loads(doctor(standin, "--json"))
    mixed = document["mixed_gpus"]
    assert mixed is not None
    one_build = mixed["variant"]
    per_gpu = {entry["gpu"]: entry["variant"] for entry in mixed["per_gpu"]}
    assert set(per_gpu) == {A100, RTX4090}
    # Each GPU gets its own SM, on the same toolkit, Python and ISA; the one build is the
    # A100's variant (the oldest architecture among them, on the newest toolkit) with both.
    assert "-sm80-" in per_gpu[A100] and "-sm89-" in per_gpu[RTX4090]
    assert per_gpu[A100].replace("-sm80-", "-sm89-") == per_gpu[RTX4090]
    assert one_build == per_gpu[A100]
    assert mixed["cuda_architectures"] == ["80", "89"]
    assert mixed["one_build_commands"] == [
        "workbench config set cuda_architectures 80,89",
        f"workbench build {one_build}",
    ]
    assert mixed["flavour"] == document["linking"]["flavour"] == "cuda-hybrid"
    assert [item["variant"] for item in document["recommended"]] == [
        per_gpu[A100],
        per_gpu[RTX4090],
    ]

    section = recommended_section(doctor(standin))
    # 1. The first line says plainly that no single variant name covers both GPUs.
    assert "no single variant name covers them all" in section[0]
    assert f"{A100} sm80" in section[0] and f"{RTX4090} sm89" in section[0]
    assert section[0].strip() == mixed["headline"] + "."
    # 2. Then the one build for all: the setting, then the variant, each command on a line of
    # its own and whole (pasteable), and that the linking flavour builds the same setting.
    assert section[1].strip().startswith("One build for all of them")
    assert "CMAKE_CUDA_ARCHITECTURES=80;89" in section[1]
    assert section[2].strip() == "workbench config set cuda_architectures 80,89"
    assert section[3].strip() == f"workbench build {one_build}"
    linking = "- for linking, cuda-hybrid (below) builds the same cuda_architectures"
    assert section[4].strip() == linking
    # 3. Then, for one build per GPU, each GPU's variant with its reasons.
    assert section[5].strip() == "Or one variant per GPU:"
    assert section[6].strip() == f"{A100}: {per_gpu[A100]}"
    at_4090 = section.index(f"  {RTX4090}: {per_gpu[RTX4090]}")
    assert all(line.startswith("    - ") for line in section[7:at_4090])
    assert f"GPU {A100}: compute capability 8.0 is sm80" in section[7]
    assert f"GPU {RTX4090}: compute capability 8.9 is sm89" in section[at_4090 + 1]
    # No variant name is printed before the line that says none covers both GPUs.
    assert not any(name in section[0] for name in per_gpu.values())
    # The JSON's guidance is the same text in the same order.
    assert mixed["guidance"][0] == mixed["headline"]
    assert mixed["guidance"][1].startswith("One build for all of them")
    assert mixed["guidance"][2].startswith("Or one variant per GPU: ")
    assert mixed["guidance"][2].index(A100) < mixed["guidance"][2].index(RTX4090)


def test_the_one_build_follows_the_setting_as_it_is(nvidia_smi, config_copy: Path) -> None:
    standin = nvidia_smi(MIXED)
    # Set as the advice says: the command is not repeated, the build is all that is left.
    set_both = run_workbench("config", "set", "cuda_architectures", "80,89", config=config_copy)
    assert set_both.returncode == 0, set_both.stderr
    mixed = json.loads(doctor(standin, "--json", config=config_copy))["mixed_gpus"]
    assert mixed["configured"] == ["80", "89"]
    assert mixed["one_build_commands"] == [f"workbench build {mixed['variant']}"]
    section = recommended_section(doctor(standin, config=config_copy))
    assert section[2].strip() == f"workbench build {mixed['variant']}"
    assert "is 80,89 already: it names them all" in section[3]
    # Set to one of them: every variant would build that alone, per-GPU ones included.
    set_one = run_workbench("config", "set", "cuda_architectures", "89", config=config_copy)
    assert set_one.returncode == 0, set_one.stderr
    mixed = json.loads(doctor(standin, "--json", config=config_copy))["mixed_gpus"]
    assert mixed["one_build_commands"][0] == "workbench config set cuda_architectures 80,89"
    assert "is 89 now, which every variant builds instead of its own SM" in mixed["guidance"][1]
    assert 'until `workbench config set cuda_architectures ""` empties it' in mixed["guidance"][2]
    # And the way out that the per-GPU line gives works: the setting is empty again.
    emptied = run_workbench("config", "set", "cuda_architectures", "", config=config_copy)
    assert emptied.returncode == 0, emptied.stderr
    mixed = json.loads(doctor(standin, "--json", config=config_copy))["mixed_gpus"]
    assert mixed["configured"] == [] and len(mixed["one_build_commands"]) == 2


def test_one_architecture_has_no_mixed_guidance(nvidia_smi) -> None:
    text = doctor(nvidia_smi("h100-new-driver.toml"))
    section = recommended_section(text)
    assert section[0].strip().startswith("onnxruntime-") and "-sm90-" in section[0]
    assert "no single variant" not in text and "Or one variant per GPU" not in text
