"""What a build produced: the CUDA architectures in it, against what the build asked for.

cuobjdump (CUDA toolkit) and a library with CUDA code cannot exist here, so the listings are
RECORDED text in cuobjdump's format: `cuobjdump --list-elf LIB` prints one line per embedded
cubin, "ELF file    1: tmpxft_000515aa_00000000-0.sm_86.cubin" (a real listing is quoted in
github.com/leejet/stable-diffusion.cpp/issues/604), and `--list-ptx` the same with "PTX file"
and .ptx (CUDA Binary Utilities manual, cuobjdump's --list-elf/--list-ptx options).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from workbench.artefacts.sizes import (
    architecture_warnings,
    architectures_asked,
    architectures_listed,
    collect,
    out_links,
)

REPO = Path(__file__).resolve().parents[2]
CUDA = "onnxruntime-python313-cuda12_9-sm90-avx512"
CPU = "onnxruntime-python313-cpu-avx2"

# A provider library built for an sm_86 GPU with a sm_90a kernel beside it: 4 cubins, 1 PTX.
LIST_ELF_SM86 = """\
ELF file    1: tmpxft_000515aa_00000000-0.sm_86.cubin
ELF file    2: tmpxft_000515aa_00000000-1.sm_86.cubin
ELF file    3: tmpxft_000515aa_00000000-2.sm_86.cubin
ELF file    4: tmpxft_00051b3c_00000000-0.sm_90a.cubin
"""
LIST_PTX_SM86 = "PTX file    1: tmpxft_000515aa_00000000-0.sm_86.ptx\n"


def test_a_listing_names_its_architectures() -> None:
    assert architectures_listed(LIST_ELF_SM86) == {"86", "90a"}
    assert architectures_listed(LIST_PTX_SM86) == {"86"}
    assert architectures_listed("") == set()
    # cuobjdump's complaint about a library without device code names nothing.
    assert (
        architectures_listed("cuobjdump info    : File 'libx.so' does not contain device code")
        == set()
    )


def test_what_a_build_asked_for_falls_back_to_the_target_own() -> None:
    assert architectures_asked(REPO, CUDA) == ("90",)  # the variant's SM
    assert architectures_asked(REPO, CUDA, ("75", "86")) == ("75", "86")  # settings.toml wins
    assert architectures_asked(REPO, CPU) == ()
    assert architectures_asked(REPO, "onnxruntime-cuda-hybrid") == ("90", "120")  # flavours.toml
    assert architectures_asked(REPO, "onnxruntime-cpu") == ()
    assert architectures_asked(REPO, "something-else") == ()


def test_warnings_name_what_is_missing_and_what_is_extra() -> None:
    sass, ptx = architectures_listed(LIST_ELF_SM86), architectures_listed(LIST_PTX_SM86)
    assert architecture_warnings(("90",), {"86"}, {"86"}) == [
        "asked for 90 but the libraries hold no code for it",
        "the libraries also hold code for 86, not asked for",
    ]
    # sm_90a is code for 9.0 devices: it covers 90, so only the sm_86 code is extra.
    assert architecture_warnings(("90",), sass, ptx) == [
        "the libraries also hold code for 86, not asked for"
    ]
    assert architecture_warnings(("75",), sass, ptx) == [
        "asked for 75 but the libraries hold no code for it",
        "the libraries also hold code for 86, 90a, not asked for",
    ]
    assert architecture_warnings(("86", "90"), sass, ptx) == []
    assert architecture_warnings((), sass, ptx) == []  # nothing asked: nothing to compare
    assert architecture_warnings(("90",), set(), set()) == []  # no CUDA code (no cuobjdump)


def standin_cuobjdump(directory: Path) -> Path:
    """STAND-IN cuobjdump (the CUDA toolkit cannot be installed here): prints the recorded
    listings above for ORT's provider library, and cuobjdump's no-device-code line otherwise."""
    script = directory / "cuobjdump"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"ELF, PTX = {LIST_ELF_SM86!r}, {LIST_PTX_SM86!r}\n"
        "flag, library = sys.argv[1], sys.argv[2]\n"
        "if 'providers_cuda' not in library:\n"
        "    print(f\"cuobjdump info    : File '{library}' does not contain device code\")\n"
        "    sys.exit(255)\n"
        "print(ELF if flag == '--list-elf' else PTX, end='')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def built_variant(tmp_path: Path) -> Path:
    """A checkout holding configs/ and a variant's result links, as `flox build` leaves them."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "configs").symlink_to(REPO / "configs")
    # Store-path names as Nix gives them: an output other than out is NAME-VERSION-OUTPUT.
    out = tmp_path / "store" / f"{'a' * 32}-{CUDA}-1.23.2"
    dev = tmp_path / "store" / f"{'b' * 32}-{CUDA}-1.23.2-dev"
    output = out / "lib" / "python3.13" / "site-packages" / "onnxruntime" / "capi"
    output.mkdir(parents=True)
    (output / "libonnxruntime_providers_cuda.so").write_bytes(b"\x7fELF provider")
    (output / "onnxruntime_pybind11_state.so").write_bytes(b"\x7fELF bindings")
    dev.mkdir()
    (tmp_path / "build.log").write_text("log\n")
    os.symlink(out, checkout / f"result-{CUDA}")
    os.symlink(dev, checkout / f"result-{CUDA}-dev")
    os.symlink(tmp_path / "build.log", checkout / f"result-{CUDA}-log")
    os.symlink(out, checkout / f"result-{CUDA}-buildCache")
    return checkout


def test_outputs_are_the_package_links_not_flox_log_or_build_cache(tmp_path) -> None:
    checkout = built_variant(tmp_path)
    assert [link.name for link in out_links(checkout, CUDA)] == [
        f"result-{CUDA}",
        f"result-{CUDA}-dev",
    ]


def test_an_ordinary_variant_build_warns_when_its_code_is_for_another_gpu(tmp_path) -> None:
    checkout = built_variant(tmp_path)
    cuobjdump = standin_cuobjdump(tmp_path)
    # settings.toml names no architectures (the default): the variant's sm90 is what it asked.
    found = collect(checkout, CUDA, (), cuobjdump=str(cuobjdump))
    assert found is not None
    assert found.sass == ("86", "90a") and found.ptx == ("86",)
    assert found.warnings == ("the libraries also hold code for 86, not asked for",)
    assert [o.link for o in found.outputs] == [f"result-{CUDA}", f"result-{CUDA}-dev"]
    # Built as asked: settings naming both architectures, no warning.
    assert collect(checkout, CUDA, ("86", "90"), cuobjdump=str(cuobjdump)).warnings == ()
    # Without cuobjdump nothing is listed and nothing is claimed.
    missing = collect(checkout, CUDA, (), cuobjdump=str(tmp_path / "no-cuobjdump"))
    assert missing.sass == () and missing.warnings == ()
