"""Every endpoint of the dashboard's JSON API, against a real table logged through the public API."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

import tallyboard as tb
from dashboard.compact_series import decoded
from dashboard.sample_table import log_windows_run


def post(client, url: str, body) -> object:
    return client.post(url, json=body, headers={"X-CSRF-Token": client.csrf})


def ids(page: dict) -> list[int]:
    return [row["run_id"] for row in page["rows"]]


# -- runs table --------------------------------------------------------------------------------
def test_runs_lists_every_visible_run_with_hparams_and_results(client):
    page = client.get("/api/runs").json()
    assert page["total"] == 4
    assert ids(page) == [-1, 1, 2, 3]
    first = page["rows"][1]
    assert first["note"] == "baseline" and first["tag"] == "base" and first["status"] == "finished"
    assert first["cells"] == {"lr": 0.001, "optimizer": "adam", "accuracy": 0.91}
    names = {c["name"]: c for c in page["columns"]}
    assert names["lr"]["kind"] == "hparam" and names["accuracy"]["kind"] == "result"


def test_sort_on_a_column_of_mixed_types_and_empty_cells(client):
    ascending = ids(client.get("/api/runs?sort=lr").json())
    descending = ids(client.get("/api/runs?sort=lr&desc=true").json())
    # numbers first (0.001 < 0.01), then strings ("auto"); the empty cell (run -1) last both ways
    assert ascending == [1, 3, 2, -1]
    assert descending == [2, 3, 1, -1]


def test_sort_by_alias_and_unknown_column(client):
    assert ids(client.get("/api/runs?sort=Run ID&desc=1").json()) == [3, 2, 1, -1]
    response = client.get("/api/runs?sort=nope")
    assert response.status_code == 400 and "unknown column" in response.json()["error"]


def test_filter_expression_and_its_errors(client):
    assert ids(client.get("/api/runs", params={"filter": 'lr < 0.005 and status == "finished"'}).json()) == [
        1
    ]
    assert ids(client.get("/api/runs", params={"filter": "accuracy == null"}).json()) == [-1, 3]
    assert ids(client.get("/api/runs", params={"filter": 'lr == "AUTO" or batch_size >= 64'}).json()) == [2]
    bad = client.get("/api/runs", params={"filter": "lr <"})
    assert bad.status_code == 400 and bad.json()["error"].startswith("filter:")
    assert client.get("/api/runs", params={"filter": "__import__('os')"}).status_code == 400


def test_free_text_search_and_paging(client):
    assert ids(client.get("/api/runs?q=BIGGER").json()) == [3]
    page = client.get("/api/runs?offset=1&limit=2").json()
    assert page["total"] == 4 and ids(page) == [1, 2]


def test_hidden_runs_and_ids(client):
    assert post(client, "/api/runs/2", {"hidden": True}).status_code == 200
    assert ids(client.get("/api/runs").json()) == [-1, 1, 3]
    assert ids(client.get("/api/runs?hidden=1").json()) == [-1, 1, 2, 3]
    assert ids(client.get("/api/runs?ids=3,2").json()) == [2, 3]  # ids bring hidden runs too


def test_version_moves_when_a_run_changes(client):
    before = client.get("/api/version").json()
    assert (before["runs"], before["deleted"]) == (3, 0)  # the largest run id, no run deleted
    post(client, "/api/runs/1", {"note": "changed"})
    after = client.get("/api/version").json()
    assert after["updated_at"] > before["updated_at"]


def test_new_runs_logged_by_another_writer_appear(client, sample_db):
    assert client.get("/api/runs").json()["total"] == 4
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"lr": 0.5}, auto_log_plt=False) as run:
        run.add_hparams(lr=0.5)
    table.close()
    page = client.get("/api/runs?sort=run_id&desc=1").json()
    assert page["total"] == 5 and page["rows"][0]["cells"]["lr"] == 0.5


def test_tags(client):
    assert client.get("/api/tags").json() == {"tags": ["base"]}


# -- editing -----------------------------------------------------------------------------------
def test_edit_note_tag_colour_status(client):
    body = {"note": "<img src=x onerror=alert(1)>", "tag": "best", "color": "#ff0000", "status": "failed"}
    run = post(client, "/api/runs/2", body).json()
    assert {k: run[k] for k in body} == body  # stored verbatim; pages insert it as text
    assert client.get("/api/tags").json()["tags"] == ["base", "best"]


def test_edit_rejects_bad_values_and_unknown_runs(client):
    for body in ({"color": "red"}, {"status": "done"}, {"run_id": 5}, {}, {"hidden": "yes"}, {"note": 3}):
        response = post(client, "/api/runs/1", body)
        assert response.status_code == 400, body
    assert post(client, "/api/runs/99", {"note": "x"}).status_code == 404
    response = client.post("/api/runs/1", content=b"note=x", headers={"X-CSRF-Token": client.csrf})
    assert response.status_code == 400


def test_columns_rename_hide_reorder_persist_in_the_store(client, sample_db):
    columns = client.get("/api/columns").json()["columns"]
    prefs = [{"name": c["name"], "alias": c["alias"], "position": c["position"]} for c in columns]
    lr = next(p for p in prefs if p["name"] == "lr")
    lr.update(alias="learning rate", position=0)
    experiment = next(p for p in prefs if p["name"] == "experiment")
    experiment["position"] = None
    saved = post(client, "/api/columns", {"columns": prefs}).json()["columns"]
    assert saved[0]["name"] == "lr" and saved[0]["alias"] == "learning rate"
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    stored = table.result_columns
    table.close()
    assert stored["lr"][:2] == (0, "learning rate") and stored["experiment"][0] is None
    assert ids(client.get("/api/runs", params={"sort": "learning rate"}).json())[0] == 1


def test_columns_reject_bad_input(client):
    assert (
        post(client, "/api/columns", {"columns": [{"name": "nope", "alias": "x", "position": 1}]}).status_code
        == 400
    )
    assert (
        post(client, "/api/columns", {"columns": [{"name": "lr", "alias": "", "position": 1}]}).status_code
        == 400
    )
    assert post(client, "/api/columns", {"columns": []}).status_code == 400


# -- one run -----------------------------------------------------------------------------------
def test_run_detail(client):
    run = client.get("/api/runs/1").json()
    assert run["hparams"] == {"lr": 0.001, "optimizer": "adam"} and run["results"] == {"accuracy": 0.91}
    assert json.loads(run["cli"]) == {"lr": 0.001}
    assert [r["rep"] for r in run["repetitions"]] == [0, 1]
    series = {(s["tag"], s["rep"]) for s in run["series"]}
    assert series == {("train/accuracy", 0), ("train/accuracy", 1), ("train/loss", 0), ("train/loss", 1),
                      ("val/loss", 0), ("val/loss", 1)}  # fmt: skip
    assert client.get("/api/runs/-1").json()["experiment"] == "debug"
    assert client.get("/api/runs/12345").status_code == 404
    assert client.get(f"/api/runs/{10**30}").status_code == 400


def test_series_downsamples_with_min_max_last(client):
    data = client.get("/api/series?runs=1&metric=loss&width=50").json()
    compact = next(s for s in data["series"] if s["tag"] == "train/loss" and s["rep"] == 0)
    assert compact["step"] == {"first": 5, "stride": 6, "count": 50}  # regular steps as a range
    train = decoded(compact)
    assert data["bucket"] == 6 and len(train["step"]) == 50
    # bucket 0 holds steps 0..5 of 1/(step+1): max is the first value, min and last the sixth
    # (values to 9 significant digits: a float32's precision, more than a chart shows)
    assert train["max"][0] == 1.0 and train["min"][0] == train["value"][0] == float(f"{1 / 6:.9g}")
    assert train["step"][0] == 5
    val = decoded(next(s for s in data["series"] if s["tag"] == "val/loss"))
    assert len(val["step"]) == 10  # sparse series keep every point
    assert {s["split"] for s in data["series"]} == {"train", "val"}


def test_series_full_resolution_when_it_fits_and_zoom(client):
    data = client.get("/api/series?runs=1,2&metric=accuracy&width=1000").json()
    assert data["bucket"] == 1 and all(len(decoded(s)["step"]) == 300 for s in data["series"])
    zoom = client.get("/api/series?runs=2&metric=loss&width=40&step_min=100&step_max=139").json()
    train = decoded(next(s for s in zoom["series"] if s["tag"] == "train/loss"))
    assert train["step"] == list(range(100, 140)) and train["value"][0] == pytest.approx(0.5 / 101, rel=1e-9)


def test_series_come_compact_with_no_repeated_or_empty_columns(client):
    """Raw points carry no min and max (they are the value), no epoch when none was logged, steps as
    a range when regular and wall times as differences of milliseconds."""
    data = client.get("/api/series?runs=1&metric=accuracy&width=1000").json()
    assert data["bucket"] == 1
    for line in data["series"]:
        assert "min" not in line and "max" not in line and len(line["epoch"]) == 300
        assert line["step"] == {"first": 0, "stride": 1, "count": 300}
        assert all(isinstance(ms, int) and ms >= 0 for ms in line["wall_ms"])
        assert len(line["wall_ms"]) == len(line["value"]) == 300
    (debug,) = client.get("/api/series?runs=-1&metric=loss").json()["series"]  # logged without an epoch
    assert "epoch" not in debug and debug["step"] == [0] and debug["value"] == [1.0]
    bucketed = client.get("/api/series?runs=1&metric=accuracy&width=50").json()["series"][0]
    assert len(bucketed["min"]) == len(bucketed["max"]) == len(bucketed["value"]) == 50


def test_a_series_whose_steps_count_stat_windows_says_so(make_client, sample_db):
    """A run that logged only a monitor Stat (through ResultTableEventHandler): its steps are the
    windows' indices, and its series say `axis: "window"`, which the chart puts under its x axis."""
    run_id = log_windows_run(sample_db)
    client = make_client()
    (windows,) = client.get(f"/api/series?runs={run_id}&metric=step_time.mean").json()["series"]
    assert windows["axis"] == "window" and decoded(windows)["step"] == [0, 1, 2]
    assert all("axis" not in s for s in client.get("/api/series?runs=1&metric=loss").json()["series"])
    grown = client.get(f"/api/live?runs={run_id}&after={run_id}:{windows['tag_id']}:0:0").json()
    assert [s["axis"] for s in grown["series"]] == ["window"]


def test_series_names_lists_each_tag_once_with_its_runs(client):
    tags = client.get("/api/series/names?runs=1,2,77").json()["tags"]
    assert [t["tag"] for t in tags] == ["train/accuracy", "train/loss", "val/loss"]
    assert tags[1] == {"tag": "train/loss", "split": "train", "metric": "loss", "runs": [1, 2]}
    assert client.get("/api/series/names").status_code == 400


def test_series_errors(client):
    assert client.get("/api/series").status_code == 400
    assert client.get("/api/series?runs=a").status_code == 400
    assert client.get("/api/series?runs=1&width=0").status_code == 400
    assert client.get("/api/series?runs=" + ",".join(map(str, range(51)))).status_code == 400
    assert client.get("/api/series?runs=77").json()["series"] == []


def test_live_sends_only_points_after_the_cursor(client, sample_db):
    first = client.get("/api/series?runs=3&metric=loss&width=2000").json()
    train = decoded(next(s for s in first["series"] if s["tag"] == "train/loss"))
    val = decoded(next(s for s in first["series"] if s["tag"] == "val/loss"))
    cursors = [f"3:{s['tag_id']}:{s['rep']}:{s['last_step']}" for s in (train, val)]
    nothing = client.get("/api/live", params={"runs": "3", "metric": "loss", "after": cursors}).json()
    assert nothing["series"] == [] and nothing["runs"][0]["status"] == "running"

    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    writer = table.new_run("exp", cli={"lr": 0.7}, auto_log_plt=False)  # another run: not in the reply
    writer.add_scalar("train/loss", 9.0, step=0, flush=True)
    writer.close()
    table.close()
    more = client.get("/api/live", params={"runs": "3", "after": cursors}).json()
    assert {s["tag"] for s in more["series"]} == {"train/accuracy"}  # the series the client lacked
    assert client.get("/api/live?runs=3&after=junk").status_code == 400


def test_csv_export_is_full_resolution(client):
    response = client.get("/api/runs/1/scalars.csv", params={"tag": "train/loss"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 600  # 300 steps x 2 repetitions
    assert rows[0]["value"] == "1.0" and rows[-1]["rep"] == "1"
    assert client.get("/api/runs/1/scalars.csv", params={"tag": "nope"}).status_code == 404


def test_media_index_and_png_by_id(client):
    media = client.get("/api/runs/1/media?kind=image").json()["media"]
    assert [(m["tag"], m["step"]) for m in media] == [("samples", 0), ("samples", 10)]
    png = client.get(f"/api/media/{media[0]['media_id']}")
    assert png.headers["content-type"] == "image/png" and png.content.startswith(b"\x89PNG")
    assert client.get("/api/runs/1/media?kind=figure").json() == {"media": []}
    assert client.get("/api/runs/1/media?kind=../../etc").status_code == 400
    assert client.get("/api/media/999").status_code == 404


def test_texts_and_fragments(client):
    texts = client.get("/api/runs/1/texts?kind=text").json()["texts"]
    assert texts[0]["content"] == "epoch 1 <b>done</b>"
    fragment = client.get("/api/runs/1/texts?kind=fragment").json()["texts"][0]
    page = client.get(f"/fragments/{fragment['text_id']}")
    csp = page.headers["content-security-policy"]
    assert "sandbox allow-scripts" in csp and "allow-same-origin" not in csp and "default-src 'none'" in csp
    assert client.get("/fragments/999").status_code == 404


def test_logged_tables_come_as_standard_json(client):
    [table] = client.get("/api/runs/1/texts?kind=table").json()["texts"]
    assert (table["tag"], table["step"]) == ("per_class", 10)
    content = json.loads(table["content"])  # standard JSON: NaN as the string, listed as a float
    assert content["columns"] == ["class", "recall"] and content["data"][1] == ["dog", "NaN"]
    assert content["nonfinite"] == [[1, 1]]
    assert client.get("/api/runs/1/texts?kind=tables").status_code == 400


def test_pages_and_static_assets_are_served_by_the_package(client):
    for url in ("/", "/runs/1", "/compare?runs=1,2"):
        page = client.get(url)
        # the page's script and styles are written into it (assets.py): nothing to load, from us or a CDN
        assert page.status_code == 200 and '<script type="module">' in page.text and "<style>" in page.text
        assert not re.search(r'(src|href)=["\']?(https?:)?//|<script src|<link rel="stylesheet"', page.text)
    for asset in ("/static/app.css", "/static/common.js", "/static/vendor/uplot/uPlot.iife.min.js"):
        assert client.get(asset).status_code == 200
    assert client.get("/static/../app.py").status_code == 404
