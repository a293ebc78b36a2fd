"""Shared code for the raw sqlite3 reference adapters."""

import os
import sqlite3
import time

from adapters._common import NoTimer


class SqliteRef:
    """mode='executemany': buffer rows in a Python list, one executemany in one transaction at close.
    mode='rowcommit':  one INSERT (execute) per scalar, commit every `commit_every` rows.
    normalized=False: run TEXT, tag TEXT columns, rowid table, no index.
    normalized=True:  run/tag as INTEGER ids, PRIMARY KEY(run, tag, step) WITHOUT ROWID
                      (what a real tracker needs for fast per-tag reads and upserts)."""

    def __init__(self, mode="executemany", normalized=False, commit_every=1000, synchronous=None):
        self.mode = mode
        self.normalized = normalized
        self.commit_every = commit_every
        self.synchronous = synchronous
        if normalized:
            self.schema = (
                "CREATE TABLE IF NOT EXISTS scalars(run INTEGER, tag INTEGER, step INTEGER, "
                "value REAL, walltime REAL, PRIMARY KEY(run, tag, step)) WITHOUT ROWID"
            )
        else:
            self.schema = (
                "CREATE TABLE IF NOT EXISTS scalars(run TEXT, tag TEXT, step INTEGER, "
                "value REAL, walltime REAL)"
            )
        self.insert = "INSERT INTO scalars VALUES (?,?,?,?,?)"

    # ids ---------------------------------------------------------------
    def run_key(self, i=0):
        return i if self.normalized else f"run-{i}"

    def tag_key(self, con, tag):
        if not self.normalized:
            return tag
        con.execute("CREATE TABLE IF NOT EXISTS tags(id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
        con.execute("INSERT OR IGNORE INTO tags(name) VALUES (?)", (tag,))
        return con.execute("SELECT id FROM tags WHERE name=?", (tag,)).fetchone()[0]

    def connect(self, out):
        con = sqlite3.connect(
            os.path.join(out, "bench.db"), isolation_level=None
        )  # autocommit; explicit BEGIN
        con.execute("PRAGMA journal_mode=WAL")
        if self.synchronous:
            con.execute(f"PRAGMA synchronous={self.synchronous}")
        con.execute(self.schema)
        con.execute("CREATE TABLE IF NOT EXISTS runs(id, name TEXT, created REAL)")
        return con

    # workloads ---------------------------------------------------------
    def _log(self, out, tags, vals, t):
        con = self.connect(out)
        run = self.run_key(0)
        tks = [self.tag_key(con, tag) for tag in tags]
        now = time.time
        if self.mode == "executemany":
            rows = []
            app = rows.append
            t.start()
            for i, v in enumerate(vals):
                for tk in tks:
                    app((run, tk, i, v, now()))
            t.lap()
            con.execute("BEGIN")
            con.executemany(self.insert, rows)
            con.execute("COMMIT")
            con.close()
            t.stop()
        else:
            ex = con.execute
            ins = self.insert
            every = self.commit_every
            pending = 0
            t.start()
            ex("BEGIN")
            for i, v in enumerate(vals):
                for tk in tks:
                    ex(ins, (run, tk, i, v, now()))
                    pending += 1
                    if pending >= every:
                        ex("COMMIT")
                        ex("BEGIN")
                        pending = 0
            t.lap()
            ex("COMMIT")
            con.close()
            t.stop()

    def workload_A(self, out, tag, vals, t):
        self._log(out, [tag], vals, t)

    def workload_B(self, out, tags, vals, t):
        self._log(out, tags, vals, t)

    def prepare_C(self, out, tag, vals):
        self._log(out, [tag], vals, NoTimer())

    def read_C(self, out, tag):
        con = sqlite3.connect(os.path.join(out, "bench.db"))
        tk = tag
        if self.normalized:
            tk = con.execute("SELECT id FROM tags WHERE name=?", (tag,)).fetchone()[0]
        rows = con.execute(
            "SELECT step, value FROM scalars WHERE run=? AND tag=? ORDER BY step",
            (self.run_key(0), tk),
        ).fetchall()
        con.close()
        return rows

    def setup_D(self, out):
        self.connect(out).close()

    def start_run_D(self, out, i):
        con = self.connect(out)
        con.execute("BEGIN")
        con.execute(
            "INSERT INTO runs VALUES (?,?,?)",
            (self.run_key(i + 1), f"run-{i}", time.time()),
        )
        tk = self.tag_key(con, "train/loss")
        con.execute(self.insert, (self.run_key(i + 1), tk, 0, 1.0, time.time()))
        con.execute("COMMIT")
        con.close()


def export(ref, g):
    """Populate module globals g with the adapter functions of SqliteRef instance ref."""
    g.update(
        setup_imports=lambda: None,
        workload_A=ref.workload_A,
        workload_B=ref.workload_B,
        prepare_C=ref.prepare_C,
        read_C=ref.read_C,
        setup_D=ref.setup_D,
        start_run_D=ref.start_run_D,
    )
