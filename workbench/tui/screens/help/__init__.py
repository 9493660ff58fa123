"""The help screen: every key of the screen below it."""
