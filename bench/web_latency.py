"""What the web page adds to a turn's latency, against `agent run` on the same scripted model.

Both sides use the fake backend with the same scripted answer, the same settings, toolbox and
loop (built by ``cli.wiring`` as the commands build them), a fresh session each time and a trace
written as they go:

- ``agent run``: in process, from the call to the loop (``run_traced``) to its first TokenEvent;
- the page: its app on a real uvicorn server on 127.0.0.1, from sending the POST the page's
  script sends (``/chat/send``, with the page's CSRF token) to the first ``token`` event of the
  stream it returns, read with httpx; and the page load (``GET /``), which each new tab costs.

Medians over N runs after a few warm-up runs. The goal: page load plus the stream's extra time
under 50 ms. Data goes to a temporary folder; the user's own is never touched.

    PYTHONPATH=. python bench/web_latency.py [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

ANSWER = "Hello from the scripted model, streamed to you one word at a time."
WARMUP = 3


def agent_run_first_token(runs: int) -> list[float]:
    """Seconds from starting a run, as `agent run` does, to its first TokenEvent."""
    from agent.events import TokenEvent
    from agent.messages import AssistantMessage
    from agent.session import Session
    from backends.fake import FakeBackend
    from cli.config import load_settings
    from cli.wiring import build_loop, run_traced, settings_toolbox

    settings = load_settings({"backend": "fake"})
    backend = FakeBackend([AssistantMessage(content=ANSWER)] * (runs + WARMUP))
    loop = build_loop(settings, backend, settings_toolbox(settings, None, None, backend))
    times = []
    for _ in range(runs + WARMUP):
        began = time.perf_counter()
        first = None
        for event in run_traced(settings, loop, Session(), "hello"):
            if first is None and isinstance(event, TokenEvent):
                first = time.perf_counter() - began
        assert first is not None, "the scripted answer streamed no token"
        times.append(first)
    return times[WARMUP:]


def web_first_token(runs: int) -> tuple[list[float], list[float]]:
    """Seconds of each page load (GET /), and from the POST to the stream's first token."""
    import httpx
    import uvicorn

    from agent.messages import AssistantMessage
    from backends.fake import FakeBackend
    from cli.config import load_settings
    from cli.web_cmd import web_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    settings = load_settings({"backend": "fake"})
    backend = FakeBackend([AssistantMessage(content=ANSWER)] * (runs + WARMUP))
    app = web_app(settings, "127.0.0.1", port, None, backend)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    loads, firsts = [], []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(runs + WARMUP):
                began = time.perf_counter()
                page = client.get("/")  # a new tab: a new session, as `agent run` makes
                loads.append(time.perf_counter() - began)
                headers = {
                    "x-clawloop-session": _attribute(page.text, "data-session"),
                    "x-csrf-token": _attribute(page.text, "data-csrf"),
                }
                began = time.perf_counter()
                first = None
                with client.stream(
                    "POST", "/chat/send", json={"message": "hello"}, headers=headers
                ) as reply:
                    for line in reply.iter_lines():
                        if first is None and line == "event: token":
                            first = time.perf_counter() - began
                assert first is not None, "the page's stream sent no token"
                firsts.append(first)
    finally:
        server.should_exit = True
        thread.join(10)
    return loads[WARMUP:], firsts[WARMUP:]


def _attribute(html: str, name: str) -> str:
    found = re.search(rf'{name}="([^"]+)"', html)
    if found is None:
        raise SystemExit(f"the page has no {name}")
    return found[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clawloop-web-bench-") as tmp:
        os.environ["CLAWLOOP_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["CLAWLOOP_CONFIG"] = str(Path(tmp) / "config.toml")
        cli_first = statistics.median(agent_run_first_token(args.runs))
        loads, firsts = web_first_token(args.runs)
    load, web_first = statistics.median(loads), statistics.median(firsts)
    ms = 1000.0
    print(f"runs: {args.runs} each (median), scripted fake backend")
    print(f"first token, agent run in process : {cli_first * ms:7.2f} ms")
    print(f"first token, web page POST stream : {web_first * ms:7.2f} ms")
    print(f"  the page's stream adds          : {(web_first - cli_first) * ms:7.2f} ms")
    print(f"page load, GET /                  : {load * ms:7.2f} ms")
    added = load + web_first - cli_first
    verdict = "under" if added < 0.050 else "OVER"
    print(f"page load + stream's extra        : {added * ms:7.2f} ms ({verdict} the 50 ms goal)")


if __name__ == "__main__":
    main()
