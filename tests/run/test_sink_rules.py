"""The sink's timing rules, each checked deterministically: a sink made with `start=False` and a
clock of the test's own, driven one `turn()` at a time on a real SQLite file. Where a rule makes a
producer wait, the producer runs in a thread and the test waits for the sink to count it waiting
(a state, never a duration), then lets it go with a turn."""

from __future__ import annotations

import errno
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tallyboard.errors import DatabaseUnwritable, NotDurableError
from tallyboard.run import sink as sink_module
from tallyboard.run.sink import MAX_BACKOFF, SeriesQueue, Sink
from tallyboard.store import Store, open_store
from tallyboard.store.records import QueuedValue

HOLD = 10.0  # the most a test waits for a thread to reach the state it expects


class Clock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    """The test's own connection to the file, to read back what the sink wrote."""
    with open_store(str(tmp_path / "rules.db")) as store:
        store.run_id = store.create_run({"experiment": "e", "start_time": time.time()})
        yield store


def make_sink(store: Store, clock: Clock, **options: object) -> Sink:
    """A sink with a store of its own on the same file, as `sink_for` makes one."""
    return Sink(open_store(store.url), clock=clock, start=False, **options)  # type: ignore[arg-type]


def row(step: int) -> tuple[int, int, None, float, float]:
    return (0, step, None, 1.0, float(step))


class Waiting:
    """`call` run in a thread that the sink is expected to hold: `held()` is True once the sink
    counts a producer waiting; `finish()` is what the call returned or raised once let go."""

    def __init__(self, sink: Sink, call: Callable[[], object]) -> None:
        self.sink = sink
        self.outcome: list[object] = []
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            self.outcome.append(call())
        except Exception as error:
            self.outcome.append(error)

    def held(self) -> bool:
        deadline = time.monotonic() + HOLD
        while time.monotonic() < deadline and self.thread.is_alive():
            if self.sink._waiting:
                return True
            time.sleep(0.001)
        return False

    def finish(self) -> object:
        self.thread.join(HOLD)
        assert not self.thread.is_alive(), "the producer was never let go"
        return self.outcome[0]


def test_a_new_series_is_granted_its_pace_then_as_much_again_each_time_it_is_full(store, clock):
    sink = make_sink(store, clock)
    queue = sink.track(SeriesQueue(store.run_id, "loss"))
    assert queue.limit == 0  # its first row asks for room
    queue.append(row(0))
    sink.wait_for_room(queue)
    assert queue.limit == 2  # the one row it holds, plus its pace of 1
    queue.append(row(1))
    sink.wait_for_room(queue)
    assert queue.limit == 4
    for step in range(2, 4):
        queue.append(row(step))
    sink.wait_for_room(queue)
    assert queue.limit == 8
    assert sink.turn() == 4
    assert (queue.limit, queue.pace) == (0, 4)  # the take found 4 rows: its pace from now on
    queue.append(row(4))
    sink.wait_for_room(queue)
    assert queue.limit == 5
    sink.stop()
    assert [r[1] for r in store.scalars(store.run_id, "loss")] == [0, 1, 2, 3, 4]


def test_a_series_that_spends_the_budget_waits_for_the_take_and_loses_nothing(store, clock):
    sink = make_sink(store, clock)
    budget = sink._budget_rows()
    assert budget == max(sink_module.MIN_BUDGET_ROWS, int(sink_module.FIRST_RATE * sink_module.COMMIT_BUDGET))
    queue = sink.track(SeriesQueue(store.run_id, "loss"))
    queue.extend(row(step) for step in range(budget - 1))
    sink.wait_for_room(queue)  # one row of budget left: granted at once
    assert queue.limit == budget
    queue.append(row(budget - 1))
    waiting = Waiting(sink, lambda: sink.wait_for_room(queue))
    assert waiting.held()
    assert sink.turn() == budget
    assert waiting.finish() is None
    sink.stop()
    assert len(store.scalars(store.run_id, "loss")) == budget


def test_the_budget_is_bounded_by_the_queue_bytes_too(store, clock):
    small = make_sink(store, clock, max_queue_bytes=2**18)
    assert small._budget_rows() == int(2**18 * sink_module.SCALAR_SHARE / sink_module.ROW_BYTES)
    tiny = make_sink(store, clock, max_queue_bytes=100)
    assert tiny._budget_rows() == 1  # never 0: a series can always make progress


def test_the_commit_rate_is_learnt_slower_at_once_faster_by_steps(store, clock):
    sink = make_sink(store, clock)
    seconds = [1.0]
    write = sink.store.write_batch

    def timed_write(batch):
        write(batch)
        clock.now += seconds[0]

    sink.store.write_batch = timed_write
    rows = sink.series(store.run_id, "loss")
    rows.extend(row(step) for step in range(10_000))
    sink.turn()  # 10,000 rows in 1 s: slower than assumed, believed at once
    assert sink._rate == 10_000
    assert sink._budget_rows() == max(sink_module.MIN_BUDGET_ROWS, 1_000)
    seconds[0] = 0.01
    rows.extend(row(step) for step in range(10_000, 20_000))
    sink.turn()  # 1,000,000 rows/s measured, but one fast commit is not a trend
    assert sink._rate == 10_000 * sink_module.RATE_STEP
    rows.extend(row(step) for step in range(20_000, 20_999))
    sink.turn()  # under 1,000 rows: too small to measure
    assert sink._rate == 10_000 * sink_module.RATE_STEP
    sink.stop()


def hparam(store: Store, name: str, size: int) -> QueuedValue:
    return QueuedValue(store.run_id, name, json.dumps("x" * size))


def test_records_wait_at_their_byte_bound_but_never_the_first_nor_those_that_end_a_run(store, clock):
    sink = make_sink(store, clock, max_queue_bytes=8 * 4096)  # the records' share: 4,096 bytes
    sink.put("hparams", hparam(store, "big", 10_000))  # over the bound, but the queue is empty
    sink.put("hparams", hparam(store, "ending", 3_000), wait=False)
    sink.put("results", QueuedValue(store.run_id, "acc", "0.5"))  # results never wait either
    waiting = Waiting(sink, lambda: sink.put("hparams", hparam(store, "late", 3_000)))
    assert waiting.held()
    sink.turn()
    assert waiting.finish() is None
    sink.stop()
    assert set(store.values("hparams")[store.run_id]) == {"big", "ending", "late"}


class Outage:
    """The store's writes fail while `down` (an OSError, as a lost disk or server gives)."""

    def __init__(self, store: Store, error: OSError | None = None) -> None:
        self.down = True
        self.error = error or OSError(errno.EIO, "Input/output error")
        self._write = store.write_batch
        store.write_batch = self.write

    def write(self, batch):
        if self.down:
            raise self.error
        self._write(batch)


def test_the_back_off_doubles_per_failure_up_to_its_cap_and_resets_after_a_success(store, clock):
    sink = make_sink(store, clock, commit_interval=0.25)
    outage = Outage(sink.store)
    sink.series(store.run_id, "loss").append(row(0))
    assert sink.backoff() == 0.25
    waits = []
    for _ in range(6):
        assert sink.turn() is None
        waits.append(sink.backoff())
    assert waits == [0.5, 1.0, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF]
    outage.down = False
    assert sink.turn() == 1  # the batch kept through the outage
    assert sink.backoff() == 0.25  # the outage survived: the next failure starts over
    assert sink.unreachable() is False
    sink.stop()
    assert len(store.scalars(store.run_id, "loss")) == 1


def test_an_outage_is_reported_at_once_then_every_report_period_and_its_end_too(store, clock, caplog):
    sink = make_sink(store, clock)
    outage = Outage(sink.store)
    sink.series(store.run_id, "loss").append(row(0))
    caplog.set_level(logging.WARNING, logger="tallyboard.run.sink")
    reports = []
    for advance in (0.0, 4.0, 5.9, 0.1, 3.0):  # at 0, 4, 9.9, 10, 13 s
        clock.now += advance
        sink.turn()
        reports.append(len(caplog.records))
    assert reports == [1, 1, 1, 2, 2]
    assert "for 10 s" in caplog.records[1].getMessage()
    assert sink.unreachable()
    clock.now += 7.0
    outage.down = False
    sink.turn()
    assert caplog.records[-1].getMessage().endswith("accepts writes again after 20 s")
    sink.stop()


def test_flush_raises_not_durable_once_a_commit_after_it_has_failed(store, clock):
    sink = make_sink(store, clock)
    outage = Outage(sink.store)
    sink.series(store.run_id, "loss").append(row(0))
    flushing = Waiting(sink, lambda: sink.flush(wait=0.0))
    flushing.thread.join(0.05)
    assert flushing.thread.is_alive()  # nothing failed yet: it waits for the commit
    sink.turn()
    error = flushing.finish()
    assert isinstance(error, NotDurableError)
    assert "1 records wait in memory" in str(error)
    outage.down = False
    sink.stop()
    assert len(store.scalars(store.run_id, "loss")) == 1


def test_an_unwritable_database_is_given_up_on_after_its_period_of_failed_writes(store, clock, monkeypatch):
    sink = make_sink(store, clock)
    outage = Outage(sink.store, OSError(errno.EROFS, "Read-only file system"))
    verdicts = iter(["read-only", "read-only", None, "read-only", "read-only", "read-only"])
    monkeypatch.setattr(sink.store, "unwritable", lambda failed: next(verdicts) if failed else None)
    queue = sink.track(SeriesQueue(store.run_id, "loss"))
    queue.append(row(0))
    sink.wait_for_room(queue)
    for advance in (0.0, 4.0, 1.0):  # writable again at 5 s: the count starts over
        clock.now += advance
        sink.turn()
    assert sink._gave_up is None
    for advance in (1.0, sink_module.GIVE_UP_AFTER - 0.5):
        clock.now += advance
        sink.turn()
    assert sink._gave_up is None  # 4.5 s of an unwritable database: ridden out
    clock.now += 0.5
    sink.turn()
    assert isinstance(sink._gave_up, DatabaseUnwritable)
    assert "1 records logged since are lost" in str(sink._gave_up)
    for call in (
        lambda: sink.wait_for_room(queue),
        lambda: sink.put("hparams", hparam(store, "lr", 1)),
        lambda: sink.flush(),
    ):
        with pytest.raises(DatabaseUnwritable, match="read-only"):
            call()
    outage.down = False


def test_a_shared_sink_without_runs_stops_only_after_its_idle_period(store, clock):
    sink = make_sink(store, clock, idle_stop=5.0)
    sink.users = 1
    clock.now += 60
    assert not sink._idle_exit()  # a run still uses it
    sink.release(store.run_id)
    clock.now += 4.5
    assert not sink._idle_exit()
    sink.series(store.run_id, "loss").append(row(0))
    clock.now += 0.5
    assert not sink._idle_exit()  # idle long enough, but rows wait
    sink.turn()
    assert sink._idle_exit()
