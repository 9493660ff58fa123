# The names of every variant of the matrix in `configDir`, in the matrix's order: what
# `workbench list` shows and what `packages.<system>` of the flake holds (each on its ISA's
# platform). Needs no nixpkgs.
#
#   nix-instantiate --eval --strict --json nix/variant-names.nix --arg configDir /copy/of/configs
#
# nix/matrix.nix is this applied to the repository's own configs/ (nix-instantiate --eval calls
# a file's function only when given some --arg, so the no-argument command needs a plain list).
{
  configDir ? ../configs,
}:
map (variant: variant.name) (import ./variants.nix { inherit configDir; }).variants
