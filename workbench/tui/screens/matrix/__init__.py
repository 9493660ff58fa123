"""The matrix screen: a whole matrix build, one row per variant."""
