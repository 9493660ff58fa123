"""The build history: its records, SQLite schema and connection, the store (`History`),
and the state directory kept private to its user."""
