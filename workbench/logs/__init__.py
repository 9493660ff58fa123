"""Build logs as files: a line index for viewing and searching logs of millions of lines."""
