"""`tallyboard import tensorboard`: logs written by torch's real SummaryWriter, compared point by point.

The expected values are the ones the test wrote (at float32, TensorBoard's precision); the expected
wall times are read from the event files with TensorBoard's low-level loader, a different code path
from the import's own reader. Every kind against TensorBoard's EventAccumulator, and other writers:
test_tensorboard_kinds.py; growing, watched and damaged logs: test_tensorboard_live.py.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from tallyboard.store import open_store


def f32(value: float) -> float:
    return float(np.float32(value))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Two runs (one nested two levels down) with scalars, images, text and hparams."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("tb")
    expected: dict = {"scalars": {}, "images": {}, "texts": {}}
    writer = SummaryWriter(str(root / "baseline"))
    loss = [(step, 1.0 / (step + 1)) for step in range(300)]
    acc = [(step, step / 300) for step in range(0, 300, 30)]
    odd = [(0, float("nan")), (1, float("inf")), (2, -float("inf")), (5, 1e-30)]
    for tag, points in (("train/loss", loss), ("val/acc", acc), ("train/odd", odd)):
        for step, value in points:
            writer.add_scalar(tag, value, step)
        expected["scalars"][("baseline", tag)] = [(step, f32(value)) for step, value in points]
    for step in (0, 10, 20):
        image = np.full((3, 5, 7), step / 20, dtype=np.float32)  # CHW
        writer.add_image("samples", image, step)
        expected["images"][("baseline", step)] = np.full(
            (5, 7, 3), int(step / 20 * 255), np.uint8
        )  # torch truncates
    for step, text in ((1, "first <b>bold</b>"), (2, "ünïcode, second")):
        writer.add_text("notes", text, step)
        expected["texts"][("baseline", step)] = text
    writer.add_hparams({"lr": 0.1, "optimizer": "adam", "batch_size": 32}, {"hparam/accuracy": 0.875})
    writer.close()
    nested = SummaryWriter(str(root / "sweep" / "lr_0.01"))
    for step in range(0, 50, 5):
        nested.add_scalar("loss", 2.0 - step / 50, step)
    nested.close()
    expected["scalars"][("sweep/lr_0.01", "loss")] = [
        (step, f32(2.0 - step / 50)) for step in range(0, 50, 5)
    ]
    return root, expected


def raw_events(run_dir: Path) -> list[tuple[str, int, float, object]]:
    """(tag, step, wall_time, summary value) of every summary in the run's own event files."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    found = []
    for path in run_dir.glob("events.out.tfevents.*"):
        for event in LegacyEventFileLoader(str(path)).Load():
            found.extend((value.tag, event.step, event.wall_time, value) for value in event.summary.value)
    return found


def raw_wall_times(run_dir: Path) -> dict[tuple[str, int], float]:
    return {(tag, step): wall_time for tag, step, wall_time, _ in raw_events(run_dir)}


def imported(url: str) -> dict[str, dict]:
    store = open_store(url)
    try:
        runs = {run.experiment: run for run in store.runs(show_hidden=True)}
        out = {}
        for name, run in runs.items():
            run_id = run.run_id
            out[name] = {
                "run": run,
                "hparams": store.values("hparams", run_id).get(run_id, {}),
                "results": store.values("results", run_id).get(run_id, {}),
                "scalars": {tag: store.scalars(run_id, tag) for tag in store.tag_names(run_id, "scalars")},
                "media": store.media(run_id, "image"),
                "texts": store.texts(run_id, "text"),
            }
        return out
    finally:
        store.close()


def test_every_point_image_text_and_hparam_arrives(logdir: tuple[Path, dict], db_url: str) -> None:
    from PIL import Image

    root, expected = logdir
    url = db_url
    result = run_cli("import", "tensorboard", root, "--into", url, "--quiet", "--finished-after", "0")
    assert "imported 2 TensorBoard runs" in result.stdout
    runs = imported(url)
    assert set(runs) == {"baseline", "sweep/lr_0.01"}

    for (name, tag), points in expected["scalars"].items():
        run = runs[name]
        start = run["run"].start_time
        walls = raw_wall_times(root / name)
        rows = run["scalars"][tag]
        assert [(step, None if math.isnan(value) else value) for step, value in points] == [
            (step, value) for _, step, _, _, value in rows
        ]
        for rep, step, epoch, walltime_ms, _ in rows:
            assert (rep, epoch) == (0, None)
            assert abs(start + walltime_ms / 1000 - walls[(tag, step)]) < 1e-3
    base = runs["baseline"]
    assert base["run"].start_time == pytest.approx(min(raw_wall_times(root / "baseline").values()))
    assert base["run"].status == "finished"
    assert str(root / "baseline") in base["run"].comment

    assert base["hparams"] == {"lr": 0.1, "optimizer": "adam", "batch_size": 32}
    assert base["results"] == {"hparam/accuracy": f32(0.875)}
    assert "hparam/accuracy" not in base["scalars"]  # the add_hparams session is folded in, not a run

    images = {row[1]: row for row in base["media"]}
    assert sorted(images) == [0, 10, 20]
    written = {step: value.image.encoded_image_string for tag, step, _, value in raw_events(root / "baseline")
               if tag == "samples"}  # fmt: skip
    for (_, step), pixels in expected["images"].items():
        _, _, _, _, tag, _, width, height, png = images[step]
        assert (tag, width, height) == ("samples", 7, 5)
        assert png == written[step]  # the PNG bytes TensorBoard holds, unchanged
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), pixels)
    assert [(row[1], row[4], row[6]) for row in base["texts"]] == [
        (step, "notes", text) for (_, step), text in expected["texts"].items()
    ]


def test_importing_twice_does_not_duplicate(logdir: tuple[Path, dict], db_url: str) -> None:
    root, _ = logdir
    url = db_url
    run_cli("import", "tensorboard", root, "--into", url, "--quiet", "--finished-after", "0")
    first = imported(url)
    again = run_cli("import", "tensorboard", root, "--into", url, "--quiet", "--finished-after", "0")
    assert "imported 0 TensorBoard runs (0 new, 0 updated, 2 unchanged" in again.stdout
    assert imported(url) == first


def test_bad_log_directories_are_one_line_errors(tmp_path: Path) -> None:
    missing = run_cli("import", "tensorboard", tmp_path / "nope", "--into", tmp_path / "a.db", check=False)
    assert_one_line_error(missing, "no TensorBoard log directory")
    (tmp_path / "empty").mkdir()
    empty = run_cli("import", "tensorboard", tmp_path / "empty", "--into", tmp_path / "a.db", check=False)
    assert_one_line_error(empty, "no TensorBoard event files")


def test_a_log_directory_that_is_itself_a_run_is_named_after_it(
    logdir: tuple[Path, dict], tmp_path: Path
) -> None:
    root, expected = logdir
    url = str(tmp_path / "one.db")
    run_cli(
        "import", "tensorboard", root / "sweep" / "lr_0.01", "--into", url, "--quiet", "--finished-after", "0"
    )
    runs = imported(url)
    assert list(runs) == ["lr_0.01"]
    points = [(step, value) for _, step, _, _, value in runs["lr_0.01"]["scalars"]["loss"]]
    assert points == expected["scalars"][("sweep/lr_0.01", "loss")]


def test_runs_imported_before_read_positions_were_kept_are_not_imported_again(
    logdir: tuple[Path, dict], db_url: str
) -> None:
    """A table filled by an older tallyboard has the runs but no read positions: its runs (same
    experiment and start time) are reported as already present and left alone, sessions included."""
    from tallyboard.integrations.tensorboard_import import import_logdir

    root, _ = logdir
    import_logdir(root, db_url, clock=lambda: 4e9)
    first = imported(db_url)
    store = open_store(db_url)
    try:
        store.atomic(lambda: store.execute("DELETE FROM import_files"))
    finally:
        store.close()
    again = import_logdir(root, db_url, clock=lambda: 4e9)
    assert sorted(again.already_present) == ["baseline", "sweep/lr_0.01"] and not again.tally.imported
    assert imported(db_url) == first


def write_event_file(path: Path) -> Path:
    """An event file of 100 scalars ("loss") and 1 image ("sample"), framed as TensorBoard frames them."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from integrations.tb_reference import framed
    from tallyboard.media import to_png

    Value = summary_pb2.Summary.Value
    events = [event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2")]
    for step in range(100):
        summary = summary_pb2.Summary(value=[Value(tag="loss", simple_value=1 / (step + 1))])
        events.append(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary))
    png = to_png(np.zeros((4, 4, 3), dtype=np.uint8))[0]
    image = summary_pb2.Summary.Image(height=4, width=4, colorspace=3, encoded_image_string=png)
    summary = summary_pb2.Summary(value=[Value(tag="sample", image=image)])
    events.append(event_pb2.Event(wall_time=1.7e9 + 100, step=100, summary=summary))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(framed(event.SerializeToString()) for event in events))
    return path


def counts(url: str) -> dict[str, tuple[int, int]]:
    """{run: (scalars, images)}."""
    store = open_store(url)
    try:
        return {
            run.experiment: (len(store.scalars(run.run_id, "loss")), len(store.media(run.run_id, "image")))
            for run in store.runs(show_hidden=True)
        }
    finally:
        store.close()


def test_an_event_file_that_is_a_symlink_leading_out_of_the_logdir_is_refused(tmp_path: Path) -> None:
    """A log directory from someone else must not make the import read this machine's other logs."""
    elsewhere = write_event_file(tmp_path / "elsewhere" / "events.out.tfevents.1700000000.host")
    logdir = tmp_path / "logs"
    write_event_file(logdir / "good" / "events.out.tfevents.1700000000.host")
    (logdir / "bad").mkdir()
    (logdir / "bad" / elsewhere.name).symlink_to(elsewhere)
    target = tmp_path / "target.db"
    result = run_cli("import", "tensorboard", logdir, "--into", target, check=False)
    assert result.returncode == 1
    assert_one_line_error(
        result,
        f"the TensorBoard log directory names 'bad/{elsewhere.name}'",
        "a symlink leading to",
        "refused",
    )
    assert not target.exists()  # refused before anything, the good run included, was written

    (logdir / "bad" / elsewhere.name).unlink()
    (logdir / "bad" / elsewhere.name).symlink_to(logdir / "good" / elsewhere.name)  # inside: fine
    run_cli("import", "tensorboard", logdir, "--into", target, "--quiet")
    assert counts(str(target)) == {"good": (100, 1), "bad": (100, 1)}


def test_a_run_whose_import_failed_before_its_first_commit_is_imported_again(tmp_path: Path) -> None:
    """The run was created, then the database refused its first records (and with them the files'
    read positions): the next import writes it whole instead of calling it "already present"."""
    from refusing_table import refuse

    logdir = tmp_path / "logs"
    write_event_file(logdir / "run" / "events.out.tfevents.1700000000.host")
    target = str(tmp_path / "target.db")
    tb.ResultTable(target, nocommit_action=tb.NoCommitAction.NOP).close()
    refuse(target, "scalar_blocks")
    failed = run_cli("import", "tensorboard", logdir, "--into", target, "--quiet", check=False)
    assert_one_line_error(failed, "disk full")
    assert counts(target) == {"run": (0, 0)}

    refuse(target, None)
    again = run_cli("import", "tensorboard", logdir, "--into", target, "--quiet")
    assert "(1 new, 0 updated, 0 unchanged, 0 already present" in again.stdout
    assert counts(target) == {"run": (100, 1)}
    third = run_cli("import", "tensorboard", logdir, "--into", target, "--quiet")
    assert "(0 new, 0 updated, 1 unchanged, 0 already present" in third.stdout
    assert counts(target) == {"run": (100, 1)}
