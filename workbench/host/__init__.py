"""What this machine is and what it should build."""
