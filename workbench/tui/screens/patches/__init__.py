"""The patches screen: the patch series of a checkout."""
