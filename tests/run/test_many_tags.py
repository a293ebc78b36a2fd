"""Many distinct tags (a model's per-parameter statistics): a new tag costs the sink the same however
many exist, counted in looks at series and in commits, never timed (bench/tags.py times it)."""

import time

import pytest

from tallyboard.run.sink import MIN_BUDGET_ROWS, SeriesQueue, Sink
from tallyboard.run.writer import LogWriter
from tallyboard.store import open_store
from tallyboard.store.records import ScalarColumns


class CountedQueue(SeriesQueue):
    """A series that counts every look at its values or its limit, whoever looks (sink or producer)."""

    __slots__ = ()
    looks = 0

    @property
    def values(self):
        CountedQueue.looks += 1
        return ScalarColumns.values.__get__(self)

    @values.setter
    def values(self, value):
        ScalarColumns.values.__set__(self, value)

    @property
    def limit(self):
        CountedQueue.looks += 1
        return SeriesQueue.limit.__get__(self)

    @limit.setter
    def limit(self, value):
        CountedQueue.looks += 1
        SeriesQueue.limit.__set__(self, value)


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "results.db")) as store:
        store.run_id = store.create_run({"experiment": "e", "start_time": time.time()})
        yield store


def sink_of(store, commits=None):
    """A sink of its own on `store`'s file that commits only when its budget is spent and at
    flush; the size of each batch it writes is appended to `commits`."""
    own = open_store(store.url)
    if commits is not None:
        write_batch = own.write_batch
        own.write_batch = lambda batch: (commits.append(len(batch)), write_batch(batch))
    return Sink(own, commit_interval=3600)


def log_new_tags(store, count):
    """One row for each of `count` new series, as `LogWriter.add_scalar` appends it, then a flush;
    the looks at series per new tag, and the commits it took."""
    commits = []
    sink = sink_of(store, commits)
    CountedQueue.looks = 0
    for index in range(count):
        queue = sink.track(CountedQueue(store.run_id, f"param/{index:06d}"))
        values = queue.values
        queue.steps.append(0)  # as `LogWriter.add_scalar` appends its columns, values last
        queue.walltimes.append(0.0)
        values.append(float(index))
        if len(values) >= queue.limit:
            sink.wait_for_room(queue)
    sink.flush()
    looks = CountedQueue.looks / count
    sink.stop()
    return looks, commits


@pytest.mark.parametrize("count", [1_000, 20_000])
def test_a_new_tag_costs_the_sink_a_few_looks_at_series_however_many_tags_exist(store, count):
    """Before, each take looked at every series and reshared their limits, and a new series' limit
    fell to one row, so that each new tag waited for a commit: 20,000 tags cost ~10^8 looks."""
    looks, commits = log_new_tags(store, count)
    assert looks <= 16  # the producer's 2, its request for room, and one visit by a take
    assert len(commits) <= 2 + count // (MIN_BUDGET_ROWS // 2)  # a tag takes at most 2 rows of budget
    assert sum(commits) == count
    assert store.execute("SELECT SUM(n), COUNT(DISTINCT tag_id) FROM scalar_blocks") == [(count, count)]


def test_a_new_tag_that_fits_the_budget_waits_for_no_commit(store):
    """While the budget has room, a new series is granted some at its first row, at once."""
    _, commits = log_new_tags(store, MIN_BUDGET_ROWS // 2)
    assert commits == [MIN_BUDGET_ROWS // 2]  # the flush's


def test_flush_on_the_first_row_of_a_new_tag_commits_it(store):
    """A series the sink does not look at yet must join the take that flush asks for."""
    sink = sink_of(store)
    sink.users += 1
    writer = LogWriter(store, sink, store.run_id)
    try:
        writer.add_scalar("first", 1.0, flush=True)
        assert store.scalars(store.run_id, "first") == [(0, 0, None, 0, 1.0)]
        writer.add_scalar("first", 2.0, flush=True)
        assert [row[-1] for row in store.scalars(store.run_id, "first")] == [1.0, 2.0]
    finally:
        writer.close()
        sink.stop()
