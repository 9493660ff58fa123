"""`workbench smoke` asks the built libonnxruntime.so for the release it is, through the C API
a C, C++ or Rust consumer uses (`OrtGetApiBase()->GetVersionString()`), besides Python's
`onnxruntime.__version__`, and fails naming both versions when it is another release.

ONNX Runtime cannot be built here: the library is the STAND-IN tests/standins/
standin-libonnxruntime.c, compiled by the system's C compiler for each test with the version
it reports; where a Python module is needed, the STAND-IN tests/standins/
standin-onnxruntime-python (no wheel can be installed here) reports its release from
STANDIN_ORT_VERSION. The probe's ctypes call, the child process it runs in and the discovery
of the library in an output are the real ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs

from workbench.artefacts.smoke_target import c_api_libraries, require_release
from workbench.cli.main import main
from workbench.debugging.smoke import PROBE

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"
CPU = "onnxruntime-python313-cpu-avx2"

pytestmark = needs("cc")


def standin_library(directory: Path, version: str) -> Path:
    """lib/libonnxruntime.so.VERSION with the usual links, as ORT's install leaves them."""
    lib = directory / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    built = lib / f"libonnxruntime.so.{version}"
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            f'-DSTANDIN_VERSION="{version}"',
            "-o",
            str(built),
            str(STANDINS / "standin-libonnxruntime.c"),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (lib / "libonnxruntime.so.1").symlink_to(built.name)
    (lib / "libonnxruntime.so").symlink_to("libonnxruntime.so.1")
    return built


def probe_c_api(library: Path | str) -> dict:
    done = subprocess.run(
        [sys.executable, str(PROBE), "--c-api-version", str(library)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("WORKBENCH-C-API ")]
    return json.loads(line.removeprefix("WORKBENCH-C-API "))


def test_the_probe_reads_the_c_api_version_string_of_a_library(tmp_path: Path) -> None:
    built = standin_library(tmp_path / "a", "1.24.2")
    assert probe_c_api(built) == {"library": str(built), "version": "1.24.2"}
    other = standin_library(tmp_path / "b", "1.22.2")
    assert probe_c_api(other)["version"] == "1.22.2"
    # A library without ORT's entry point, and none at all, say so instead of a version.
    libm = subprocess.run(
        ["cc", "-print-file-name=libm.so.6"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if os.path.isabs(libm):
        assert "exports no OrtGetApiBase" in probe_c_api(libm)["error"]
    assert probe_c_api(tmp_path / "nowhere.so")["error"].startswith("cannot load it: ")


def test_the_library_is_found_in_the_output_one_per_directory(tmp_path: Path) -> None:
    output = tmp_path / "out"
    standin_library(output, "1.24.2")
    (output / "lib" / "libonnxruntime_providers_shared.so").write_text("")
    assert c_api_libraries(output) == [output / "lib" / "libonnxruntime.so"]
    assert c_api_libraries(tmp_path / "empty") == []


def test_a_c_api_of_another_release_fails_the_check_naming_both() -> None:
    check = {
        "onnxruntime": "1.24.2",
        "c_api": [
            {"library": "/nix/store/x-onnxruntime/lib/libonnxruntime.so", "version": "1.23.2"}
        ],
    }
    why = require_release(check, "1.24.2")
    assert why is not None
    assert why.startswith("built as ONNX Runtime 1.24.2, but the C API of /nix/store/x-onnx")
    assert "GetVersionString()) says 1.23.2" in why
    check["c_api"][0]["version"] = "1.24.2"
    assert require_release(check, "1.24.2") is None
    unread = {"onnxruntime": "1.24.2", "c_api": [{"library": "/l.so", "error": "cannot load it"}]}
    assert "could not be asked for its version: cannot load it" in require_release(unread, "1.24.2")
    # Python's version is checked first, as before.
    assert "onnxruntime.__version__ says 1.23.2" in require_release(
        {"onnxruntime": "1.23.2", "c_api": []}, "1.24.2"
    )


def built_variant(tmp_path: Path, python_says: str, c_api_says: str) -> Path:
    """result-NAME of 1.24.2 of a variant, as a Flox build leaves it: bin/python (the test's
    Python with the stand-in module) and the build's lib/libonnxruntime.so."""
    link = tmp_path / f"result-{CPU}-ort1_24_2"
    standin_library(link, c_api_says)
    (link / "bin").mkdir()
    python = link / "bin" / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{STANDINS / "standin-onnxruntime-python"}" '
        f'STANDIN_ORT_VERSION="{python_says}" exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return link


@pytest.mark.parametrize(("c_api_says", "passes"), [("1.24.2", True), ("1.23.2", False)])
def test_smoke_of_a_release_checks_its_c_api(
    tmp_path: Path, monkeypatch, capsys, c_api_says: str, passes: bool
) -> None:
    link = built_variant(tmp_path, "1.24.2", c_api_says)
    model = tmp_path / "model.onnx"
    model.write_bytes(b"the stand-in module runs no model")
    monkeypatch.setenv("ONNX_TEST_MODEL", str(model))
    monkeypatch.chdir(tmp_path)
    state = ["--config", str(REPO / "configs"), "--state-dir", str(tmp_path / "state")]
    code = main([*state, "smoke", "--json", CPU, "--ort", "1.24.2"])
    result = json.loads(capsys.readouterr().out)
    library = str(link / "lib" / "libonnxruntime.so")
    assert result["check"]["onnxruntime"] == "1.24.2"
    assert result["check"]["c_api"] == [{"library": library, "version": c_api_says}]
    if passes:
        assert code == 0 and result["status"] == "passed", result["message"]
    else:
        assert code == 1 and result["status"] == "failed"
        assert result["message"].startswith(
            f"built as ONNX Runtime 1.24.2, but the C API of {library} "
            "(OrtGetApiBase()->GetVersionString()) says 1.23.2"
        )
    # The text report shows what the C API said.
    main([*state, "smoke", CPU, "--ort", "1.24.2"])
    out = capsys.readouterr().out
    assert f"C API (OrtGetApiBase()->GetVersionString()) of {library}: {c_api_says}" in out


def test_smoke_python_with_a_library_checks_it_against_the_release(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    link = built_variant(tmp_path, "1.22.2", "1.22.2")
    model = tmp_path / "model.onnx"
    model.write_bytes(b"x")
    monkeypatch.setenv("ONNX_TEST_MODEL", str(model))
    python = str(link / "bin" / "python")
    library = str(link / "lib" / "libonnxruntime.so.1.22.2")
    args = ["smoke", "--json", "--python", python, "--library", library, "--ort"]
    assert main([*args, "1.22.2"]) == 0
    capsys.readouterr()
    assert main([*args, "1.24.2"]) == 1
    result = json.loads(capsys.readouterr().out)
    # Python's module is the first to disagree here; both are the library's release.
    assert "onnxruntime.__version__ says 1.22.2" in result["message"]
    assert result["check"]["c_api"] == [{"library": library, "version": "1.22.2"}]


@pytest.mark.slow
@pytest.mark.nix
@needs("nix-build", debian="nix-bin")
def test_a_store_outputs_library_is_found_through_its_closure(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """As nixpkgs' python3Packages.onnxruntime refers to the onnxruntime it was built with: the
    variant's output (bin/python here) has no lib/, its C++ package in its closure has. Real
    Nix: the library's directory added to the store, the output a derivation referring to it."""
    from nix_testing import nix_env

    cpp = tmp_path / "cpp"
    standin_library(cpp, "1.23.2")
    env = nix_env(tmp_path)
    added = subprocess.run(
        ["nix-store", "--add", str(cpp)], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    wrapper = (
        f'#!/bin/sh\nPYTHONPATH="{STANDINS / "standin-onnxruntime-python"}" '
        f'STANDIN_ORT_VERSION=1.24.2 exec "{sys.executable}" "$@"\n'
    )
    script = (
        "mkdir -p $out/bin $out/nix-support && echo $cpp > $out/nix-support/cpp && "
        "printf '%s' \"$wrapper\" > $out/bin/python && chmod +x $out/bin/python"
    )
    expression = f"""
      derivation {{
        name = "standin-{CPU}-ort1_24_2";
        system = builtins.currentSystem;
        builder = "/bin/sh";
        PATH = "/usr/bin:/bin";
        cpp = builtins.storePath "{added}";
        wrapper = {json.dumps(wrapper)};
        args = [ "-c" {json.dumps(script)} ];
      }}
    """
    link = tmp_path / f"result-{CPU}-ort1_24_2"
    built = subprocess.run(
        ["nix-build", "--expr", expression, "-o", str(link)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert not (link / "lib").exists()
    library = Path(added) / "lib" / "libonnxruntime.so"
    assert c_api_libraries(link) == [library]

    model = tmp_path / "model.onnx"
    model.write_bytes(b"the stand-in module runs no model")
    monkeypatch.setenv("ONNX_TEST_MODEL", str(model))
    monkeypatch.chdir(tmp_path)
    state = ["--config", str(REPO / "configs"), "--state-dir", str(tmp_path / "state")]
    assert main([*state, "smoke", "--json", CPU, "--ort", "1.24.2"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["check"]["c_api"] == [{"library": str(library), "version": "1.23.2"}]
    assert "(OrtGetApiBase()->GetVersionString()) says 1.23.2" in result["message"]
