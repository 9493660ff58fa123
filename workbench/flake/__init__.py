"""What the repository's flake offers, asked of Nix itself."""
