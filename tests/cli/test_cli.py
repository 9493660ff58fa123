"""The command line, run as users run it: a real `python -m workbench` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from workbench.configs.matrix import Matrix
from workbench.configs.variants import expand

REPO = Path(__file__).resolve().parents[2]


def workbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def test_version() -> None:
    result = workbench("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("workbench 0.")


def test_variants_names_and_json(matrix: Matrix) -> None:
    names = workbench("variants", "--names").stdout.split()
    assert names == [v.name for v in expand(matrix)]
    document = json.loads(workbench("variants", "--json").stdout)
    assert len(document["variants"]) == 66
    first = document["variants"][0]
    assert first["name"] == "onnxruntime-python312-cuda12_4-sm75-avx2"
    assert first["min_driver"] == "550.54.14"
    assert first["cmake_cuda_architectures"] == "75"
    assert [f["attr"] for f in document["flavours"]] == [
        "onnxruntime-cpu",
        "onnxruntime-cuda-hybrid",
        "onnxruntime-cuda-dyn",
        "onnxruntime",
    ]


def test_variants_match() -> None:
    names = workbench("variants", "--names", "--match", "sm90 armv9").stdout.split()
    assert names == [
        "onnxruntime-python312-cuda12_4-sm90-armv9",
        "onnxruntime-python313-cuda12_9-sm90-armv9",
    ]


def test_doctor_json_with_a_gpu(nvidia_smi) -> None:
    standin = nvidia_smi("h100.toml")
    result = workbench(
        "doctor",
        "--json",
        "--nvidia-smi",
        standin,
        env={"STANDIN_NVIDIA_SMI_FIXTURE": os.environ["STANDIN_NVIDIA_SMI_FIXTURE"]},
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "workbench-doctor/1"
    assert document["gpus"]["devices"][0]["sm"] == "sm90"
    assert document["gpus"]["driver_version"] == "550.54.15"
    # Driver 550 runs only CUDA 12.4, which the nixpkgs pin no longer has: the CPU variant.
    assert document["recommended"][0]["variant"].startswith("onnxruntime-python313-cpu-")
    assert {t["version"]: t["usable"] for t in document["cuda_toolkits"]}["12.9"] is False
    assert set(document["tools"]) == {"nix", "flox", "gdb", "ninja", "cmake", "nvcc"}
    assert document["parallelism"]["ninja_jobs"] >= 1


def test_doctor_human_output_without_gpu(tmp_path: Path) -> None:
    result = workbench("doctor", "--nvidia-smi", str(tmp_path / "none"))
    assert result.returncode == 0, result.stderr
    assert "no NVIDIA GPU" in result.stdout
    assert "Recommended variant" in result.stdout
    assert "onnxruntime-python313-cpu-" in result.stdout


def test_config_set_get_and_refusal(config_copy: Path) -> None:
    config = ["--config", str(config_copy)]
    assert workbench(*config, "config", "set", "ninja_jobs", "8").returncode == 0
    assert workbench(*config, "config", "get", "ninja_jobs").stdout.strip() == "8"
    assert workbench(*config, "config", "set", "cuda_architectures", "90,120").returncode == 0
    assert workbench(*config, "config", "get", "cuda_architectures").stdout.strip() == "90,120"
    before = (config_copy / "settings.toml").read_bytes()
    refused = workbench(*config, "config", "set", "ninja_jobs", "0")
    assert refused.returncode == 2
    assert "ninja_jobs = '0': refused" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (config_copy / "settings.toml").read_bytes() == before
    shown = json.loads(workbench(*config, "config", "show", "--json").stdout)
    assert shown["settings"]["cuda_architectures"] == ["90", "120"]


def test_config_from_the_environment_and_a_missing_directory(config_copy: Path) -> None:
    result = workbench("config", "get", "linkage", env={"WORKBENCH_CONFIG": str(config_copy)})
    assert result.stdout.strip() == "cuda-hybrid"
    missing = workbench("--config", "/nonexistent/configs", "variants")
    assert missing.returncode == 2
    assert "/nonexistent/configs: config directory (from --config) does not exist" in (
        missing.stderr
    )


def test_broken_toml_through_the_cli(config_copy: Path) -> None:
    path = config_copy / "settings.toml"
    path.write_text(path.read_text() + "\nccache = [\n")
    result = workbench("--config", str(config_copy), "config", "show")
    assert result.returncode == 2
    assert f"{path}:" in result.stderr and "malformed TOML" in result.stderr
