"""A scripted OpenAI-compatible chat server on 127.0.0.1, standing in for a stronger model.

``reply`` turns each POSTed request body into a chat completion; every body is also kept, in
the order it came, for whoever wants to see what the server was sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Body = dict[str, Any]
MODEL = "scripted-teacher"


def completion(message: Body, finish_reason: str = "stop") -> Body:
    """A chat completion holding ``message`` (an assistant message in wire form)."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


@contextmanager
def scripted_server(reply: Callable[[Body], Body]) -> Iterator[tuple[str, list[Body]]]:
    """The server's base URL (``.../v1``) and the list of request bodies it is sent."""
    seen: list[Body] = []

    class Handler(BaseHTTPRequestHandler):
        def _send(self, data: Body) -> None:
            raw = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": MODEL}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            self._send(reply(body))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
