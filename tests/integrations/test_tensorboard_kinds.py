"""Every summary kind, from every writer, imported and compared value by value with TensorBoard's
own reader (tb_reference.py), on both engines.

Writers: torch's SummaryWriter (old-style and `new_style=True` scalars), tensorboardX, and a
TF2-style file of tensor summaries written here with TensorBoard's own protobufs (TensorFlow is not
installed), plus the repeated steps of a monitor-style log and of a restarted run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_runner import run_cli
from integrations.tb_reference import assert_same, reference, stored
from tallyboard.integrations.tensorboard_import import import_logdir
from tallyboard.store import open_store

FAR_FUTURE = 4e9  # a clock this late finds every file quiet: runs are finished


def torch_logs(root: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(root / "torch_old"))
    for step in range(20):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    for step, value in enumerate([float("nan"), float("inf"), -float("inf"), 1e-30, 0.0]):
        writer.add_scalar("train/odd", value, step)
    writer.add_image("samples", np.full((3, 4, 6), 0.5, dtype=np.float32), 3)
    writer.add_text("notes", "first <b>bold</b>", 1)
    writer.add_histogram("weights", np.arange(100, dtype=np.float64), 2)
    writer.add_audio("sound", np.zeros(800, dtype=np.float32), 1, sample_rate=8000)
    writer.add_pr_curve("pr", np.array([1, 0, 1, 1]), np.array([0.9, 0.2, 0.6, 0.3]), 1)
    writer.add_hparams({"lr": 0.1, "optimizer": "adam", "layers": 3}, {"hparam/accuracy": 0.875})
    writer.close()
    new = SummaryWriter(str(root / "torch_new"))
    for step in range(0, 50, 5):
        new.add_scalar("val/acc", step / 50, step, new_style=True)
        new.add_scalar("val/double", step / 7, step, new_style=True, double_precision=True)
    new.close()


def tensorboardx_logs(root: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(root / "tbx"))
    for step in range(15):
        writer.add_scalar("loss", 3.0 - step / 10, step)
    writer.add_image("picture", np.full((3, 5, 5), 0.25, dtype=np.float32), 4)
    writer.add_text("log", "tensorboardX text", 2)
    writer.add_histogram("hist", np.linspace(-1, 1, 50), 1)
    writer.close()


def png_bytes(width: int, height: int) -> bytes:
    from tallyboard.media import to_png

    return to_png(np.zeros((height, width, 3), dtype=np.uint8))[0]


def tf2_logs(root: Path) -> None:
    """Tensor summaries as TF2 / Keras write them: the plugin's metadata only with a tag's first
    value, scalars as 0-d float32 tensors in tensor_content, images as [w, h, png] string tensors."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.histogram import metadata as histogram_metadata
    from tensorboard.plugins.image import metadata as image_metadata
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.plugins.text import metadata as text_metadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(root / "tf2"))
    metadata = {
        "epoch_loss": scalar_metadata.create_summary_metadata("", ""),
        "epoch_lr": scalar_metadata.create_summary_metadata("", ""),
        "batch_images": image_metadata.create_summary_metadata("", "", converted_to_tensor=True),
        "note": text_metadata.create_summary_metadata("", ""),
        "kernel": histogram_metadata.create_summary_metadata("", ""),
    }

    def write(step: int, tag: str, tensor) -> None:
        value = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
        if tag in metadata:
            value.metadata.CopyFrom(metadata.pop(tag))
        summary = summary_pb2.Summary(value=[value])
        writer.add_event(event_pb2.Event(wall_time=1_700_000_000.0 + step, step=step, summary=summary))

    for step in range(12):
        write(step, "epoch_loss", tensor_util.make_tensor_proto(np.float32(2.0 / (step + 1))))
        write(step, "epoch_lr", tensor_util.make_tensor_proto(np.float64(0.1 * 0.9**step)))
    pngs = [png_bytes(3, 2), png_bytes(4, 2)]
    write(5, "batch_images", tensor_util.make_tensor_proto([b"4", b"2", *pngs], dtype=np.object_))
    write(6, "note", tensor_util.make_tensor_proto(np.array([b"tf2 text"], dtype=np.object_)))
    edges = np.array([[0.0, 1.0, 3.0], [1.0, 2.0, 5.0]])
    write(7, "kernel", tensor_util.make_tensor_proto(edges))
    writer.close()


def repeated_steps_logs(root: Path) -> None:
    """A monitor-style log (every window at step 0) and a run restarted from an earlier step."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(root / "repeats"))
    for window in range(9):
        writer.add_scalar("step_time.mean", 0.1 + window / 100, 0)
    for step in [*range(10), *range(5, 12)]:  # restarted from a checkpoint at step 5
        writer.add_scalar("loss", step / 10, step)
    writer.close()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tb_kinds")
    torch_logs(root)
    tensorboardx_logs(root)
    tf2_logs(root)
    repeated_steps_logs(root)
    return root


def runs_by_name(url: str) -> dict[str, int]:
    store = open_store(url)
    try:
        return {run.experiment: run.run_id for run in store.runs(show_hidden=True)}
    finally:
        store.close()


def test_every_kind_from_every_writer_equals_tensorboards_reader(logdir: Path, db_url: str) -> None:
    report = import_logdir(logdir, db_url, clock=lambda: FAR_FUTURE)
    runs = runs_by_name(db_url)
    assert set(runs) == {"torch_old", "torch_new", "tbx", "tf2", "repeats"}  # add_hparams' child folded
    assert sorted(report.new) == sorted(runs)
    store = open_store(db_url)
    try:
        for name, run_id in runs.items():
            expected = reference(logdir / name)
            sessions = [child for child in (logdir / name).iterdir() if child.is_dir()]
            for session in sessions:
                expected["hparams"].update(reference(session)["hparams"])
            assert_same(expected, stored(store, run_id))
            assert store.run(run_id).status == "finished"
        results = store.values("results", runs["torch_old"])[runs["torch_old"]]
        assert results == {"hparam/accuracy": 0.875}
        expected_kinds = reference(logdir / "torch_old")
        assert len(expected_kinds["histograms"]["weights"]) == 1 and expected_kinds["texts"]["notes"]
        tf2 = stored(store, runs["tf2"])
        assert len(tf2["images"]["batch_images"]) == 2 and tf2["texts"]["note"] == [(6, "tf2 text")]
        assert [len(points) for points in tf2["scalars"].values()] == [12, 12]
    finally:
        store.close()
    assert report.tally.skipped["audio"] == 1
    assert report.tally.skipped["pr_curves"] == 1
    assert report.tally.imported["histograms"] == 3  # torch, tensorboardX, TF2


def test_every_point_of_a_repeated_step_is_kept_in_file_order(logdir: Path, db_url: str) -> None:
    import_logdir(logdir / "repeats", db_url, clock=lambda: FAR_FUTURE)
    [run_id] = runs_by_name(db_url).values()
    store = open_store(db_url)
    try:
        windows = store.scalar_events(run_id, "step_time.mean")
        assert [(seq, step) for _, seq, step, *_ in windows] == [(seq, 0) for seq in range(9)]
        assert [value for *_, value in windows] == pytest.approx([0.1 + w / 100 for w in range(9)])
        loss = store.scalar_events(run_id, "loss")
        assert [step for _, _, step, *_ in loss] == [*range(10), *range(5, 12)]
        # the chart by step keeps one point per step: the last one logged
        assert [step for _, step, *_ in store.scalars(run_id, "loss")] == list(range(12))
        assert store.scalars(run_id, "step_time.mean")[0][4] == pytest.approx(0.18)
    finally:
        store.close()


def test_the_api_lays_repeated_steps_out_by_event_index_and_says_why(logdir: Path, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from tallyboard.dashboard import create_app

    url = str(tmp_path / "repeats.db")
    import_logdir(logdir / "repeats", url, clock=lambda: FAR_FUTURE)
    [run_id] = runs_by_name(url).values()
    with TestClient(create_app(url), base_url="http://127.0.0.1") as client:
        series = client.get(f"/api/runs/{run_id}/repeated-steps").json()["series"]
        by_tag = {entry["tag"]: entry for entry in series}
        assert by_tag["step_time.mean"]["points"] == 9
        assert [(w["reason"], w["count"]) for w in by_tag["step_time.mean"]["why"]] == [("same_step", 8)]
        assert [(w["reason"], w["count"]) for w in by_tag["loss"]["why"]] == [("step_went_back", 1)]
        assert "restarted or resumed" in by_tag["loss"]["why"][0]["text"]
        events = client.get(f"/api/runs/{run_id}/scalar-events", params={"tag": "loss"}).json()
        assert events["seq"] == list(range(17)) and events["step"] == [*range(10), *range(5, 12)]
        assert events["walltime"] == sorted(events["walltime"]) and events["more"] is False
        page = client.get(f"/api/runs/{run_id}/scalar-events", params={"tag": "loss", "after_seq": 14}).json()
        assert page["seq"] == [15, 16]


def test_the_cli_prints_what_it_imported_and_skipped_and_json_says_the_same(
    logdir: Path, tmp_path: Path
) -> None:
    url = tmp_path / "cli.db"
    text = run_cli(
        "import", "tensorboard", logdir / "torch_old", "--into", url, "--finished-after", "0"
    ).stdout
    assert text.startswith(
        "imported 1 TensorBoard runs (1 new, 0 updated, 0 unchanged, 0 already present; 0 still running)"
    )
    assert "skipped: 1 audio, 1 pr_curves" in text
    assert "25 scalars" in text and "1 histograms" in text and "1 images" in text and "1 texts" in text
    again = run_cli(
        "import", "tensorboard", logdir / "torch_old", "--into", url, "--json", "--finished-after", "0"
    ).stdout
    summary = json.loads(again)
    assert summary["runs"]["unchanged"] == ["torch_old"] and summary["imported"] == {}
    other = json.loads(
        run_cli("import", "tensorboard", logdir / "tbx", "--into", tmp_path / "x.db", "--json").stdout
    )
    assert other["imported"] == {"histograms": 1, "images": 1, "scalars": 15, "texts": 1}
    assert other["runs"]["running"] == ["tbx"]  # written seconds ago: its writer may still be at work


def test_a_damaged_tensor_scalar_shape_is_reported_not_guessed(tmp_path: Path) -> None:
    """A "scalars" tensor that holds more than one number is counted as skipped, with its reason."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.scalar import metadata as scalar_metadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(tmp_path / "logs" / "odd"))
    value = summary_pb2.Summary.Value(
        tag="vector", tensor=tensor_util.make_tensor_proto(np.zeros(3, np.float32))
    )
    value.metadata.CopyFrom(scalar_metadata.create_summary_metadata("", ""))
    writer.add_event(event_pb2.Event(wall_time=1.7e9, step=1, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    report = import_logdir(tmp_path / "logs", tmp_path / "odd.db", clock=lambda: FAR_FUTURE)
    assert report.tally.skipped == {"scalars (not a single number)": 1}


def test_tallyboard_copy_keeps_what_imports_keep(logdir: Path, tmp_path: Path, pg_url: str) -> None:
    """Every point of repeated steps, histograms and read positions survive SQLite ->
    PostgreSQL -> SQLite; importing into the copy then adds nothing."""
    from tallyboard.store.copy import copy_table

    original, returned = str(tmp_path / "original.db"), str(tmp_path / "returned.db")
    import_logdir(logdir, original, clock=lambda: FAR_FUTURE)
    copy_table(original, pg_url, progress=False)
    copy_table(pg_url, returned, progress=False)
    runs = runs_by_name(original)
    assert runs_by_name(returned) == runs
    before, after = open_store(original), open_store(returned)
    try:
        for run_id in runs.values():
            assert stored(after, run_id) == stored(before, run_id)
    finally:
        before.close()
        after.close()
    again = import_logdir(logdir, returned, clock=lambda: FAR_FUTURE)
    assert sorted(again.unchanged) == sorted(runs) and not again.tally.imported


def test_every_monitor_window_written_by_our_own_handler_arrives(tmp_path: Path, db_url: str) -> None:
    """`monitor.TensorboardEventHandler` writes every Stat window at step 0 (TensorBoard's writer
    gets no step): all nine windows of each key arrive, in order, with their timestamps."""
    from datetime import datetime, timedelta, timezone

    from torch.utils.tensorboard import SummaryWriter

    from tallyboard import monitor

    writer = SummaryWriter(str(tmp_path / "logs" / "monitor"))
    handler = monitor.TensorboardEventHandler(writer)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for window in range(9):
        data = {"step_time.mean": 0.1 * window, "step_time.max": 0.2 * window}
        handler(monitor.Event(monitor.STAT_EVENT, start + timedelta(seconds=10 * window), data))
    writer.close()
    import_logdir(tmp_path / "logs", db_url, clock=lambda: FAR_FUTURE)
    [run_id] = runs_by_name(db_url).values()
    store = open_store(db_url)
    try:
        got = stored(store, run_id)
        assert_same(reference(tmp_path / "logs" / "monitor"), got)
        for key in ("step_time.mean", "step_time.max"):
            assert [step for step, _, _ in got["scalars"][key]] == [0] * 9
            walls = [wall for _, wall, _ in got["scalars"][key]]
            assert walls == pytest.approx([start.timestamp() + 10 * w for w in range(9)], abs=1e-3)
    finally:
        store.close()
