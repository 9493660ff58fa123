"""Which result-* links are a target's outputs: those Nix named after the same package."""

from __future__ import annotations

from pathlib import Path

from workbench.artefacts.out_links import other_output_name
from workbench.artefacts.sizes import Artefacts, Output, out_links

HASH_A = "a" * 32
HASH_B = "b" * 32
HASH_C = "c" * 32


def test_an_output_is_named_after_its_package() -> None:
    main = f"/nix/store/{HASH_A}-onnxruntime-cpu-1.23.2"
    assert other_output_name(main, f"/nix/store/{HASH_B}-onnxruntime-cpu-1.23.2-debug") == "debug"
    assert other_output_name(main, f"/nix/store/{HASH_B}-onnxruntime-cpu-1.23.2-dev") == "dev"
    assert other_output_name(main, f"/nix/store/{HASH_B}-onnxruntime-1.23.2") is None
    assert other_output_name(main, f"/nix/store/{HASH_B}-onnxruntime-cpu-1.23.2-a-b") is None
    assert other_output_name(main, "/tmp/onnxruntime-cpu-1.23.2-debug") is None


def test_another_targets_result_is_not_an_output(tmp_path: Path) -> None:
    # The cuda-static flavour's attribute is `onnxruntime`: result-onnxruntime-cpu (another
    # flavour) and result-onnxruntime-cpu-debug must not be taken for its outputs.
    store = tmp_path / "store"
    store.mkdir()
    paths = {
        "result-onnxruntime": f"{HASH_A}-onnxruntime-1.23.2",
        "result-onnxruntime-debug": f"{HASH_A}-onnxruntime-1.23.2-debug",
        "result-onnxruntime-cpu": f"{HASH_B}-onnxruntime-cpu-1.23.2",
        "result-onnxruntime-cpu-debug": f"{HASH_B}-onnxruntime-cpu-1.23.2-debug",
        "result-onnxruntime-log": f"{HASH_C}-onnxruntime-1.23.2-log",
    }
    for link, name in paths.items():
        (store / name).mkdir()
        (tmp_path / link).symlink_to(store / name)
    assert [p.name for p in out_links(tmp_path, "onnxruntime")] == [
        "result-onnxruntime",
        "result-onnxruntime-debug",
    ]
    assert [p.name for p in out_links(tmp_path, "onnxruntime-cpu")] == [
        "result-onnxruntime-cpu",
        "result-onnxruntime-cpu-debug",
    ]


def test_the_debug_outputs_size_is_apart() -> None:
    found = Artefacts(
        (
            Output("result-x", f"/nix/store/{HASH_A}-x-1", 100, 1000),
            Output("result-x-dev", f"/nix/store/{HASH_A}-x-1-dev", 10, 1100),
            Output("result-x-debug", f"/nix/store/{HASH_A}-x-1-debug", 5000, 6000),
        )
    )
    assert found.nar_size == 110 and found.closure_size == 1100
    assert found.debug_nar_size == 5000
    assert Artefacts(found.outputs[:2]).debug_nar_size is None
