"""Cluster scale through PgBouncer in transaction pooling mode (tests/bouncer_support.py): more
writer processes than the server has connections, each row stored once; nothing a client does
leaks to the next client of the same server connection; refusals a cluster meets name their remedy.

The rest of the store's PostgreSQL tests also run through PgBouncer (`pg_url` and `db_url` are
parametrized with it: tests/store/test_postgres.py, test_copy.py, test_store.py, ...).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time

import pytest

import tallyboard as tb
from bouncer_support import bouncer
from own_postgres import own_server
from pg_support import connect
from tallyboard.store import Access, open_queries, open_store
from tallyboard.store.pg_session import OptionsRefused, ServerFull

# One short run of scalars, images and texts, as a job on a cluster logs it.
JOB = """
import sys, tallyboard as tb
url, name = sys.argv[1], sys.argv[2]
table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP, commit_interval=0.01)
run = table.new_run(name, auto_log_plt=False)
for step in range({steps}):
    run.add_scalar("train/loss", step * 0.5, step=step)
    if step % 50 == 0:
        run.add_text(f"text {{step}}", tag="log", step=step)
        run.add_image(bytes.fromhex({png!r}), tag="sample", step=step)
run.write_result(steps={steps})
"""
PNG_1X1 = (
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c49444154789c6338c1c0"
    "0000025c00c943c812460000000049454e44ae426082"
)


def jobs(url: str, count: int, steps: int, wave: int) -> list[int]:
    """Start `count` jobs `wave` at a time (each wave starts while the last still runs); exit codes."""
    script = JOB.format(steps=steps, png=PNG_1X1)
    running: list[subprocess.Popen] = []
    codes: list[int] = []
    for index in range(count):
        if len(running) >= wave:
            codes.append(running.pop(0).wait(timeout=120))
        command = [sys.executable, "-c", script, url, f"job-{index}"]
        running.append(subprocess.Popen(command))
    codes.extend(process.wait(timeout=120) for process in running)
    return codes


def test_more_jobs_than_server_connections_store_every_row_once():
    """8 jobs, 4 at a time, through PgBouncer's 2 server connections to a server that takes 3
    (bench/cluster.py runs 200 through 20)."""
    steps, count = 300, 8
    with own_server(max_connections=3, superuser_reserved_connections=0) as server:
        with bouncer(server.url, pool_size=2) as pooler:
            url = pooler.url_for(server.url)
            with tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP) as table:
                table.new_debug_run("schema").close()
            assert jobs(url, count=count, steps=steps, wave=4) == [0] * count
        with connect(server.url) as conn:
            runs = conn.execute("SELECT status, count(*) FROM runs WHERE run_id > 0 GROUP BY status")
            runs = runs.fetchall()
            per_run = conn.execute(
                "SELECT count(*), count(DISTINCT step), sum(value) FROM scalar_points"
                " WHERE run_id > 0 GROUP BY run_id"
            ).fetchall()
            texts = conn.execute("SELECT count(*), count(DISTINCT (run_id, step)) FROM texts").fetchone()
            images = conn.execute("SELECT count(*), count(DISTINCT (run_id, step)) FROM media").fetchone()
    assert runs == [("finished", count)]
    assert per_run == [(steps, steps, sum(step * 0.5 for step in range(steps)))] * count
    assert texts == images == (count * steps // 50, count * steps // 50)


def test_restarting_pgbouncer_mid_run_loses_and_doubles_nothing():
    """A restart drops every client connection (and what was in flight on it): the job reconnects,
    and the commit log (store/postgres.py) tells a COMMIT that landed from one that did not."""
    steps = 20_000
    with own_server() as server, bouncer(server.url, pool_size=2) as pooler:
        url = pooler.url_for(server.url)
        with tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP) as table:
            table.new_debug_run("schema").close()
        job = subprocess.Popen([sys.executable, "-c", JOB.format(steps=steps, png=PNG_1X1), url, "job"])
        restarts, seen = 0, 0
        while job.poll() is None and restarts < 3:
            with connect(server.url) as conn:
                stored = conn.execute("SELECT count(*) FROM scalar_points").fetchone()[0]
            if stored > seen:  # it made progress since the last restart
                seen = stored
                pooler.restart()
                restarts += 1
            time.sleep(0.05)
        assert job.wait(timeout=120) == 0 and restarts >= 1
        with connect(server.url) as conn:
            scalars = conn.execute(
                "SELECT count(*), count(DISTINCT step) FROM scalar_points WHERE run_id > 0"
            )
            assert scalars.fetchone() == (steps, steps)
            texts = conn.execute("SELECT count(*) FROM texts").fetchone()[0]
            images = conn.execute("SELECT count(*) FROM media").fetchone()[0]
    assert texts == images == steps // 50


def test_reading_leaves_the_shared_server_connection_writable():
    """A reader and a writer take turns on PgBouncer's one server connection: the reader's
    read-only transactions must not become the writer's (a session SET would)."""
    with own_server() as server, bouncer(server.url, pool_size=1) as pooler:
        url = pooler.url_for(server.url)
        with contextlib.ExitStack() as opened:
            writer = opened.enter_context(open_store(url))
            reader = opened.enter_context(open_store(url, access=Access.READ))
            dashboard = open_queries(url, read_only=True)
            opened.callback(dashboard.close)
            for number in range(3):
                writer.create_run({"experiment": f"e{number}", "start_time": 0.0})
                assert len(reader.runs()) == number + 1
                assert dashboard.runs_version()[0] == number + 1


def test_a_pipeline_answered_before_its_flush_leaves_the_pool_to_the_next_client(monkeypatch):
    """Leaving a pipeline, psycopg follows its Sync with a Flush when results are still due. On a
    loaded machine PgBouncer can get the Sync's answer, and take the server connection back, before
    that Flush arrives; a Flush arriving outside a transaction then held the pool's one server
    connection for good and the next client waited forever. Here every Flush waits until PgBouncer
    took the server back (or 0.3 s, as it should when the pipeline ended inside its transaction)."""
    from psycopg._pipeline_base import BasePipeline  # the one place psycopg sends a naked Flush

    with own_server() as server, bouncer(server.url, pool_size=1) as pooler:
        url = pooler.url_for(server.url)
        with open_store(url) as writer:
            writer.create_run({"experiment": "e", "start_time": 0.0})
        flushes = []
        send_flushed_fetch = BasePipeline._fetch_gen

        def flush_once_pooler_took_the_server_back(self, *, flush):
            if flush and self.result_queue:
                flushes.append(self)
                deadline = time.monotonic() + 0.3
                while "active" in pooler.server_states() and time.monotonic() < deadline:
                    time.sleep(0.01)
            return (yield from send_flushed_fetch(self, flush=flush))

        monkeypatch.setattr(BasePipeline, "_fetch_gen", flush_once_pooler_took_the_server_back)
        with contextlib.ExitStack() as opened:
            reader = opened.enter_context(open_store(url, access=Access.READ))
            assert len(reader.runs()) == 1
            dashboard = open_queries(url, read_only=False)  # autocommit readers: pipelined batches
            opened.callback(dashboard.close)
            assert dashboard.runs_version()[0] == 1
            monkeypatch.undo()
            answers: list[int] = []

            def read_as_the_next_client() -> None:
                with open_store(url, access=Access.READ) as store:
                    answers.append(len(store.runs()))

            next_client = threading.Thread(target=read_as_the_next_client, daemon=True)
            next_client.start()
            next_client.join(timeout=20)
            assert answers == [1], "the next client got no server connection from PgBouncer"
        assert flushes  # the late flushes happened, so the test tested something


def test_a_url_with_options_through_pgbouncer_says_where_the_search_path_goes(pg_url, pg_bouncer):
    through = pg_url.replace(pg_url.split("@")[1].split("/")[0], f"127.0.0.1:{pg_bouncer.port}")
    with pytest.raises(OptionsRefused, match="connect_query='SET search_path TO") as refused:
        tb.ResultTable(through)
    assert "docs/cluster.md" in str(refused.value)


def test_a_server_out_of_connections_names_pgbouncer():
    with own_server(max_connections=3, superuser_reserved_connections=0) as server:
        holders = [connect(server.url) for _ in range(3)]
        try:
            with pytest.raises(ServerFull, match="PgBouncer") as full:
                tb.ResultTable(server.url)
        finally:
            for holder in holders:
                holder.close()
    assert "too many clients" in str(full.value) and "docs/cluster.md" in str(full.value)
