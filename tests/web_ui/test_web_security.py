"""Who may reach `agent web`: Host and Origin checks, CSRF tokens, the access token, loopback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.web_ui.conftest import WebServer, make_server

ROOT = Path(__file__).resolve().parents[2]


def page_tokens(client: httpx.Client) -> dict[str, str]:
    """The headers the page's script sends with each POST, read from a freshly rendered page."""
    html = client.get("/").text
    session = re.search(r'data-session="([^"]+)"', html)
    csrf = re.search(r'data-csrf="([^"]+)"', html)
    assert session and csrf
    return {"x-clawloop-session": session[1], "x-csrf-token": csrf[1]}


def test_a_post_from_another_origin_is_refused(web: WebServer) -> None:
    with httpx.Client(base_url=web.url, timeout=20) as client:
        headers = page_tokens(client)
        foreign = {**headers, "origin": "http://attacker.example"}
        r = client.post("/chat/send", json={"message": "hi"}, headers=foreign)
        assert r.status_code == 403 and "another origin" in r.text
        # The same request from the page's own origin goes through.
        ok = client.post("/chat/stop", json={}, headers={**headers, "origin": web.url})
        assert ok.status_code == 200


def test_a_post_without_the_pages_csrf_token_is_refused(web: WebServer) -> None:
    with httpx.Client(base_url=web.url, timeout=20) as client:
        headers = page_tokens(client)
        no_token = {"x-clawloop-session": headers["x-clawloop-session"]}
        assert (
            client.post("/chat/send", json={"message": "hi"}, headers=no_token).status_code == 403
        )
        # A token is tied to its page's session: another page's does not fit.
        other = page_tokens(client)
        swapped = {**headers, "x-csrf-token": other["x-csrf-token"]}
        assert client.post("/chat/stop", json={}, headers=swapped).status_code == 403


def test_a_foreign_host_header_is_refused(web: WebServer) -> None:
    """DNS rebinding: a foreign name resolving to 127.0.0.1 arrives with that name as Host."""
    r = httpx.get(web.url + "/", headers={"host": f"attacker.example:{web.port}"})
    assert r.status_code == 403
    assert httpx.get(f"http://localhost:{web.port}/traces").status_code == 200


def test_with_a_token_every_request_needs_it(web: WebServer) -> None:
    server, close = make_server(web.workspace, token="s3cret-token-for-tests")
    try:
        with httpx.Client(base_url=server.url, timeout=20) as client:
            assert client.get("/").status_code == 403
            assert client.get("/?token=wrong").status_code == 403
            r = client.get("/traces?token=s3cret-token-for-tests")
            assert r.status_code == 303 and r.headers["location"] == "/traces"
            assert client.get("/traces").status_code == 200  # the cookie set once
        headers = {"x-clawloop-token": "s3cret-token-for-tests"}
        assert httpx.get(server.url + "/", headers=headers).status_code == 200
    finally:
        close()


def test_on_the_any_address_the_token_guards_every_host_name(web: WebServer) -> None:
    """Bound to 0.0.0.0 the server is reached by names it cannot know (the machine's address on
    each network), so it takes any Host; the token, which a rebinding page never has, guards."""
    server, close = make_server(web.workspace, token="s3cret-token-for-tests", bound="0.0.0.0")
    token = {"x-clawloop-token": "s3cret-token-for-tests"}
    lan = {"host": f"192.0.2.7:{server.port}"}
    try:
        assert httpx.get(server.url + "/", headers=lan).status_code == 403
        with httpx.Client(base_url=server.url, headers={**lan, **token}, timeout=20) as client:
            headers = page_tokens(client)
            assert client.post("/chat/stop", json={}, headers=headers).status_code == 200
            foreign = {**headers, "origin": "http://attacker.example"}
            assert client.post("/chat/stop", json={}, headers=foreign).status_code == 403
            own = {**headers, "origin": f"http://192.0.2.7:{server.port}"}
            assert client.post("/chat/stop", json={}, headers=own).status_code == 200
    finally:
        close()


def test_the_command_refuses_another_host_without_a_token(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "web", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--token" in lines[0] and "0.0.0.0" in lines[0]


def test_the_read_only_pages_pass_the_same_checks(web: WebServer) -> None:
    """/evals and /ops change nothing, but show what is on this machine: the Host, Origin and
    token checks hold for them as for the chat."""
    for path in ("/evals", "/ops", "/evals/compare?a=x&b=y"):
        foreign_host = {"host": f"attacker.example:{web.port}"}
        assert httpx.get(web.url + path, headers=foreign_host).status_code == 403
        foreign_origin = {"origin": "http://attacker.example"}
        assert httpx.get(web.url + path, headers=foreign_origin).status_code == 403
    assert httpx.get(web.url + "/evals").status_code == 200
    server, close = make_server(web.workspace, token="s3cret-token-for-tests")
    try:
        for path in ("/evals", "/ops"):
            r = httpx.get(server.url + path)
            assert r.status_code == 403 and "token" in r.text
            token = {"x-clawloop-token": "s3cret-token-for-tests"}
            ok = httpx.get(server.url + path, headers=token, timeout=20)
            assert (
                ok.status_code == 200
                and "frame-ancestors 'none'" in ok.headers["content-security-policy"]
            )
    finally:
        close()
