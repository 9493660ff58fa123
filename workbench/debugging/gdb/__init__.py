"""gdb, started early and spoken to in MI3; whether it may attach (ptrace)."""
