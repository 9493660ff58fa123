"""What the TOML files in configs/ say: the variant matrix, flavours and build settings."""
