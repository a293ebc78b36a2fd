"""A PostgreSQL outage, on a server of the test's own (tests/own_postgres.py), stays out of the
training loop: no add_* raises, none blocks while the queue has room, flush() says at once that the
data is not yet durable, a warning says how long and how much, and when the server is back every
record arrives exactly once.
"""

import logging
import os
import threading
import time

import pytest

import tallyboard as tb
from own_postgres import own_server
from tallyboard.errors import NotDurableError
from tallyboard.run import exit_paths
from tallyboard.run import sink as sink_module
from tallyboard.store import open_store


class Logger:
    """A training loop's logging: scalars every step, a text every 100 steps; it times each call."""

    def __init__(self, run):
        self.run = run
        self.step = 0
        self.longest = 0.0

    def log(self, steps: int) -> None:
        for _ in range(steps):
            start = time.perf_counter()
            self.run.add_scalar("train/loss", float(self.step))
            if self.step % 100 == 0:
                self.run.add_text(f"text {self.step}", step=self.step)
            self.longest = max(self.longest, time.perf_counter() - start)
            self.step += 1

    def texts(self) -> list[str]:
        return [f"text {step}" for step in range(0, self.step, 100)]


def stored(url: str, run_id: int) -> tuple[list[int], list[str], str]:
    store = open_store(url)
    try:
        steps = [row[1] for row in store.scalars(run_id, "train/loss")]
        texts = [row[-1] for row in store.texts(run_id)]
        return steps, texts, store.run(run_id).status
    finally:
        store.close()


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def outage_log(caplog):
    caplog.set_level(logging.WARNING, logger="tallyboard")
    return caplog


def test_a_5_s_outage_with_flushes_every_second_arrives_exactly_once(outage_log):
    with own_server() as server:
        table = tb.ResultTable(server.url, nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("outage", auto_log_plt=False)
        logger = Logger(run)
        logger.log(2000)
        run.flush()
        server.stop()
        refusals, slowest_flush = [], 0.0
        end = time.monotonic() + 5
        while time.monotonic() < end:
            logger.log(500)
            start = time.monotonic()
            with pytest.raises(NotDurableError) as refused:
                if len(refusals) % 2:
                    run.flush()
                else:
                    run.add_scalar("train/flushed", 1.0, step=len(refusals), flush=True)
            slowest_flush = max(slowest_flush, time.monotonic() - start)
            refusals.append(str(refused.value))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
        server.start()
        logger.log(1000)
        run.close()
        table.close()
        steps, texts, status = stored(server.url, run.run_id)
        with open_store(server.url) as store:
            flushed = [row[1] for row in store.scalars(run.run_id, "train/flushed")]
    assert steps == list(range(logger.step))
    assert texts == logger.texts()  # each once: media and texts have no key that would hide a double
    assert flushed == list(range(0, len(refusals), 2))  # every other refusal came from flush=True
    assert status == "finished"
    assert len(refusals) >= 3 and "not yet durable" in refusals[-1]
    assert slowest_flush < 10  # a flush in an outage answers, it does not wait for the server
    assert logger.longest < 5  # the queue had room: no call waited for the server
    warnings = [r.getMessage() for r in outage_log.records if r.name == "tallyboard.run.sink"]
    assert any("could not write to" in w and "records wait in memory" in w for w in warnings)
    assert any("accepts writes again" in w for w in warnings)
    assert not [r for r in outage_log.records if r.exc_info]  # reported, not traceback spam


def test_a_60_s_outage_holds_the_queue_at_its_bound_and_close_reports_after_its_wait(outage_log, monkeypatch):
    monkeypatch.setattr(exit_paths, "OUTAGE_WAIT", 2.0)
    with own_server() as server:
        table = tb.ResultTable(server.url, nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("busy", auto_log_plt=False)
        other = table.new_run("other", auto_log_plt=False)
        sink = run._sink
        logger = Logger(run)
        stop = threading.Event()

        def train():
            while not stop.is_set():
                logger.log(100)

        trainer = threading.Thread(target=train, daemon=True)  # a failed check must not hang the suite
        trainer.start()
        time.sleep(1)
        server.stop()
        before, peak_rss, peak_queue = rss_bytes(), 0, 0
        with pytest.raises(NotDurableError, match="not yet durable"):
            other.write_result(acc=1.0)  # waits OUTAGE_WAIT, then says so; the results stay queued
        end = time.monotonic() + 60
        while time.monotonic() < end:
            peak_rss = max(peak_rss, rss_bytes() - before)
            peak_queue = max(peak_queue, sink.queued_bytes())
            time.sleep(0.2)
        blocked_at = logger.step
        time.sleep(1)
        assert logger.step == blocked_at  # at the bound the training thread waits, it does not raise
        server.start()
        stop.set()
        trainer.join(timeout=120)
        run.close()
        table.close()
        steps, texts, status = stored(server.url, run.run_id)
        with open_store(server.url) as store:
            other_row = store.run(other.run_id)
            other_results = store.values("results", other.run_id)
    assert steps == list(range(logger.step)) and texts == logger.texts() and status == "finished"
    assert other_row.status == "finished" and other_results == {other.run_id: {"acc": 1.0}}
    assert peak_queue <= sink_module.MAX_QUEUE_BYTES
    warnings = [r.getMessage() for r in outage_log.records if r.name == "tallyboard.run.sink"]
    assert any("logging calls (and the training that makes them) wait" in w for w in warnings)
    assert peak_rss <= 2 * sink_module.MAX_QUEUE_BYTES  # the estimate is not far from the truth
    warnings = [r.getMessage() for r in outage_log.records if r.name == "tallyboard.run.sink"]
    outage = [w for w in warnings if "could not write to" in w]
    assert len(outage) >= 5, outage  # reported while it lasts (every 10 s), saying for how long
