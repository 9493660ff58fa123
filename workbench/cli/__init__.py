"""The `workbench` command line: a thin layer over the domain core."""
