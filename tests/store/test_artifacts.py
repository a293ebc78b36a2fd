"""Artefacts: files kept with a run in a content-addressed store (a real folder, a real S3 server),
listed in the table on both engines, fetched by the CLI and the dashboard, carried by a copy."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from ports import free_port
from tallyboard.dashboard import create_app
from tallyboard.errors import ArtifactError
from tallyboard.store import is_postgres_url, open_store
from tallyboard.store.artifacts import LocalBlobs, Upload, Uploader, blob_key
from tallyboard.store.records import ArtifactRow


def blobs_under(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "sha256").rglob("*") if p.is_file())


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def store_folder(db_url: str, tmp_path: Path) -> Path:
    """Where the table's artefacts go: next to a SQLite file by default, configured for PostgreSQL."""
    return tmp_path / ("shared-artifacts" if is_postgres_url(db_url) else "results.artifacts")


@pytest.fixture
def table(db_url: str, store_folder: Path):
    configured = store_folder if is_postgres_url(db_url) else None  # SQLite: the default folder
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, artifacts=configured)
    yield table
    table.close()


def test_logged_files_are_listed_with_the_run_and_the_same_bytes_stored_once(table, store_folder, tmp_path):
    (tmp_path / "a.ckpt").write_bytes(b"weights" * 1000)
    (tmp_path / "b.ckpt").write_bytes(b"weights" * 1000)  # the same bytes under another name
    (tmp_path / "preds.csv").write_bytes(b"id,label\n1,cat\n")
    run = table.new_run("artefacts")
    run.log_artifact(tmp_path / "a.ckpt", kind="model", step=10)
    run.log_artifact(str(tmp_path / "b.ckpt"), name="best.ckpt", kind="model")
    run.log_artifact(tmp_path / "preds.csv")
    run.close()

    listed = {row.name: row for row in table.load_run(run.run_id).get_artifacts()}
    assert sorted(listed) == ["a.ckpt", "best.ckpt", "preds.csv"]
    assert listed["a.ckpt"].kind == "model" and listed["a.ckpt"].step == 10
    assert listed["a.ckpt"].size == 7000 and listed["a.ckpt"].sha256 == sha(b"weights" * 1000)
    assert listed["best.ckpt"].sha256 == listed["a.ckpt"].sha256 and listed["best.ckpt"].step is None
    assert listed["preds.csv"].kind == "file" and listed["preds.csv"].logged_at > 0
    stored = blobs_under(store_folder)
    assert [p.name for p in stored] == sorted({sha(b"weights" * 1000), sha(b"id,label\n1,cat\n")})
    assert (store_folder / blob_key(sha(b"id,label\n1,cat\n"))).read_bytes() == b"id,label\n1,cat\n"
    assert list((store_folder / "tmp").iterdir()) == []  # every temporary copy was renamed


def test_a_name_logged_again_is_replaced_and_a_folder_is_logged_by_relative_paths(table, tmp_path):
    folder = tmp_path / "outputs"
    (folder / "plots").mkdir(parents=True)
    (folder / "metrics.json").write_text("{}")
    (folder / "plots" / "roc.svg").write_text("<svg/>")
    run = table.new_run("folder")
    run.log_artifacts(folder, kind="outputs", step=3)
    (folder / "metrics.json").write_text('{"acc": 1}')
    run.log_artifact(folder / "metrics.json", step=4)
    run.flush()
    rows = {row.name: row for row in run.get_artifacts()}
    assert sorted(rows) == ["metrics.json", "plots/roc.svg"]
    assert rows["plots/roc.svg"].kind == "outputs" and rows["plots/roc.svg"].step == 3
    assert rows["metrics.json"].sha256 == sha(b'{"acc": 1}') and rows["metrics.json"].step == 4
    run.close()


def test_bad_arguments_are_refused_at_the_call(table, tmp_path):
    run = table.new_run("bad")
    (tmp_path / "f.bin").write_bytes(b"x")
    with pytest.raises(ArtifactError, match="no such file"):
        run.log_artifact(tmp_path / "missing.bin")
    with pytest.raises(ArtifactError, match="no such file"):
        run.log_artifact(tmp_path)  # a folder: that is log_artifacts
    with pytest.raises(ValueError, match="name must be a non-empty str"):
        run.log_artifact(tmp_path / "f.bin", name="")
    with pytest.raises(TypeError, match="step must be"):
        run.log_artifact(tmp_path / "f.bin", step=1.5)
    with pytest.raises(NotADirectoryError):
        run.log_artifacts(tmp_path / "f.bin")
    run.close()
    with pytest.raises(RuntimeError, match="read-only"):
        run.log_artifact(tmp_path / "f.bin")
    assert table.load_run(run.run_id).get_artifacts() == []


def test_postgres_without_an_artifact_store_says_how_to_configure_one(pg_url, tmp_path, monkeypatch):
    monkeypatch.delenv("TALLYBOARD_ARTIFACTS", raising=False)
    table = tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP)
    (tmp_path / "f.bin").write_bytes(b"x")
    run = table.new_run("no store")
    with pytest.raises(ArtifactError, match=r"no artefact store.*artifacts='s3://bucket/prefix'"):
        run.log_artifact(tmp_path / "f.bin")
    run.close()
    table.close()


def test_tallyboard_artifacts_names_the_store_of_every_table(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("TALLYBOARD_ARTIFACTS", str(tmp_path / "team-store"))
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    (tmp_path / "f.bin").write_bytes(b"env")
    with table.new_run("env") as run:
        run.log_artifact(tmp_path / "f.bin")
    table.close()
    assert [p.name for p in blobs_under(tmp_path / "team-store")] == [sha(b"env")]


def test_a_stored_hash_never_becomes_a_path_outside_the_store(tmp_path):
    with pytest.raises(ArtifactError, match="not a sha256"):
        LocalBlobs(tmp_path).open("../" * 8 + "etc/passwd")


def test_a_failed_copy_leaves_no_half_file_under_a_hash(tmp_path):
    class Failing:
        """A source that breaks after its first chunk, like a disk error halfway through."""

        def __init__(self) -> None:
            self.calls = 0

        def read(self, size: int) -> bytes:
            self.calls += 1
            if self.calls > 1:
                raise OSError("read error")
            return b"x" * size

    blobs = LocalBlobs(tmp_path / "store")
    with pytest.raises(OSError, match="read error"):
        blobs.put_stream(Failing(), sha(b"never"))
    assert not (tmp_path / "store" / "sha256").exists()
    assert list((tmp_path / "store" / "tmp").iterdir()) == []


def test_a_file_gone_before_its_copy_is_reported_and_the_next_one_is_stored(tmp_path):
    (tmp_path / "kept.bin").write_bytes(b"kept")
    rows: list = []
    uploader = Uploader(LocalBlobs(tmp_path / "store"), rows.append)
    uploader.submit(Upload(str(tmp_path / "gone.bin"), 1, "gone.bin", "file", None, 0.0))
    uploader.submit(Upload(str(tmp_path / "kept.bin"), 1, "kept.bin", "file", None, 0.0))
    with pytest.warns(RuntimeWarning, match=r"'gone.bin' of run 1 .* was not stored"):
        uploader.wait()
    assert [row.name for row in rows] == ["kept.bin"]


def test_submitting_returns_before_the_copy_and_wait_returns_after_it(tmp_path):
    gate = threading.Event()

    class GatedBlobs(LocalBlobs):
        """A real folder whose copies start only when the test opens the gate."""

        def put(self, path):
            gate.wait()
            return super().put(path)

    (tmp_path / "f.bin").write_bytes(b"f")
    rows: list = []
    uploader = Uploader(GatedBlobs(tmp_path / "store"), rows.append)
    uploader.submit(Upload(str(tmp_path / "f.bin"), 1, "f.bin", "file", None, 0.0))  # returns: not copied
    assert rows == []
    gate.set()
    uploader.wait()
    assert [row.name for row in rows] == ["f.bin"]
    uploader.close()  # the thread ends; a later submit starts another
    uploader.submit(Upload(str(tmp_path / "f.bin"), 1, "again.bin", "file", None, 0.0))
    uploader.close()
    assert [row.name for row in rows] == ["f.bin", "again.bin"]


# ---- the CLI and the dashboard ------------------------------------------------------------------
@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, int]:
    """A SQLite table with one run holding two artefacts (one in a subfolder)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model.ckpt").write_bytes(os.urandom(3 * 1024 * 1024 + 17))  # several chunks
    (tmp_path / "out" / "sub").mkdir()
    (tmp_path / "out" / "sub" / "report <b>.html").write_text("<script>alert(1)</script>")
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("cli") as run:
        run.log_artifacts(tmp_path / "out", step=5)
    table.close()
    return tmp_path / "results.db", run.run_id


def test_cli_lists_and_gets_artifacts(logged, tmp_path):
    db, run_id = logged
    listed = json.loads(run_cli("artifacts", "list", str(run_id), "--table", db, "--json").stdout)
    assert [row["name"] for row in listed] == ["model.ckpt", "sub/report <b>.html"]
    assert "model.ckpt" in run_cli("artifacts", "list", str(run_id), "--table", db).stdout
    run_cli("artifacts", "get", str(run_id), "model.ckpt", "-o", tmp_path / "got.ckpt", "--table", db)
    assert (tmp_path / "got.ckpt").read_bytes() == (tmp_path / "out" / "model.ckpt").read_bytes()
    run_cli("artifacts", "get", str(run_id), "sub/report <b>.html", "--table", db, cwd=tmp_path / "out")
    missing = run_cli("artifacts", "get", str(run_id), "nope.ckpt", "--table", db, check=False)
    assert_one_line_error(missing, "no artefact 'nope.ckpt'", "model.ckpt")


def test_cli_gets_an_artifact_named_like_a_path_into_the_current_folder_only(tmp_path):
    """A logged name is a label: `artifacts get` without -o writes its last part here, never up
    where "../" points, and a name that ends in no file name asks for -o."""
    (tmp_path / "weights.bin").write_bytes(b"weights")
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("names") as run:
        run.log_artifact(tmp_path / "weights.bin", name="../../escape.bin")
        run.log_artifact(tmp_path / "weights.bin", name="up/..")
    table.close()
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    db = tmp_path / "results.db"
    run_cli("artifacts", "get", str(run.run_id), "../../escape.bin", "--table", db, cwd=here)
    assert (here / "escape.bin").read_bytes() == b"weights"
    assert not (tmp_path / "escape.bin").exists()
    dots = run_cli("artifacts", "get", str(run.run_id), "up/..", "--table", db, cwd=here, check=False)
    assert_one_line_error(dots, "ends in no file name", "-o")
    assert [path.name for path in here.iterdir()] == ["escape.bin"]  # and no half-written file


def test_dashboard_lists_and_streams_an_artifact_as_a_download(logged, tmp_path):
    db, run_id = logged
    with TestClient(create_app(str(db), read_only=True), base_url="http://127.0.0.1") as client:
        listed = client.get(f"/api/runs/{run_id}/artifacts").json()["artifacts"]
        assert [row["name"] for row in listed] == ["model.ckpt", "sub/report <b>.html"]
        response = client.get(f"/api/runs/{run_id}/artifacts/model.ckpt")
        assert response.status_code == 200
        assert response.content == (tmp_path / "out" / "model.ckpt").read_bytes()
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["cross-origin-resource-policy"] == "same-origin"
        html = client.get(f"/api/runs/{run_id}/artifacts/sub/report%20%3Cb%3E.html")
        assert html.content == b"<script>alert(1)</script>"  # a download, never shown as a page
        assert html.headers["content-disposition"] == "attachment; filename*=UTF-8''report%20%3Cb%3E.html"
        assert html.headers["x-content-type-options"] == "nosniff"
        assert client.get(f"/api/runs/{run_id}/artifacts/nope").status_code == 404
    hostile = open_store(str(db))  # a row whose hash is a path: refused, never followed
    hostile.add_artifact(ArtifactRow(run_id, "evil", "file", 1, "../../../etc/passwd", None, 0.0))
    hostile.close()
    with TestClient(create_app(str(db), read_only=True), base_url="http://127.0.0.1") as client:
        refused = client.get(f"/api/runs/{run_id}/artifacts/evil")
        assert refused.status_code == 404 and "not a sha256" in refused.json()["error"]


def test_copy_carries_the_files_to_the_destinations_store(logged, tmp_path):
    db, run_id = logged
    run_cli("copy", db, tmp_path / "copy.db", "--quiet")
    got = run_cli("artifacts", "get", str(run_id), "model.ckpt", "-o", tmp_path / "c.ckpt", "--table",
                  tmp_path / "copy.db")  # fmt: skip
    assert got.returncode == 0
    assert (tmp_path / "c.ckpt").read_bytes() == (tmp_path / "out" / "model.ckpt").read_bytes()
    assert [p.name for p in blobs_under(tmp_path / "copy.artifacts")] == [
        p.name for p in blobs_under(tmp_path / "results.artifacts")
    ]


def test_copy_into_postgres_needs_a_store_and_carries_the_files_there(logged, pg_url, tmp_path):
    db, run_id = logged
    refused = run_cli("copy", db, pg_url, "--quiet", check=False)
    assert_one_line_error(refused, "no artefact store", "--artifacts-to")
    run_cli("copy", db, pg_url, "--quiet", "--artifacts-to", tmp_path / "pg-store")
    assert len(blobs_under(tmp_path / "pg-store")) == 2
    run_cli("artifacts", "get", str(run_id), "model.ckpt", "-o", tmp_path / "p.ckpt", "--table", pg_url,
            "--artifacts", tmp_path / "pg-store")  # fmt: skip
    assert (tmp_path / "p.ckpt").read_bytes() == (tmp_path / "out" / "model.ckpt").read_bytes()


def test_export_writes_the_list_and_the_files_alongside(logged, tmp_path):
    db, run_id = logged
    run_cli("export", db, "--out", tmp_path / "backup", "--quiet")
    with open(tmp_path / "backup" / "artifacts.csv", newline="") as listing:
        rows = {row["name"]: row for row in csv.DictReader(listing)}
    assert sorted(rows) == ["model.ckpt", "sub/report <b>.html"]
    ckpt = rows["model.ckpt"]
    assert (ckpt["run_id"], ckpt["step"]) == (str(run_id), "5")
    exported = tmp_path / "backup" / "artifacts" / blob_key(ckpt["sha256"])
    assert exported.read_bytes() == (tmp_path / "out" / "model.ckpt").read_bytes()
    assert sorted(p.name for p in (tmp_path / "backup" / "artifacts").iterdir()) == ["sha256"]
    assert json.loads((tmp_path / "backup" / "manifest.json").read_text())["counts"]["artifacts"] == 2


# ---- a 2 GB checkpoint streams ------------------------------------------------------------------
# Peak memory is this process's VmHWM, reset just before what is measured: not ru_maxrss, which
# Linux carries from parent to child, so that a child of a large pytest process would read its
# parent's peak and a growth of 0. The control (128 MiB read at once) shows the probe sees memory.
STREAM_SCRIPT = """
import sys
import tallyboard as tb

def restart_peak():
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset the peak resident set to the current one
    return peak()

def peak():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))  # KiB

path, db = sys.argv[1], sys.argv[2]
with open(path, "wb") as f:
    f.truncate(2 * 1024**3)  # sparse: 2 GiB of zeros that take no disk until copied
table = tb.ResultTable(db, nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("big")
before = restart_peak()
run.log_artifact(path, kind="model")
run.close()
after = peak()
control_before = restart_peak()
with open(path, "rb") as f:
    whole = f.read(128 * 1024**2)
control_after = peak()
(row,) = table.load_run(run.run_id).get_artifacts()
print(before, after, control_before, control_after, row.size, row.sha256, "fsspec" in sys.modules)
"""


def test_a_2gb_artifact_is_hashed_and_copied_in_chunks(tmp_path):
    script = textwrap.dedent(STREAM_SCRIPT)
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "big.ckpt"), str(tmp_path / "results.db")],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    before_kib, after_kib, control_before, control_after, size, digest, fsspec = result.stdout.split()
    assert fsspec == "False"  # a local folder needs the standard library alone
    assert int(size) == 2 * 1024**3
    growth_mib = (int(after_kib) - int(before_kib)) / 1024
    assert growth_mib < 64, f"peak memory grew by {growth_mib:.0f} MiB while storing 2 GiB"
    assert (int(control_after) - int(control_before)) / 1024 >= 127  # the probe sees a 128 MiB read
    stored = tmp_path / "results.artifacts" / blob_key(digest)
    assert stored.stat().st_size == 2 * 1024**3
    assert list((tmp_path / "results.artifacts" / "tmp").iterdir()) == []


# ---- an S3-compatible object store (moto's server, on a free local port) -------------------------
@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch):
    """A bucket on a real S3 server (moto's, over HTTP on 127.0.0.1), configured for fsspec in this
    process and, through FSSPEC_S3_* variables, in the CLI's subprocesses."""
    import fsspec
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "testing", "secret": "testing"}
    for name, value in options.items():
        monkeypatch.setenv(f"FSSPEC_S3_{name.upper()}", value)
    monkeypatch.setitem(fsspec.config.conf, "s3", options)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    bucket = f"experiments-{uuid.uuid4().hex[:12]}"  # moto's buckets outlive its server in-process
    fs.mkdir(bucket)
    yield f"s3://{bucket}/team/artifacts"
    fsspec.filesystem("s3").clear_instance_cache()
    server.stop()


def test_artifacts_in_s3_are_stored_once_and_fetched_by_the_cli_and_dashboard(db_url, s3_url, tmp_path):
    import fsspec

    payload = os.urandom(2 * 1024 * 1024 + 5)
    for name in ("a.ckpt", "b.ckpt"):
        (tmp_path / name).write_bytes(payload)
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, artifacts=s3_url)
    with table.new_run("s3") as run:
        run.log_artifact(tmp_path / "a.ckpt", kind="model")
        run.log_artifact(tmp_path / "b.ckpt", kind="model")
    table.close()
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    prefix = s3_url.removeprefix("s3://")
    assert fs.find(prefix) == [f"{prefix}/{blob_key(sha(payload))}"]  # stored once, no temporaries
    run_cli("artifacts", "get", str(run.run_id), "b.ckpt", "-o", tmp_path / "got", "--table", db_url,
            "--artifacts", s3_url)  # fmt: skip
    assert (tmp_path / "got").read_bytes() == payload
    with TestClient(
        create_app(db_url, read_only=True, artifacts=s3_url), base_url="http://127.0.0.1"
    ) as client:
        assert client.get(f"/api/runs/{run.run_id}/artifacts/a.ckpt").content == payload
