"""The write path: a run's writer, its records' way to the database, and what a run captures.

`writer.LogWriter` is what `ResultTable.new_run` returns; `sink.Sink` commits what it logs from a
background thread; `exit_paths` ends the runs still open when the process ends. The rest is what a
run records about itself (capture, environment, console, system metrics) and how it is continued
(relaunch). Uses the store and the vocabulary floor, never `analysis/`.
"""
