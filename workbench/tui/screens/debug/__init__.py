"""The debug screen: a capture of a stuck process, its diagnosis, stacks and source."""
