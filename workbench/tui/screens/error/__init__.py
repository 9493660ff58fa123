"""The error screen: a user error told in full."""
