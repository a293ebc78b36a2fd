"""Token, CSRF, read-only mode, host check and security headers."""

from __future__ import annotations

import re


def test_state_changes_need_the_csrf_header(client):
    assert client.post("/api/runs/1", json={"note": "x"}).status_code == 403
    wrong = client.post("/api/runs/1", json={"note": "x"}, headers={"X-CSRF-Token": "guess"})
    assert wrong.status_code == 403
    assert client.get("/api/runs/1").json()["note"] == "baseline"


def test_cross_origin_posts_are_refused_even_with_the_header(client):
    headers = {"X-CSRF-Token": client.csrf, "Origin": "http://evil.example"}
    assert client.post("/api/runs/1", json={"note": "x"}, headers=headers).status_code == 403


def test_get_never_changes_state(client):
    assert client.get("/api/runs/1?note=x&hidden=1").json()["note"] == "baseline"


def test_read_only_refuses_every_post(make_client):
    client = make_client(read_only=True)
    response = client.post("/api/runs/1", json={"note": "x"}, headers={"X-CSRF-Token": client.csrf})
    assert response.status_code == 403 and "read-only" in response.json()["error"]
    assert client.get("/api/runs").json()["read_only"] is True
    assert '<meta name="read-only" content="true">' in client.get("/").text


def test_without_a_token_only_loopback_host_names_are_served(make_client):
    assert make_client(base_url="http://localhost:8765").get("/api/version").status_code == 200
    rebinding = make_client(base_url="http://evil.example")  # DNS rebinding: our IP, their name
    assert rebinding.get("/").status_code == 421


def test_token_is_required_and_kept_in_a_cookie(make_client):
    client = make_client(base_url="http://10.1.2.3:8765", token="s3cret")
    client.cookies.clear()
    assert client.get("/api/version").status_code == 401
    assert client.get("/api/version?token=wrong").status_code == 401
    assert client.get("/api/version", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    login = client.get("/?token=s3cret", follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/"
    assert "HttpOnly" in login.headers["set-cookie"] and "SameSite=Strict" in login.headers["set-cookie"]
    assert client.get("/api/version").status_code == 200  # the cookie now carries it


def test_pages_carry_a_restrictive_csp(client):
    headers = client.get("/").headers
    csp = headers["content-security-policy"]
    # only the page's own script, by its hash (test_assets.py checks it is that script's)
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/]+=*';", csp) and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp and headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    api_headers = client.get("/api/runs").headers
    assert "content-security-policy" in api_headers
