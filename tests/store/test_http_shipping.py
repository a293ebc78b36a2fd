"""`ResultTable("http://...")` (store/http_shipping.py) against a real `tallyboard serve --accept-writes`
process on each engine: a run logged with the whole API reads back from the server's table as the
same run logged straight into a SQLite file does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

import numpy
import pytest

import tallyboard as tb
from remote_server import READ_TOKEN, WRITE_TOKEN, ServerProcess, own_server
from tallyboard.cli import main
from tallyboard.store.http_shipping import default_spool
from tallyboard.store.location import Location
from tallyboard.store.spool_shipper import stop_shippers

NOP = tb.NoCommitAction.NOP
pytestmark = pytest.mark.usefixtures("shippers_end_with_the_test")  # tests/conftest.py


def log_everything(table: tb.ResultTable) -> int:
    """One run using every kind of call; returns its id (the table's own)."""
    run = table.new_run("everything", comment="all calls", cli={"lr": 0.1}, auto_log_plt=False)
    run.add_hparams(lr=0.1, layers=3, optimiser="adam")
    for step in range(300):
        run.add_scalar("train/loss", 1 / (step + 1), epoch=step // 100)
    run.add_scalar("train/odd", float("nan"))
    run.add_scalar("train/odd", float("inf"))
    run.add_text("**bold**", tag="notes", markdown=True)
    run.add_text("untagged")
    run.add_fragment("<b>fragment</b>", tag="html")
    run.add_histogram("weights", [0.1, 0.2, 0.2, 5.0, float("nan")], step=3)
    run.add_table(["a", "b"], [[1, "x"], [2, "y"]], tag="metrics")
    run.add_image(numpy.full((3, 4, 3), 200, dtype=numpy.uint8), tag="samples", step=1)
    run.set_note("a note")
    run.add_tags("remote", "baseline")
    run.write_result(accuracy=0.93, loss=0.2)
    return run.run_id


def snapshot(table: tb.ResultTable, run_id: int) -> dict:
    run = table.load_run(run_id)
    strip = ("run_id", "id", "text_id", "media_id", "wall_time", "walltime", "histogram_id")
    return {
        "scalars": {
            tag: [(s.step, s.epoch, repr(s.value)) for s in run.get_scalar(tag)]
            for tag in sorted(run.scalars)
        },
        "images": [{k: v for k, v in t.items() if k not in strip} for t in run.get_images()],
        "texts": [{k: v for k, v in t.items() if k not in strip} for t in run.get_text()],
        "fragments": [{k: v for k, v in t.items() if k not in strip} for t in run.get_fragment()],
        "histograms": [(h.tag, h.step, repr(h.histogram)) for h in run.get_histograms()],
        "hparams": run.get_hparams(),
        "status": run.status,
        "tags": run.get_tags(),
        "results": table.get_results().data[0][1:],
    }


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_run_logged_through_the_server_reads_back_as_one_logged_directly(tmp_path, engine, request):
    served = str(tmp_path / "served.db") if engine == "sqlite" else request.getfixturevalue("pg_url")
    direct = tb.ResultTable(str(tmp_path / "direct.db"), nocommit_action=NOP)
    expected = snapshot(direct, log_everything(direct))
    with own_server(served) as server:
        remote = tb.ResultTable(
            server.url, token=WRITE_TOKEN, spool=tmp_path / "spool.db", nocommit_action=NOP
        )
        run_id = log_everything(remote)
        assert remote.ship(timeout=60)
        server_id = remote.database_run_id(run_id)
        assert server_id == 1  # the server's id, decided by the server
        with tb.ResultTable(served, read_only=True) as table:
            assert snapshot(table, server_id) == expected


def test_run_ids_and_uniqueness_are_the_servers_across_clients(tmp_path):
    served = str(tmp_path / "served.db")
    with own_server(served) as server:
        ids = []
        # three nodes, each with a spool of its own: two refuse duplicates, the third reruns
        for client, on_duplicate in (("a", "raise"), ("b", "raise"), ("c", "new")):
            spool = tmp_path / f"{client}.db"
            table = tb.ResultTable(server.url, token=WRITE_TOKEN, spool=spool, nocommit_action=NOP)
            run = table.new_run("same", comment="same config", auto_log_plt=False, on_duplicate=on_duplicate)
            run.close()
            assert table.ship(timeout=60)
            ids.append(table.database_run_id(run.run_id))
        assert ids == [1, 2, 3]
        with tb.ResultTable(served, read_only=True) as table:
            runs = {row[0]: row for row in table.get_results(show_hidden=True).data}
            assert sorted(runs) == [1, 2, 3]
            store = table.load_run(1)._store
            assert "duplicate of run 1" in (store.run(2).note or "")  # found by the server, kept hidden
            assert store.run(3).rerun_of == 1


def test_a_read_token_cannot_write_and_the_spool_keeps_the_run(tmp_path):
    served = str(tmp_path / "served.db")
    with own_server(served, "--token", READ_TOKEN) as server:
        table = tb.ResultTable(server.url, token=READ_TOKEN, spool=tmp_path / "spool.db", nocommit_action=NOP)
        run = table.new_run("refused", auto_log_plt=False)
        run.close()
        assert not table.ship(timeout=2)
        assert table.database_run_id(run.run_id) is None


def test_the_token_and_spool_come_from_the_environment_and_skins_log_there(tmp_path):
    served = str(tmp_path / "served.db")
    with own_server(served) as server:
        script = (
            "import tallyboard.wandb as wandb\n"
            "wandb.init(project='skin')\n"
            "for step in range(50): wandb.log({'loss': 1 / (step + 1)})\n"
            "wandb.finish()\n"
        )
        env = {
            **os.environ, "TALLYBOARD_URL": server.url, "TALLYBOARD_TOKEN": WRITE_TOKEN,
            "TALLYBOARD_SPOOL": str(tmp_path / "skin-spool.db"),
        }  # fmt: skip
        subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120, cwd=tmp_path)
        with tb.ResultTable(served, read_only=True) as table:
            (row,) = table.get_results().data
            run = table.load_run(row[0])
            assert len(run.get_scalar("loss")) == 50 and run.status == "finished"


def test_the_default_spool_is_one_file_per_server_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = default_spool(Location.of("https://tracker.example:8765"))
    assert first.startswith(str(tmp_path / "tallyboard" / "spools"))
    assert os.path.basename(first).startswith("tracker.example-8765-")
    assert default_spool(Location.of("https://tracker.example:8765/")) == first
    assert default_spool(Location.of("https://other:8765")) != first


def test_a_server_is_logged_to_not_read():
    with pytest.raises(ValueError, match="logged to, not read"):
        tb.ResultTable("http://127.0.0.1:9", read_only=True)
    with pytest.raises(ValueError, match="through a spool"):
        tb.ResultTable("http://127.0.0.1:9", spool=False)


def test_https_with_a_certificate_of_the_servers_own(tmp_path, monkeypatch):
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    served = str(tmp_path / "served.db")
    with own_server(served, "--certfile", cert, "--keyfile", key) as server:
        url = server.url.replace("http://", "https://")
        table = tb.ResultTable(url, token=WRITE_TOKEN, spool=tmp_path / "spool.db", nocommit_action=NOP)
        run = table.new_run("over tls", auto_log_plt=False)
        run.add_scalar("loss", 0.5)
        run.close()
        assert not table.ship(timeout=3)  # the system's certificates do not know this one
        monkeypatch.setenv("SSL_CERT_FILE", cert)  # as docs/server.md says for a self-signed server
        assert table.ship(timeout=60)
        with tb.ResultTable(served, read_only=True) as read:
            assert len(read.load_run(table.database_run_id(run.run_id)).get_scalar("loss")) == 1


def test_a_spool_logged_while_the_server_was_down_ships_with_tallyboard_sync(tmp_path):
    served, spool = str(tmp_path / "served.db"), str(tmp_path / "spool.db")
    server = ServerProcess(served)  # its address is known; it is not started yet
    table = tb.ResultTable(server.url, token=WRITE_TOKEN, spool=spool, nocommit_action=NOP)
    run = table.new_run("offline", auto_log_plt=False)
    for step in range(500):
        run.add_scalar("loss", step / 10)
    run.close()
    assert not table.ship(timeout=1)
    stop_shippers(timeout=0)  # the process that logged is gone, as far as shipping goes
    server.start()
    try:
        assert main(["sync", spool]) == 0
        with tb.ResultTable(served, read_only=True) as read:
            assert len(read.load_run(1).get_scalar("loss")) == 500
    finally:
        server.kill()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_artefact_bytes_are_uploaded_and_the_server_shows_and_exports_them(tmp_path, engine, request):
    served = str(tmp_path / "served.db") if engine == "sqlite" else request.getfixturevalue("pg_url")
    options = () if engine == "sqlite" else ("--artifacts", str(tmp_path / "server-files"))
    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_bytes(os.urandom(9 * 2**20 + 5))  # three chunks of the client's
    (tmp_path / "empty.txt").write_bytes(b"")
    with own_server(served, *options) as server:
        remote = tb.ResultTable(
            server.url, token=WRITE_TOKEN, spool=tmp_path / "spool.db", nocommit_action=NOP
        )
        run = remote.new_run("files", auto_log_plt=False)
        run.log_artifact(checkpoint, kind="model", step=3)
        run.log_artifact(tmp_path / "empty.txt")
        run.log_artifact(tmp_path / "empty.txt", name="../../escape.txt")  # a label, never a path
        run.close()
        assert remote.ship(timeout=120)
        server_id = remote.database_run_id(run.run_id)
        page = urllib.request.urlopen(f"{server.url}/api/runs/{server_id}/artifacts/model.ckpt", timeout=60)
        assert page.read() == checkpoint.read_bytes()  # the dashboard serves the uploaded bytes
    files = None if engine == "sqlite" else tmp_path / "server-files"
    with tb.ResultTable(served, read_only=True, artifacts=files) as table:
        rows = table.list_artifacts(server_id)
        assert sorted((row.name, row.size) for row in rows) == [
            ("../../escape.txt", 0), ("empty.txt", 0), ("model.ckpt", 9 * 2**20 + 5)
        ]  # fmt: skip
        table.save_artifact(server_id, "model.ckpt", tmp_path / "saved.ckpt")
        assert (tmp_path / "saved.ckpt").read_bytes() == checkpoint.read_bytes()
        table.export(tmp_path / "export")
    exported = [
        path for path in (tmp_path / "export").rglob("*") if path.is_file() and path.stat().st_size > 2**20
    ]
    assert [path.read_bytes() == checkpoint.read_bytes() for path in exported] == [True]
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path.parent / "escape.txt").exists()
