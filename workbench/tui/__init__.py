"""The Textual UI: a thin layer over the domain core in workbench/."""
