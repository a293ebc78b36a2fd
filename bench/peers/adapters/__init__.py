"""One module per library. Each module defines (all optional except setup_imports):

    PACKAGE        distribution name for the version column (importlib.metadata), or None
    LABEL          human-readable row label
    MAX_N          dict: workload -> largest n to run (A: scalars, B: steps per tag) for slow libraries;
                   the runner reports throughput measured at that n and marks the row as scaled
    setup_imports()                      import the library (timed separately as import_s)
    workload_A(out, tag, vals, t)        log vals[i] at step i for one tag; call t.start()/t.lap()/t.stop()
    workload_B(out, tags, vals, t)       20 tags x len(vals) steps
    prepare_C(out, tag, vals)            write one tag of len(vals) points (untimed, separate process)
    read_C(out, tag) -> sized sequence   read it back (timed, fresh process); or READERS = {name: fn}
    read_after_crash(out, tag)           K: read back after workload_A was SIGKILLed at t.lap()
                                         (default: read_C)
    setup_D(out) ; start_run_D(out, i)   create run + first log + close, timed per call

A new library: copy sqlite_executemany.py, fill in the library's public API, add its name below.
"""

# mlflow_log_metric is not benchmarked itself (mlflow_log_batch, the faster of mlflow's two
# paths, is); mlflow_log_batch imports its helpers.
ADAPTERS = [
    "sqlite_executemany",
    "tallyboard",
    "tensorboardx",
    "mlflow_log_batch",
    "aim",
    "trackio",
    "deepboard",
    "wandb_offline",
]
