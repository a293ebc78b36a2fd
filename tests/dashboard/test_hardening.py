"""Holes found by a real-browser audit (issue 16, items 1 and 3-10), each closed and kept closed."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

import tallyboard as tb
from tallyboard.dashboard import create_app, serve
from tallyboard.dashboard.security import MAX_BODY

HUGE_ID = "9" * 5000


@pytest.mark.parametrize("token", ["", " ", "\t\n"])
def test_an_empty_or_blank_token_is_refused_before_serving(sample_db, token):
    with pytest.raises(ValueError, match="token is empty"):
        create_app(str(sample_db), token=token)
    with pytest.raises(ValueError, match="token is empty"):
        serve(str(sample_db), host="0.0.0.0", port=0, token=token)


def test_serve_with_an_unset_token_variable_stops_with_one_clear_line(sample_db):
    done = subprocess.run(
        [sys.executable, "-m", "tallyboard", "serve", str(sample_db), "--host", "0.0.0.0", "--token", ""],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "the token is empty" in done.stderr and "Traceback" not in done.stderr


def test_a_token_with_surrounding_whitespace_is_refused(sample_db):
    with pytest.raises(ValueError, match="whitespace"):
        create_app(str(sample_db), token=" s3cret ")


def test_a_token_with_spaces_and_semicolons_works_through_its_cookie(make_client):
    token = 'my token; with "quotes", commas and =signs'
    client = make_client(base_url="http://10.1.2.3:8765", token=token)
    client.cookies.clear()
    login = client.get("/", params={"token": token}, follow_redirects=False)
    assert login.status_code == 303
    assert ";" not in login.headers["set-cookie"].split(";")[0].split("=", 1)[1]  # encoded
    assert client.get("/api/version").status_code == 200
    assert client.get("/").status_code == 200


@pytest.mark.parametrize(
    "path",
    [f"/api/runs/{HUGE_ID}", f"/fragments/{HUGE_ID}", f"/api/media/{HUGE_ID}",
     f"/api/runs/-{HUGE_ID}/texts", f"/api/runs/{HUGE_ID}/scalars.csv?tag=x"],
)  # fmt: skip
def test_huge_ids_are_a_client_error(make_client, path):
    client = make_client()
    response = client.get(path)
    assert 400 <= response.status_code < 500, response.text


def test_a_run_page_for_a_huge_id_is_served_and_its_api_call_refused(client):
    assert client.get(f"/runs/{HUGE_ID}").status_code == 200  # the page shows the API's message
    assert "out of range" in client.get(f"/api/runs/{HUGE_ID}").json()["error"]


def test_huge_ids_in_a_post_are_a_client_error(client):
    response = client.post(f"/api/runs/{HUGE_ID}", json={"note": "x"}, headers={"X-CSRF-Token": client.csrf})
    assert response.status_code == 400


def test_an_extreme_step_range_is_cut_to_the_steps_that_exist(client):
    query = "runs=1&metric=loss&step_min=-4611686018427387904&step_max=4611686018427387904&width=1"
    response = client.get(f"/api/series?{query}")
    assert response.status_code == 200
    body = response.json()
    assert (body["hi"], len(body["series"])) == (299, 4)
    past = client.get("/api/series?runs=1&metric=loss&step_min=1000000&step_max=4611686018427387904")
    assert past.status_code == 200 and all(s["step"] == [] for s in past.json()["series"])


def test_deeply_nested_json_is_a_client_error(client):
    body = "[" * 100_000 + "]" * 100_000
    response = client.post(
        "/api/runs/1", content=body,
        headers={"X-CSRF-Token": client.csrf, "Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 400 and "nested" in response.json()["error"]


def test_a_lone_surrogate_is_a_client_error_and_changes_nothing(client):
    response = client.post(
        "/api/runs/1", content=b'{"note": "\\ud800"}',
        headers={"X-CSRF-Token": client.csrf, "Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 400 and "surrogate" in response.json()["error"]
    assert client.get("/api/runs/1").json()["note"] == "baseline"


def test_fragments_get_a_policy_that_blocks_the_network_and_a_guard_against_webrtc(client):
    headers = client.get("/fragments/2", headers={"Sec-Fetch-Dest": "iframe"}).headers
    policy = headers["content-security-policy"]
    assert policy.startswith("sandbox allow-scripts;") and "allow-same-origin" not in policy
    assert "default-src 'none'" in policy and "connect-src" not in policy
    assert "form-action 'none'" in policy
    body = client.get("/fragments/2", headers={"Sec-Fetch-Dest": "iframe"}).text
    assert body.startswith("<script>") and "delete window[name]" in body and "<p id='frag'>" in body


def test_a_fragment_opened_as_a_page_is_framed_by_us(client):
    page = client.get("/fragments/2", headers={"Sec-Fetch-Dest": "document"})  # the address bar
    assert page.status_code == 200
    assert '<iframe class="fragment whole" sandbox="allow-scripts" src="/fragments/2"' in page.text
    assert "fragment</p>" not in page.text  # the logged HTML itself is not in this document
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_a_scheme_relative_path_does_not_redirect_off_the_server(make_client):
    client = make_client(base_url="http://10.1.2.3:8765", token="s3cret")
    for path in ("//evil.example/x", "///evil.example/x", "/\\evil.example/x"):
        response = client.get(f"{path}?token=s3cret", follow_redirects=False)
        assert response.status_code == 303
        location = response.headers["location"]
        assert location.startswith("/") and not location.startswith(("//", "/\\")), location


def test_every_response_forbids_cross_origin_reads(client):
    for path in ("/", "/api/runs", "/api/media/1", "/static/app.css", "/api/runs/999"):
        assert client.get(path).headers["cross-origin-resource-policy"] == "same-origin", path


def test_csv_cells_that_look_like_formulas_stay_text(sample_db, client):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("csv", cli={}, auto_log_plt=False)
    for tag in ("=HYPERLINK(1)", "+cmd", "@SUM", "-x"):
        run.add_scalar(tag, -1.5, step=0)
    run.close()
    table.close()
    for tag in ("=HYPERLINK(1)", "+cmd", "@SUM", "-x"):
        response = client.get(f"/api/runs/{run.run_id}/scalars.csv", params={"tag": tag})
        rows = list(csv.reader(io.StringIO(response.text)))
        assert rows[1][1] == "'" + tag
        assert float(rows[1][-1]) == -1.5  # numbers are numbers, negative ones included


def test_request_bodies_are_capped(client):
    headers = {"X-CSRF-Token": client.csrf, "Content-Type": "application/json"}
    big = b'{"note": "' + b"x" * MAX_BODY + b'"}'
    response = client.post("/api/runs/1", content=big, headers=headers)
    assert response.status_code == 413

    def chunks():  # no Content-Length: the cap holds while reading
        yield b'{"note": "'
        for _ in range(MAX_BODY // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    streamed = client.post("/api/runs/1", content=chunks(), headers=headers)
    assert streamed.status_code == 413
    assert client.get("/api/runs/1").json()["note"] == "baseline"
