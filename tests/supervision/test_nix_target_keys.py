"""Which Nix targets a build command is locked on (`launch.build_trees`), from the argv the
workbench itself makes and from commands users give `workbench run`."""

from __future__ import annotations

from pathlib import Path

from workbench.planning.launch import (
    NIX_TARGET_KEY,
    build_trees,
    flox_build_argv,
    nix_build_argv,
    nix_targets,
)


def test_workbench_builds_are_keyed_on_their_target_beside_their_checkout(tmp_path: Path) -> None:
    argv = nix_build_argv("onnxruntime-cuda-dyn", 8, 1, "result-onnxruntime-cuda-dyn")
    assert build_trees(argv, tmp_path) == [str(tmp_path), NIX_TARGET_KEY + "onnxruntime-cuda-dyn"]
    assert nix_targets(flox_build_argv("onnxruntime-cpu", 4, 2)) == ["onnxruntime-cpu"]
    assert nix_targets(["flox", "build", "onnxruntime-cpu"]) == ["onnxruntime-cpu"]


def test_every_installable_of_a_nix_build_and_nothing_else() -> None:
    argv = [
        "nice", "-n", "5", "nix", "--extra-experimental-features", "nix-command flakes",
        "build", ".#a", "/src/builder#b", "path:/x#c", "-L",
        "--builders", "ssh-ng://host?remote-store=local#not-a-target",
        "--override-input", "nixpkgs", "path:/pin#not-either",
        "--option", "builders", "ssh://h#nor-this",
        "--out-link", "x#y",
    ]  # fmt: skip
    assert nix_targets(argv) == ["a", "b", "c"]
    assert nix_targets(["nix-build", "-A", "hello", "default.nix"]) == ["hello"]
    assert nix_targets(["nix", "eval", ".#a"]) == []  # builds nothing
    assert nix_targets(["nix", "build", "--file", "x#y"]) == []
    assert nix_targets(["ninja", "-C", "build#1"]) == []
    # A wrapper's own values are not the program (`nice -n 5 ninja -C b` names the tree b).
    assert build_trees(["nice", "-n", "5", "ninja", "-C", "b"], "/src")[-1] == "/src/b"
    assert nix_targets(["flox", "activate"]) == []
