"""The iterate workspace: a git working copy of a variant's source with the patch series
applied as commits, configured once and rebuilt incrementally under the supervisor."""
