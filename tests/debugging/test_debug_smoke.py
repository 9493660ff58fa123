"""Smoke runs: the real onnxruntime CPU wheel and onnx from PyPI, and a program that hangs."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from workbench.cli.main import main


def _needs_onnxruntime() -> None:
    pytest.importorskip("onnxruntime", reason="the smoke check needs the onnxruntime wheel")
    pytest.importorskip("onnx", reason="the smoke model is built with the onnx package")


def test_python_smoke_runs_the_model_on_every_provider(capsys) -> None:
    _needs_onnxruntime()
    assert main(["smoke", "--python", sys.executable, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["schema"] == "workbench-smoke/1"
    assert result["status"] == "passed" and result["model_source"] == "builtin"
    check = result["check"]
    import onnxruntime

    assert check["onnxruntime"] == onnxruntime.__version__
    assert "CPUExecutionProvider" in check["available_providers"]
    runs = {run["provider"]: run for run in check["runs"]}
    cpu = runs["CPUExecutionProvider"]
    assert cpu["ok"] and cpu["output"] == cpu["expected"] == [[5.0, 6.5], [14.0, 20.0]]


def test_onnx_test_model_overrides_the_builtin_model(tmp_path: Path, monkeypatch, capsys) -> None:
    _needs_onnxruntime()
    from workbench.debugging.smoke import build_test_model

    model = tmp_path / "mine.onnx"
    build_test_model(model)
    monkeypatch.setenv("ONNX_TEST_MODEL", str(model))
    assert main(["smoke", "--python", sys.executable, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == str(model) and result["model_source"] == "ONNX_TEST_MODEL"
    assert result["check"]["runs"][0]["output_shape"] == [2, 2]


def test_variant_smoke_uses_the_flox_result_link(tmp_path: Path, monkeypatch, capsys) -> None:
    _needs_onnxruntime()
    variant = "onnxruntime-python313-cpu-avx2"
    # `flox build` leaves result-NAME as a link to the whole output (a store path), never a
    # link to the interpreter alone. Linking the directory keeps pyvenv.cfg beside bin/, so
    # the interpreter started through it is still this virtual environment's (with the
    # onnxruntime wheel) even where the base Python lacks it.
    (tmp_path / f"result-{variant}").symlink_to(sys.prefix, target_is_directory=True)
    if not (tmp_path / f"result-{variant}" / "bin" / "python").exists():
        pytest.skip(f"{sys.prefix} has no bin/python, the interpreter a Flox output provides")
    monkeypatch.chdir(tmp_path)
    import onnxruntime

    code = main(["smoke", variant])
    out = capsys.readouterr().out
    if onnxruntime.__version__ == "1.23.2":
        assert code == 0 and "PASSED" in out
    else:
        # This wheel is not the release the variant is built as (1.23.2, the pin's): the smoke
        # ran it, and fails it for that, naming both.
        assert code == 1
        assert (
            f"built as ONNX Runtime 1.23.2, but onnxruntime.__version__ says "
            f"{onnxruntime.__version__}" in out
        )
    # It says which build it smoked (this one was not made by the workbench).
    assert f"smoking result-{variant} -> {Path(sys.prefix).resolve()}" in out


def test_missing_variant_says_how_to_build_it(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["smoke", "onnxruntime-python313-cuda12_9-sm90-avx512"]) == 2
    err = capsys.readouterr().err
    assert "no result-onnxruntime-python313-cuda12_9-sm90-avx512 here" in err
    assert "`workbench build onnxruntime-python313-cuda12_9-sm90-avx512`" in err
    assert main(["smoke", "../../etc/passwd"]) == 2


def test_command_smoke_sets_the_model_and_library_path(tmp_path: Path, capsys) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        model = os.environ["ONNX_TEST_MODEL"]
        print("model", model, os.path.isfile(model))
        print("libs", os.environ["LD_LIBRARY_PATH"].split(os.pathsep)[0])
        """
    )
    status = main(
        [
            "smoke",
            "--json",
            "--ld-library-path",
            "/opt/cudnn/lib",
            "--",
            sys.executable,
            "-c",
            script,
        ]
    )
    result = json.loads(capsys.readouterr().out)
    if result["model"] is None:
        pytest.skip("no onnx package to build the model with")
    assert status == 0 and result["status"] == "passed"
    assert f"model {result['model']} True" in result["output_tail"]
    assert "libs /opt/cudnn/lib" in result["output_tail"]


def test_a_hung_run_is_captured_and_diagnosed_before_it_is_stopped(programs, capsys) -> None:
    binary = str(programs["bridge_o2"])
    status = main(
        ["smoke", "--timeout", "1", "--samples", "2", "--interval", "0.1", "--json", "--", binary]
    )
    assert status == 3
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "hung"
    diagnosis = result["capture"]["diagnosis"]
    assert diagnosis["kind"] == "call-cycle"
    assert diagnosis["bridge"]["counterpart"] == "DataTypeImpl::GetType<float>"
    assert result["message"].startswith("hung: ProviderHostImpl::DataTypeImpl__GetType_float")
    leftovers = [p for p in psutil.process_iter(["exe"]) if p.info["exe"] == binary]
    assert leftovers == []
