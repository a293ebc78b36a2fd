"""The read path's logic: group statistics, comparisons, run diffs and the runs listing.

Reads the table through `store/` only and never imports the write path (`run/`).
"""
