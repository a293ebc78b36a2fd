"""Importing logs that change: a live run imported while it grows, `--watch`, and damaged files.

The run's status is decided by a clock the tests inject (no sleeping): files modified less than
`quiet_seconds` before the clock's time mean `running`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from integrations.tb_reference import assert_same, framed, reference, stored
from tallyboard.integrations.tensorboard_import import follow, import_logdir
from tallyboard.store import open_store
from tallyboard.store.run_fields import RunRow

QUIET = 600.0


def newest_mtime(directory: Path) -> float:
    return max(path.stat().st_mtime for path in directory.rglob("*tfevents*"))


def only_run(url: str) -> RunRow:
    store = open_store(url)
    try:
        [run] = store.runs(show_hidden=True)
        return run
    finally:
        store.close()


def compare(url: str, run_dir: Path, run_id: int) -> dict:
    store = open_store(url)
    try:
        got = stored(store, run_id)
    finally:
        store.close()
    assert_same(reference(run_dir), got)
    return got


def test_a_live_run_imported_twice_while_it_grows(tmp_path: Path, db_url: str) -> None:
    from torch.utils.tensorboard import SummaryWriter

    logdir = tmp_path / "logs"
    writer = SummaryWriter(str(logdir / "live"))
    for step in range(100):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.flush()
    soon = lambda: newest_mtime(logdir) + 1.0  # noqa: E731
    first = import_logdir(logdir, db_url, clock=soon, quiet_seconds=QUIET)
    assert (first.new, first.running, first.tally.imported["scalars"]) == (["live"], ["live"], 100)
    run = only_run(db_url)
    assert (run.status, run.end_time) == ("running", None)
    compare(db_url, logdir / "live", run.run_id)

    for step in range(100, 160):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    for _ in range(3):
        writer.add_scalar("loss", -1.0, 159)  # the same step again: every point is kept
    writer.add_text("note", "written later", 150)
    writer.flush()
    second = import_logdir(logdir, db_url, clock=soon, quiet_seconds=QUIET)
    assert second.updated == ["live"] and second.tally.imported == {"scalars": 63, "texts": 1}
    got = compare(db_url, logdir / "live", run.run_id)
    assert len(got["scalars"]["loss"]) == 163

    writer.close()
    later = lambda: newest_mtime(logdir) + QUIET  # noqa: E731
    third = import_logdir(logdir, db_url, clock=later, quiet_seconds=QUIET)
    assert third.updated == ["live"] and third.running == [] and not third.tally.imported
    run = only_run(db_url)
    assert run.status == "finished"
    assert run.end_time == pytest.approx(max(p for _, p, _ in got["scalars"]["loss"]), abs=1e-3)
    fourth = import_logdir(logdir, db_url, clock=later, quiet_seconds=QUIET)
    assert fourth.unchanged == ["live"] and not fourth.tally.imported
    compare(db_url, logdir / "live", run.run_id)


def test_watch_follows_a_directory_until_interrupted(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    logdir, url = tmp_path / "logs", str(tmp_path / "watch.db")
    logdir.mkdir()  # no run yet: watched until one appears
    shown, waits, writers = [], [], []

    def sleep(seconds: float) -> None:  # what happens between two passes, then Ctrl-C
        waits.append(seconds)
        if len(waits) == 1:
            writers.append(SummaryWriter(str(logdir / "run")))
            writers[0].add_scalar("loss", 1.0, 0)
            writers[0].flush()
        elif len(waits) == 2:
            writers[0].add_scalar("loss", 0.5, 1)
            writers[0].flush()
        elif len(waits) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        follow(logdir, url, shown.append, interval=2.5, sleep=sleep)
    writers[0].close()
    assert waits == [2.5] * 4
    assert [(r.new, r.updated, r.tally.imported["scalars"]) for r in shown] == [
        (["run"], [], 1),
        ([], ["run"], 1),
    ]
    compare(url, logdir / "run", only_run(url).run_id)


def records_of(path: Path) -> list[int]:
    """The offset just after each record of an event file (from the framing alone)."""
    ends, data, position = [], path.read_bytes(), 0
    while position < len(data):
        position += 12 + int.from_bytes(data[position : position + 8], "little") + 4
        ends.append(position)
    return ends


def two_files(logdir: Path) -> tuple[Path, Path]:
    """One run, two event files (a writer opened twice), 40 + 30 scalars. Renamed so that their
    names sort in the order they were written (files are read in name order, as TensorBoard does)."""
    from torch.utils.tensorboard import SummaryWriter

    files = []
    for index, steps in enumerate((range(40), range(40, 70))):
        writer = SummaryWriter(str(logdir / "run" / "tmp"))
        for step in steps:
            writer.add_scalar("loss", step, step)
        writer.close()
        [written] = (logdir / "run" / "tmp").iterdir()
        files.append(written.rename(logdir / "run" / f"events.out.tfevents.{1_700_000_000 + index}.host"))
    (logdir / "run" / "tmp").rmdir()
    return files[0], files[1]


REASONS = {
    "truncated": "file ends inside a record (truncated)",
    "corrupt": "CRC mismatch",
    "not an event": "a record that is not a TensorBoard event",
}


@pytest.mark.parametrize("damage", list(REASONS))
def test_a_damaged_file_keeps_everything_before_the_damage_and_the_next_file(
    tmp_path: Path, db_url: str, damage: str
) -> None:
    logdir = tmp_path / "logs"
    first, second = two_files(logdir)
    ends = records_of(first)
    cut = ends[20]  # the end of the 21st record (the first one is the file-version event)
    data = bytearray(first.read_bytes())
    if damage == "truncated":
        first.write_bytes(bytes(data[: cut + 9]))  # the 22nd record's header and a piece of its data
    elif damage == "corrupt":
        data[cut + 14] ^= 0xFF  # a byte of the 22nd record's data: its CRC no longer matches
        first.write_bytes(bytes(data))
    else:  # a record framed and checksummed correctly, holding bytes that are no event
        first.write_bytes(bytes(data[:cut]) + framed(b"\xff" * 5) + bytes(data[cut:]))
    report = import_logdir(logdir, db_url, clock=lambda: newest_mtime(logdir) + QUIET, quiet_seconds=QUIET)
    [found] = report.tally.damage
    assert (found.path, found.offset) == (str(first), cut)
    assert found.reason == REASONS[damage]
    intact = tmp_path / "intact" / "run"  # what TensorBoard reads of the intact parts
    intact.mkdir(parents=True)
    (intact / first.name).write_bytes(bytes(data[:cut]))
    shutil.copy(second, intact / second.name)
    got = compare(db_url, intact, only_run(db_url).run_id)
    assert [step for step, _, _ in got["scalars"]["loss"]] == [*range(20), *range(40, 70)]


def test_a_file_still_being_written_is_not_damage_until_its_run_is_quiet(tmp_path: Path) -> None:
    logdir, url = tmp_path / "logs", str(tmp_path / "partial.db")
    _, newest = two_files(logdir)  # the writer works on the newest file
    ends = records_of(newest)
    data = newest.read_bytes()
    newest.write_bytes(data[: ends[10] + 5])  # a writer caught in the middle of a record
    os.utime(newest)
    busy = import_logdir(logdir, url, clock=lambda: newest_mtime(logdir) + 1, quiet_seconds=QUIET)
    assert busy.tally.damage == [] and busy.running == ["run"]
    assert busy.tally.imported["scalars"] == 40 + 10
    newest.write_bytes(data)  # the writer finished the record and went on
    done = import_logdir(logdir, url, clock=lambda: newest_mtime(logdir) + QUIET, quiet_seconds=QUIET)
    assert done.tally.damage == [] and done.tally.imported["scalars"] == 20
    compare(url, logdir / "run", only_run(url).run_id)


def test_a_tf2_log_imported_in_two_parts_remembers_each_tags_plugin(tmp_path: Path, db_url: str) -> None:
    """TF2 writes a tag's plugin ("scalars") only with its first value: values read by a later
    import, without it, are still scalars."""
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    logdir = tmp_path / "logs"
    writer = EventFileWriter(str(logdir / "keras"))

    def write(step: int) -> None:
        value = summary_pb2.Summary.Value(
            tag="epoch_loss", tensor=tensor_util.make_tensor_proto(np.float32(step))
        )
        if step == 0:
            value.metadata.CopyFrom(scalar_metadata.create_summary_metadata("", ""))
        summary = summary_pb2.Summary(value=[value])
        writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary))

    for step in range(3):
        write(step)
    writer.flush()
    soon = lambda: newest_mtime(logdir) + 1  # noqa: E731
    assert import_logdir(logdir, db_url, clock=soon).tally.imported == {"scalars": 3}
    for step in range(3, 7):
        write(step)
    writer.close()
    second = import_logdir(logdir, db_url, clock=soon)
    assert second.tally.imported == {"scalars": 4} and not second.tally.skipped
    compare(db_url, logdir / "keras", only_run(db_url).run_id)
