# workbench: a terminal workbench for building ONNX Runtime from source with CUDA, per GPU
# architecture and CPU instruction set.
#
#   nix run                    the workbench (TUI; `nix run . -- --help` for the CLI)
#   nix run .#debug-bt -- 3    GDB backtraces of a hung static CUDA build, after 3 s
#   nix build .#onnxruntime-python313-cuda12_9-sm90-avx512 --cores 8
#                              one variant of configs/matrix.toml (66 in all, each on its
#                              ISA's platform); `--cores` is ninja's -j and never changes the hash
#   nix build .#onnxruntime-cpu | .#onnxruntime-cuda-dyn | .#onnxruntime
#                              the builder flake's linkage flavours (the last: static CUDA,
#                              experimental)
#   nix develop                Python with the app's dependencies, gdb, ninja, cmake
#
# Everything is generated from configs/ and patches/series.toml (which patches each flavour and
# variant gets, in order) by nix/ (nix/flake-outputs.nix is the outputs function; the tests run
# it against a stand-in for nixpkgs, since nixpkgs cannot be fetched there).
#
# No flake.lock is committed: it cannot be made without network. The first `nix build` (or
# `nix flake lock`) on a machine with network writes it; the input below is pinned to a full
# revision, so the lock can only record that revision.
{
  description = "Terminal workbench for building ONNX Runtime from source with CUDA through Nix or Flox";

  # The seeds' pin, the same revision as configs/matrix.toml's nixpkgs_rev (checked at
  # evaluation: nix/flake-outputs.nix refuses a lock that drifted from it).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/ed142ab1b3a092c4d149245d0c4126a5d7ea00b0";

  outputs =
    { self, nixpkgs }:
    import ./nix/flake-outputs.nix {
      src = self;
      nixpkgsRev = nixpkgs.rev or null;
      # CUDA is unfree. cudaSupport is NOT set here: it is chosen per package by
      # nix/overrides.nix, so the CPU variants and the workbench do not pull in CUDA.
      pkgsFor =
        system:
        import nixpkgs {
          inherit system;
          config.allowUnfree = true;
        };
    };
}
