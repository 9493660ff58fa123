"""Planning a build before it starts: its argv, what can be built, its jobs, the preview, the
other builds on the host and Nix's plan."""
