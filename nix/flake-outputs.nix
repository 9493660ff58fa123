# The flake's outputs, as a function of "a nixpkgs for this system" and "the source tree".
#
# flake.nix passes the real pinned nixpkgs; tests/configs/test_nix_overrides.py passes
# tests/nix/standin-nixpkgs.nix, so every line here except nixpkgs' own packages is exercised
# without network. Arguments:
#   pkgsFor     system -> nixpkgs for that system (allowUnfree already set: CUDA is unfree)
#   src         the repository (the flake's `self`, or a path/string in tests)
#   configDir   configs/ (matrix, flavours, settings); the tests point it at a modified copy
#   patchDir    patches/: series.toml and the patch files; the tests point it at a copy too
#   nixpkgsRev  the revision nixpkgs was locked to, when known: checked against configs/
#   systems     where packages are offered; a variant only on its ISA's platform
{
  pkgsFor,
  src,
  configDir ? src + "/configs",
  patchDir ? src + "/patches",
  nixpkgsRev ? null,
  systems ? [
    "x86_64-linux"
    "aarch64-linux"
  ],
}:
let
  inherit (builtins)
    elem
    filter
    listToAttrs
    map
    ;
  matrix = import ./variants.nix { inherit configDir; };
  # Which patches each flavour and variant gets, checked against the matrix's names.
  series = import ./series.nix { inherit patchDir matrix; };

  # One nixpkgs pin for everything: a lock that drifted from configs/matrix.toml would build
  # something the workbench does not describe.
  checkedRev =
    if nixpkgsRev == null || nixpkgsRev == matrix.nixpkgsRev then
      true
    else
      throw (
        "workbench: flake.lock pins nixpkgs ${nixpkgsRev} but configs/matrix.toml says nixpkgs_rev = ${matrix.nixpkgsRev}; "
        + "run `nix flake lock --override-input nixpkgs github:NixOS/nixpkgs/${matrix.nixpkgsRev}` or change matrix.toml"
      );

  forSystem =
    system:
    let
      pkgs = pkgsFor system;
      build = import ./overrides.nix {
        inherit pkgs series;
        inherit (matrix) settings;
      };
      workbench = import ./workbench.nix { inherit pkgs src; };
      byName = name: value: { inherit name value; };

      # A variant whose CUDA package set the pin lacks (configs/matrix.toml [nixpkgs_pin]) is
      # not offered: looking it up would end in nixpkgs' alias `throw`. The workbench names it
      # with the reason and what to build instead.
      # The other ONNX Runtime releases of configs/releases.toml sit beside the pin's own, their
      # names carrying the release (onnxruntime-python313-cpu-avx2-ort1_24_2); a combination a
      # release cannot build (Blackwell before 1.23) is not offered, as above.
      variants = map (spec: byName spec.name (build.variant spec)) (
        filter (spec: spec.platform == system && spec.unavailable == null) (
          matrix.variants ++ matrix.releaseVariants
        )
      );
      flavours = map (spec: byName spec.attr (build.flavour spec)) (
        filter (spec: elem system spec.platforms && spec.unavailable == null) (
          matrix.flavours ++ matrix.releaseFlavours
        )
      );

      # `nix run .#debug-bt -- 3`, as in the builder flake: GDB backtraces of a hung static
      # build, now through the workbench (which also spots the provider-bridge loops).
      debugBt = pkgs.writeShellApplication {
        name = "debug-bt";
        runtimeInputs = [
          workbench
          pkgs.gdb
        ];
        text = ''exec workbench debug-bt "$@"'';
      };
      app = drv: name: {
        type = "app";
        program = "${drv}/bin/${name}";
      };
    in
    assert checkedRev;
    {
      packages =
        listToAttrs (variants ++ flavours)
        // {
          inherit workbench;
          default = workbench;
        };
      apps = {
        workbench = app workbench "workbench";
        default = app workbench "workbench";
        debug-bt = app debugBt "debug-bt";
      };
      devShells.default = pkgs.mkShell {
        packages = filter (p: p != null) [
          (pkgs.python3.withPackages (
            ps:
            filter (p: p != null) [
              ps.textual
              ps.psutil
              ps.pygdbmi
              ps.rich
              ps.tomlkit
              ps.platformdirs
              ps.unidiff
              ps.hatchling
              ps.pytest
              ps.pytest-timeout
              ps.hypothesis
              # Not in every nixpkgs: missing ones are left out rather than failing the shell.
              (ps.pytest-textual-snapshot or null)
              (ps.import-linter or null)
            ]
          ))
          pkgs.gdb
          pkgs.ninja
          pkgs.cmake
          (pkgs.ruff or null)
        ];
      };
    };

  perSystem = listToAttrs (
    map (system: {
      name = system;
      value = forSystem system;
    }) systems
  );
  each = output: builtins.mapAttrs (_: outputs: outputs.${output}) perSystem;
in
{
  packages = each "packages";
  apps = each "apps";
  devShells = each "devShells";
}
