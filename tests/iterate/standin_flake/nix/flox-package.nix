# STAND-IN for the repository's nix/flox-package.nix, which a generated .flox/pkgs/NAME.nix
# calls (`import ../../nix/flox-package.nix { name = "NAME"; repo = ../..; }`, written by
# workbench/flox/sync.py). The real one evaluates the flake's outputs against nixpkgs (which
# cannot be fetched here) and returns packages.${system}.NAME: exactly what `nix build .#NAME`
# builds. This one returns the same package of this directory's stand-in flake, so the Flox
# file's derivation is the flake's (the iterate tests check the .drv paths are equal).
{
  name,
  repo ? ../.,
}:
let
  flake = import (repo + "/flake.nix");
in
(flake.outputs { self = null; }).packages.${builtins.currentSystem}.${name}
  or (throw "workbench: the flake offers no ${name} on ${builtins.currentSystem}")
