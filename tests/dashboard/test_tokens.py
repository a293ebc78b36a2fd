"""`tallyboard tokens` and a server's tokens file (dashboard/tokens.py): named read and write tokens,
kept as hashes, each let in where it may go and no further."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tallyboard.cli import main
from tallyboard.dashboard import create_app
from tallyboard.dashboard import tokens as token_file


def made(capsys, *args: str) -> str:
    assert main(["tokens", *args]) == 0
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_tokens_are_shown_once_and_the_file_keeps_only_their_hashes(tmp_path, capsys):
    file = str(tmp_path / "tokens.json")
    writer = made(capsys, "add", "cluster-a", "--write", "--file", file)
    reader = made(capsys, "add", "alice", "--file", file)
    text = Path(file).read_text()
    assert writer not in text and reader not in text
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o600
    assert main(["tokens", "list", "--file", file]) == 0
    listed = capsys.readouterr().out
    assert "cluster-a\twrite" in listed and "alice\tread" in listed and writer not in listed
    assert main(["tokens", "add", "alice", "--file", file]) != 0  # names are unique
    assert "already" in capsys.readouterr().err
    assert main(["tokens", "remove", "alice", "--file", file]) == 0
    assert [entry.name for entry in token_file.read(file)] == ["cluster-a"]


def test_the_default_file_is_in_the_users_config_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert token_file.default_file() == tmp_path / "tallyboard" / "tokens.json"


@pytest.fixture
def served(tmp_path):
    file = tmp_path / "tokens.json"
    tokens = {
        "writer": token_file.add(file, "writer", "write"),
        "reader": token_file.add(file, "reader", "read"),
    }
    app = create_app(str(tmp_path / "served.db"), tokens=token_file.read(file))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, tokens


def test_every_token_of_the_file_opens_the_dashboard_and_only_write_tokens_write(served):
    client, tokens = served
    assert client.get("/api/runs").status_code == 401  # a file of tokens: the dashboard asks for one
    for token in tokens.values():
        assert client.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    ingest = "/api/ingest/v1"
    assert client.get(ingest, headers={"Authorization": f"Bearer {tokens['writer']}"}).status_code == 200
    assert client.get(ingest, headers={"Authorization": f"Bearer {tokens['reader']}"}).status_code == 403


def test_a_token_in_the_address_becomes_the_cookie(served):
    client, tokens = served
    opened = client.get(f"/?token={tokens['reader']}", follow_redirects=False)
    assert opened.status_code == 303 and tokens["reader"] in opened.headers["set-cookie"]
    assert client.get("/api/runs").status_code == 200  # the cookie does it from now on
