"""Each flavour's output layout, laid out by its real post-install steps under real Nix.

tests/nix/flavour-build.nix is a STAND-IN for ORT's build tree (real archives and shared
objects made with the host's cc and ar); the steps that turn it into the flavour's output are
nix/flavour-install.nix's own. The layout check (workbench.artefacts.layout) passes on what they
leave and fails, naming the file, on what they do not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from nix_testing import needs_nix, nix_env

from workbench.artefacts.consumer_env import as_shell, consumer_environment
from workbench.artefacts.layout import check_layout, file_contains
from workbench.configs.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]
pytestmark = needs_nix


def build(tmp_path: Path, linkage: str, cuda: bool, **flags: bool) -> Path:
    cudnn = tmp_path / "cudnn"
    (cudnn / "lib").mkdir(parents=True, exist_ok=True)
    (cudnn / "lib" / "libcudnn.so.9").write_bytes(b"\x7fELF stand-in cudnn")
    argv = [
        "nix-build",
        str(REPO / "tests" / "nix" / "flavour-build.nix"),
        "--argstr",
        "linkage",
        linkage,
        "--arg",
        "cuda",
        "true" if cuda else "false",
        "--arg",
        "cudnn",
        str(cudnn),
        "--no-out-link",
    ]
    for name, value in flags.items():
        argv += ["--arg", name, "true" if value else "false"]
    done = subprocess.run(
        argv, env=nix_env(tmp_path), capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def flavours():
    return {f.name: f for f in load_matrix(REPO / "configs").flavours}


@pytest.mark.parametrize(
    ("name", "linkage", "cuda"),
    [("cpu", "static", False), ("cuda-hybrid", "hybrid", True), ("cuda-dyn", "shared", True)],
)
def test_the_post_install_steps_lay_out_the_flavour(tmp_path, flavours, name, linkage, cuda):
    flavour = flavours[name]
    assert flavour.linkage == linkage
    output = build(tmp_path, linkage, cuda)
    assert check_layout(output, flavour) == []
    lib = output / "lib"
    if linkage != "shared":
        # One merged archive holding every component's objects, and a pkg-config file naming
        # the dependency archives beside it.
        members = subprocess.run(
            ["ar", "t", str(lib / "libonnxruntime.a")], capture_output=True, text=True, check=True
        ).stdout.split()
        assert members.count("core.o") == 2  # libonnxruntime_common.a + libonnxruntime_session.a
        pc = (lib / "pkgconfig" / "libonnxruntime.pc").read_text()
        assert f"Libs: -L{output}/lib -lonnxruntime" in pc and "-lprotobuf-lite" in pc
    if cuda:
        assert (lib / "cudnn" / "libcudnn.so.9").is_file()
    env = consumer_environment(output, flavour)
    if linkage == "shared":
        assert env["ORT_DYLIB_PATH"] == str(lib / "libonnxruntime.so")
    else:
        assert env["ORT_LIB_LOCATION"] == str(lib)
    assert ("LD_LIBRARY_PATH" in env) is cuda
    shell = as_shell(env)
    assert shell.count("export ") == len(env)


def test_a_hybrid_core_whose_runtime_path_is_elsewhere_fails_the_check(tmp_path, flavours):
    output = build(tmp_path, "hybrid", True, runtimePathOk=False)
    problems = check_layout(output, flavours["cuda-hybrid"])
    assert len(problems) == 1
    assert "GetRuntimePath" in problems[0] and f"{output.resolve()}/lib/" in problems[0]


def test_a_hybrid_build_without_its_provider_fails_in_the_build_itself(tmp_path):
    with pytest.raises(AssertionError, match=r"produced no libonnxruntime_providers_cuda\.so"):
        build(tmp_path, "hybrid", True, dropProvider=True)


def test_a_layout_missing_files_is_named_file_by_file(tmp_path, flavours):
    # A CPU flavour's output checked as the hybrid one: the CUDA files are not there.
    output = build(tmp_path, "static", False)
    problems = check_layout(output, flavours["cuda-hybrid"])
    assert "lib/libonnxruntime_providers_cuda.so: missing" in problems
    assert "lib/cudnn/libcudnn*.so*: missing" in problems
    assert check_layout(tmp_path / "nothing", flavours["cpu"])[0].endswith(
        "no such output (was the build successful?)"
    )


def test_file_contains_finds_a_needle_across_chunk_boundaries(tmp_path):
    blob = tmp_path / "blob"
    needle = b"/nix/store/abc-onnxruntime/lib/"
    blob.write_bytes(b"x" * ((1 << 20) - 5) + needle + b"y" * 100)
    assert file_contains(blob, needle)
    assert not file_contains(blob, b"/nix/store/other/lib/")
