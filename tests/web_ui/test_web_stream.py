"""A turn's stream as a script sees it: server-sent events, and a page going away mid-turn."""

from __future__ import annotations

import json

import httpx

from tests.connectors.harness import processes_with
from tests.connectors.loopthread import wait_for
from tests.web_ui.conftest import WAIT_S, WebServer
from tests.web_ui.test_web_security import page_tokens


def test_the_stream_is_server_sent_events(web: WebServer) -> None:
    with httpx.Client(base_url=web.url, timeout=WAIT_S) as client:
        headers = page_tokens(client)
        with client.stream(
            "POST", "/chat/send", json={"message": "stream me please"}, headers=headers
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(x[6:]) for x in r.iter_lines() if x.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds.count("token") > 1 and kinds[-3:] == ["final", "usage", "done"]
    assert "".join(e["text"] for e in events if e["type"] == "token") == "echo: stream me please"


def test_a_page_that_goes_away_stops_its_turn(web: WebServer) -> None:
    with httpx.Client(base_url=web.url, timeout=WAIT_S) as client:
        headers = page_tokens(client)
        message = {"message": "run: sleep 30 && echo web-ui-page-gone"}
        with client.stream("POST", "/chat/send", json=message, headers=headers) as r:
            for line in r.iter_lines():
                event = json.loads(line[6:]) if line.startswith("data: ") else {}
                if event.get("type") == "approval":
                    answer = {"id": event["id"], "answer": "once"}
                    assert client.post("/chat/approve", json=answer, headers=headers).is_success
                if event.get("type") == "approval_resolved":
                    wait_for(lambda: processes_with("web-ui-page-gone"), WAIT_S, "the command")
                    break
            else:
                raise AssertionError("the turn ended before its command ran")
        # The stream is closed mid-command, as when the tab is closed.
        wait_for(lambda: not processes_with("web-ui-page-gone"), WAIT_S, "the command to stop")
        # The tab's session is free again for its next turn.
        again = client.post("/chat/send", json={"message": "still there?"}, headers=headers)
        assert again.status_code == 200 and "echo: still there?" in again.text


def test_a_tab_runs_one_turn_at_a_time_and_stop_refuses_its_open_ask(web: WebServer) -> None:
    with httpx.Client(base_url=web.url, timeout=WAIT_S) as client:
        headers = page_tokens(client)
        message = {"message": "run: echo web-ui-busy > busy.txt"}  # a write: asked
        with client.stream("POST", "/chat/send", json=message, headers=headers) as r:
            events = (json.loads(x[6:]) for x in r.iter_lines() if x.startswith("data: "))
            ask = next(e for e in events if e["type"] == "approval")
            second = client.post("/chat/send", json={"message": "me too"}, headers=headers)
            assert second.status_code == 409
            assert client.post("/chat/stop", json={}, headers=headers).json() == {"stopped": True}
            rest = list(events)
    kinds = [e["type"] for e in rest]
    first = rest[0]
    assert (first["type"], first["id"], first["outcome"]) == (
        "approval_resolved",
        ask["id"],
        "cancelled",
    )
    assert "stopped" in kinds and "tool_result" in kinds
    assert not (web.workspace / "busy.txt").exists()
    late = {"id": ask["id"], "answer": "once"}
    gone = httpx.post(web.url + "/chat/approve", json=late, headers=headers)
    assert gone.status_code == 404  # the ask closed with its turn
