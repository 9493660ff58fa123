"""The Flox environment of the repository, generated from the one matrix."""
