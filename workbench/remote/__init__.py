"""Build hosts: configs/hosts.toml, SSH to them, and what each is doing."""
