"""Samples of every thread's stack, taken with gdb, leaving the process as it was found.

Each sample attaches, reads all threads in two batched round trips, and detaches, so the
process runs normally between samples (and is never left traced if the workbench dies
between them). Between samples the threads' states and CPU time are polled from /proc:
that is where "always running" evidence comes from, since gdb sees only stopped threads.
"""
