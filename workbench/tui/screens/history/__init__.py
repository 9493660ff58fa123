"""The history screen and the report and compare screens it opens."""
