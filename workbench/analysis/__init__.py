"""Exact build measurements from ninja's own records: `.ninja_log` edges, the ninja graph, the
critical path, parallelism over time, time lost to too few jobs and to the tail, Chrome trace
export, and what a cgroup's OOM killer did. Nothing here imports Textual.
"""
