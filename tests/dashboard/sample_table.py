"""The sample result table of the dashboard tests, logged through the real public API.

Shared by tests/dashboard (API) and tests/e2e (browser), whose conftests import its fixtures:
runs 1..3 and the debug run -1 with mixed-type hparams, empty cells, two repetitions, images,
text and a hostile HTML fragment. It is logged once per session and copied (database and WAL)
for each test, so tests may edit their copy freely and still start in milliseconds.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import pytest

import tallyboard as tb
from live_runs import FakeClock
from tallyboard import monitor

SCRIPT_FRAGMENT = "<p id='frag'>fragment</p><script>parent.document.title='pwned'; top.pwned = 1</script>"
HOSTILE_NOTE = "<img src=x onerror=\"document.title='pwned'; window.pwned=1\">"


def tiny_png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid one-colour PNG, written by hand (no PIL needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress((b"\x00" + bytes(rgb) * width) * height)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def log_curves(run, scale: float, rep_scale: float = 1.0) -> None:
    """300 train steps (10 per epoch) and one val point per epoch, like a small training loop."""
    for step in range(300):
        run.add_scalar("train/loss", scale * rep_scale / (step + 1), step=step, epoch=step // 10)
        run.add_scalar("train/accuracy", 1 - scale / (step + 2), step=step, epoch=step // 10)
    for epoch in range(10):
        run.add_scalar("val/loss", scale / (30 * epoch + 1) + 0.1, step=30 * epoch, epoch=epoch)


def log_sample(url_or_path: str | Path) -> tuple[tb.ResultTable, list[tb.LogWriter]]:
    """Log runs 1..3 and the debug run -1 into a new table; returns the table and the writers of
    run 3 and the debug run, left running (flushed, not closed) for the caller to close."""
    table = tb.ResultTable(url_or_path, nocommit_action=tb.NoCommitAction.NOP)
    first = table.new_run("exp", cli={"lr": 0.001}, comment="baseline run", auto_log_plt=False)
    first.add_hparams(lr=0.001, optimizer="adam")
    log_curves(first, 1.0)
    first.new_repetition()
    log_curves(first, 1.0, rep_scale=1.2)
    first.add_image(tiny_png(), tag="samples", step=0, epoch=0)
    first.add_image(tiny_png(rgb=(30, 200, 30)), tag="samples", step=10, epoch=1)
    first.add_text("epoch 1 <b>done</b>", tag="log", step=0)
    first.add_fragment(SCRIPT_FRAGMENT, tag="report", step=0)
    first.add_table(["class", "recall"], [["cat", 0.9], ["dog", float("nan")]], tag="per_class", step=10)
    first.set_note("baseline")
    first.set_tag("base")
    first.write_result(accuracy=0.91)

    second = table.new_run("exp", cli={"lr": "auto"}, auto_log_plt=False)
    second.add_hparams(lr="auto", batch_size=64)
    log_curves(second, 0.5)
    second.write_result(accuracy=0.95)

    third = table.new_run("exp", cli={"lr": 0.01}, comment="bigger lr", auto_log_plt=False)
    third.add_hparams(lr=0.01)
    log_curves(third, 2.0)
    third.flush()

    debug = table.new_debug_run("debug", auto_log_plt=False)
    debug.add_scalar("train/loss", 1.0, step=0)
    debug.flush()
    return table, [third, debug]


def log_windows_run(url_or_path: str | Path) -> int:
    """A run that logs only a monitor Stat (three 1 s windows through ResultTableEventHandler,
    before any training step: at steps 0, 1, 2, its `window_tags` listing them); its run id."""
    table = tb.ResultTable(url_or_path, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("windows", auto_log_plt=False)
    handle = monitor.register_event_handler(tb.ResultTableEventHandler(run))
    clock = FakeClock()
    stat = monitor.Stat("train/step_time", [monitor.MEAN], 1.0, clock=clock)
    for second in (0.0, 1.5, 2.5):
        clock.at(second)
        stat.add(second)
    stat.close()
    monitor.unregister_event_handler(handle)
    run.close()
    table.close()
    return run.run_id


def snapshot_sample(directory: Path) -> Path:
    """Log the sample into `directory`/results.db and copy its database and WAL, taken while runs 3
    and -1 are still running, into `directory`/snapshot; returns the snapshot folder."""
    path = directory / "results.db"
    table, running = log_sample(path)
    snapshot = directory / "snapshot"
    snapshot.mkdir()
    for suffix in ("", "-wal"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            shutil.copy(source, snapshot / f"results.db{suffix}")
    for run in running:
        run.close()
    table.close()
    return snapshot


@pytest.fixture(scope="session")
def sample_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample, logged once per test session."""
    return snapshot_sample(tmp_path_factory.mktemp("sample"))


@pytest.fixture
def sample_db(sample_snapshot: Path, tmp_path: Path) -> Path:
    """A private copy of the sample table for one test (tests may edit it freely)."""
    for source in sample_snapshot.iterdir():
        shutil.copy(source, tmp_path / source.name)
    return tmp_path / "results.db"


def csrf_of(page: str) -> str:
    """The CSRF secret a dashboard page carries (what its scripts send back with each POST)."""
    return page.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
