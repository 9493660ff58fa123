"""Each flavour's output layout, laid out by its real post-install steps under real Nix.

tests/nix/flavour-build.nix is a STAND-IN for ORT's build tree (real archives and shared
objects made with the host's cc and ar); the steps that turn it into the flavour's output are
nix/flavour-install.nix's own. The layout check (workbench.artefacts.layout) passes on what they
leave and fails, naming the file, on what they do not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nix_testing import needs_nix, nix_env

from workbench.artefacts.consumer_env import as_shell, consumer_environment
from workbench.artefacts.layout import check_layout, file_contains
from workbench.configs.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]
pytestmark = needs_nix


STANDIN_NVCC = REPO / "tests" / "nix" / "standin-nvcc"


def standin_input(tmp_path: Path, name: str, archives: tuple[str, ...]) -> Path:
    """A stand-in for a nixpkgs input (protobuf, cpuinfo): lib/ with real archives."""
    directory = tmp_path / name
    (directory / "lib").mkdir(parents=True, exist_ok=True)
    source = tmp_path / f"{name}.c"
    source.write_text(f"int standin_{name.replace('-', '_')}(void) {{ return 1; }}\n")
    subprocess.run(["cc", "-c", str(source), "-o", str(tmp_path / f"{name}.o")], check=True)
    for archive in archives:
        subprocess.run(
            ["ar", "rcs", str(directory / "lib" / archive), str(tmp_path / f"{name}.o")],
            check=True,
        )
    return directory


def run_build(
    tmp_path: Path,
    linkage: str,
    cuda: bool,
    cpuinfo_archives: tuple[str, ...] = ("libcpuinfo.a",),
    extra: tuple[str, ...] = (),
    **flags: bool,
) -> subprocess.CompletedProcess[str]:
    cudnn = tmp_path / "cudnn"
    (cudnn / "lib").mkdir(parents=True, exist_ok=True)
    (cudnn / "lib" / "libcudnn.so.9").write_bytes(b"\x7fELF stand-in cudnn")
    protobuf = standin_input(tmp_path, "protobuf", ("libprotobuf-lite.a", "libprotobuf.a"))
    cpuinfo = standin_input(tmp_path, "cpuinfo", cpuinfo_archives)
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
        "--arg",
        "protobuf",
        str(protobuf),
        "--arg",
        "cpuinfo",
        str(cpuinfo),
        "--no-out-link",
        *extra,
    ]
    for name, value in flags.items():
        argv += ["--arg", name, "true" if value else "false"]
    return subprocess.run(
        argv, env=nix_env(tmp_path), capture_output=True, text=True, timeout=300, check=False
    )


def build_outputs(tmp_path: Path, linkage: str, cuda: bool, **flags: bool) -> tuple[Path, Path]:
    """The build's `out` (what nix-build prints) and `debug` (its derivation's other output)."""
    done = run_build(tmp_path, linkage, cuda, **flags)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.strip().splitlines()[-1]

    def query(*argv: str) -> list[str]:
        return subprocess.run(
            ["nix-store", "--query", *argv],
            env=nix_env(tmp_path),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()

    [deriver] = query("--deriver", out)
    outputs = query("--outputs", deriver)
    [debug] = [path for path in outputs if path != out]
    assert debug[44:] == out[44:] + "-debug", outputs  # /nix/store/HASH- is 44 characters
    return Path(out), Path(debug)


def build(tmp_path: Path, linkage: str, cuda: bool, **flags: bool) -> Path:
    return build_outputs(tmp_path, linkage, cuda, **flags)[0]


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


def test_the_dependency_archives_come_from_nixpkgs_inputs_when_ort_built_none(tmp_path, flavours):
    # As in a real build (FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS), _deps/ has no protobuf
    # and no cpuinfo archive: the install copies them from the inputs, byte for byte.
    output = build(tmp_path, "static", False)
    assert check_layout(output, flavours["cpu"]) == []
    for name, archive in (("protobuf", "libprotobuf-lite.a"), ("cpuinfo", "libcpuinfo.a")):
        copied = (output / "lib" / archive).read_bytes()
        assert copied == (tmp_path / name / "lib" / archive).read_bytes()


def test_an_input_without_its_static_archive_fails_the_build_at_once_naming_it(tmp_path):
    done = run_build(tmp_path, "static", False, cpuinfo_archives=())
    assert done.returncode != 0
    assert "the static core needs archives that nixpkgs' inputs do not have:" in done.stderr
    missing = done.stderr.split("do not have:")[1].splitlines()[0].split()
    assert len(missing) == 1 and missing[0].endswith("-cpuinfo/lib/libcpuinfo.a")
    # Before the build: nothing of the tree was built.
    assert "stand-in: building the ORT tree" not in done.stderr


def test_the_static_cuda_flavour_device_links_and_merges(tmp_path, flavours):
    flavour = flavours["cuda-static"]
    architectures = '[ "90" "120a" ]'
    done = run_build(
        tmp_path,
        "static",
        True,
        extra=("--arg", "nvcc", str(STANDIN_NVCC), "--arg", "architectures", architectures),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = Path(done.stdout.strip().splitlines()[-1])
    assert check_layout(output, flavour) == []
    lib = output / "lib"
    members = subprocess.run(
        ["ar", "t", str(lib / "libonnxruntime.a")], capture_output=True, text=True, check=True
    ).stdout.split()
    # The provider's objects and the device link of its .cu objects, in the one archive.
    assert {"kernels_a.cu.o", "kernels_b.cu.o", "cuda_device_link.o"} <= set(members)
    symbols = subprocess.run(
        ["nm", str(lib / "cuda_device_link.o")], capture_output=True, text=True, check=True
    ).stdout
    assert "standin_dlink_sm_90" in symbols and "standin_dlink_sm_120a" in symbols
    linked = subprocess.run(
        ["strings", str(lib / "cuda_device_link.o")], capture_output=True, text=True, check=True
    ).stdout
    assert "kernels_a.cu.o kernels_b.cu.o" in linked and "cuda_execution_provider" not in linked
    assert (lib / "cudnn" / "libcudnn.so.9").is_file()


def test_the_standin_nvcc_refuses_what_real_nvcc_refuses(tmp_path):
    # A -gencode whose arch and code differ, and a missing input: as nvcc, a fatal error.
    obj = tmp_path / "a.o"
    subprocess.run(["cc", "-c", "-x", "c", "/dev/null", "-o", str(obj)], check=True)
    nvcc = str(STANDIN_NVCC / "bin" / "nvcc")
    bad = subprocess.run(
        [
            nvcc,
            "-dlink",
            "-gencode=arch=compute_90,code=sm_80",
            "-o",
            str(tmp_path / "x.o"),
            str(obj),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1 and "Unsupported gpu architecture" in bad.stderr
    missing = subprocess.run(
        [
            nvcc,
            "-dlink",
            "-gencode=arch=compute_90,code=sm_90",
            "-o",
            str(tmp_path / "x.o"),
            "no.o",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1 and "Could not open input file 'no.o'" in missing.stderr


# --- `workbench env` and `workbench layout` on the built outputs ------------------------------


def checkout_with(tmp_path: Path, links: dict[str, Path]) -> Path:
    """A checkout (configs/ and a flake.nix) holding `links` (link name -> built output)."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "configs", checkout / "configs")
    (checkout / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    for name, target in links.items():
        (checkout / name).symlink_to(target)
    return checkout


def workbench(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(checkout / "configs"), *args],
        capture_output=True,
        text=True,
        cwd=checkout,
        env={**os.environ, "HOME": str(checkout.parent / "home")},
        timeout=60,
        check=False,
    )


def test_env_and_layout_of_a_good_build(tmp_path):
    output = build(tmp_path, "hybrid", True)
    checkout = checkout_with(tmp_path, {"result-onnxruntime-cuda-hybrid": output})
    layout = workbench(checkout, "layout", "cuda-hybrid")
    assert layout.returncode == 0, layout.stderr
    assert layout.stdout == f"✓ cuda-hybrid: 9 promised files in {output}\n"
    assert layout.stderr == ""
    env = workbench(checkout, "env", "cuda-hybrid")
    assert env.returncode == 0, env.stderr
    # What a consumer's shell gets from eval "$(workbench env cuda-hybrid)".
    shell = f'LD_LIBRARY_PATH=/old; eval "{env.stdout}"; echo "$ORT_LIB_LOCATION|$LD_LIBRARY_PATH"'
    seen = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, check=True)
    assert seen.stdout == f"{output}/lib|{output}/lib/cudnn:/old\n"
    document = json.loads(workbench(checkout, "env", "cuda-hybrid", "--json").stdout)
    assert document["env"]["ORT_LIB_LOCATION"] == f"{output}/lib"


def test_layout_of_a_broken_build_exits_1_naming_each_problem(tmp_path):
    # A hybrid core whose runtime path is elsewhere, and a CPU build linked as the hybrid one.
    broken = build(tmp_path, "hybrid", True, runtimePathOk=False)
    checkout = checkout_with(tmp_path, {"result-onnxruntime-cuda-hybrid": broken})
    layout = workbench(checkout, "layout", "cuda-hybrid")
    assert layout.returncode == 1
    assert layout.stdout.startswith(
        "✗ lib/libonnxruntime.a: its runtime path (ORT's GetRuntimePath)"
    )
    assert len(layout.stdout.splitlines()) == 1
    cpu = build(tmp_path / "cpu", "static", False)
    (checkout / "result-onnxruntime-cuda-hybrid").unlink()
    (checkout / "result-onnxruntime-cuda-hybrid").symlink_to(cpu)
    layout = workbench(checkout, "layout", "cuda-hybrid", "--json")
    assert layout.returncode == 1
    problems = json.loads(layout.stdout)["problems"]
    assert "lib/libonnxruntime_providers_cuda.so: missing" in problems


def test_no_result_link_is_an_error_and_a_stale_bare_result_is_not_taken(tmp_path):
    cpu = build(tmp_path, "static", False)
    checkout = checkout_with(tmp_path, {})
    for command in ("env", "layout"):
        done = workbench(checkout, command, "cpu")
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(
            f"workbench: error: no result-onnxruntime-cpu or result-cpu (nor result) in {checkout}"
        )
    # A bare `result` from another package (this stand-in's name is standin-ort-static).
    (checkout / "result").symlink_to(cpu)
    done = workbench(checkout, "layout", "cpu")
    assert done.returncode == 2
    assert f"result points at {cpu}, not a build of onnxruntime-cpu" in done.stderr
    # --result names it explicitly: then it is checked.
    done = workbench(checkout, "layout", "cpu", "--result", str(checkout / "result"))
    assert done.returncode == 0, done.stderr
    # A bare `result` that is this flavour's package (onnxruntime-cpu-VERSION) is taken, saying so.
    named = run_build(
        tmp_path / "named", "static", False, extra=("--argstr", "pname", "onnxruntime-cpu")
    )
    assert named.returncode == 0, named.stderr[-3000:]
    (checkout / "result").unlink()
    (checkout / "result").symlink_to(named.stdout.strip().splitlines()[-1])
    done = workbench(checkout, "layout", "cpu")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"workbench: note: no result-onnxruntime-cpu or result-cpu in {checkout}: "
        "using result (onnxruntime-cpu-1.23.2)\n"
    )


def test_the_debug_output_holds_the_shared_objects_dwarf_where_bt_looks(tmp_path):
    # As nixpkgs' separate-debug-info hook leaves a hybrid flavour: its provider .so stripped
    # of DWARF in out, the DWARF by build id in the debug output, which `workbench bt` finds
    # for a library of that store path (the store's NAME-debug) without being told.
    from workbench.debugging.capture.symbols import check_symbols

    output, debug = build_outputs(tmp_path, "hybrid", True)
    provider = output / "lib" / "libonnxruntime_providers_cuda.so"
    debug_files = sorted((debug / "lib" / "debug" / ".build-id").glob("*/*.debug"))
    assert debug_files, "no separate debug file in the debug output"
    sections = subprocess.run(
        ["readelf", "-S", str(provider)], capture_output=True, text=True, check=True
    ).stdout
    assert ".debug_info" not in sections  # stripped into the debug output
    status = check_symbols(str(provider))
    assert status is not None and status.level == "separate", status
    assert str(status.debug_file) in {str(path) for path in debug_files}
    # The static core's archive is no ELF file: the hook leaves it (to stdenv's strip phase).
    assert (output / "lib" / "libonnxruntime.a").is_file()
