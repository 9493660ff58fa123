# The names of the 66 variants of configs/matrix.toml, in the matrix's order:
#
#   nix-instantiate --eval --strict --json nix/matrix.nix
#
# Needs no nixpkgs; tests/configs/test_nix_matrix.py checks that it equals workbench/configs/variants.py's list.
# For another config directory use nix/variant-names.nix with --arg configDir (this file has to
# be a plain value: nix-instantiate --eval only calls a file's function when given an --arg).
import ./variant-names.nix { }
