"""The OpenAI backend against fakes of vLLM's and llama-server's stream dialects, and retries."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from test_openai_compat import REQUEST, ChatServer, chunk, run

from agent.errors import UserError
from backends.openai_compat import OpenAICompatBackend

CALL_ARGS = ['{"pa', 'th": "', 'src"}']


@pytest.fixture
def server() -> Iterator[ChatServer]:
    s = ChatServer()
    yield s
    s.close()


def fast(url: str | None, **kw: Any) -> OpenAICompatBackend:
    return OpenAICompatBackend(url, retry_backoff=0.01, **kw)


def test_vllm_style_stream(server: ChatServer) -> None:
    """vLLM: the first tool delta has no arguments key; usage comes alone with empty choices."""
    first = {"index": 0, "id": "chatcmpl-tool-1", "type": "function", "function": {"name": "ls"}}
    server.stream(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": None, "tool_calls": [first]}),
            *[
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
                for a in CALL_ARGS
            ],
            chunk({}, "tool_calls"),
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {
                    "prompt_tokens": 30,
                    "completion_tokens": 9,
                    "total_tokens": 39,
                    "prompt_tokens_details": {"cached_tokens": 16},
                },
            },
        ]
    )
    _, done = run(fast(server.base_url), REQUEST)
    (call,) = done.message.tool_calls or []
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "chatcmpl-tool-1",
        "ls",
        {"path": "src"},
    )
    assert done.usage.cached_tokens == 16 and done.finish_reason == "tool_calls"


def test_llama_server_style_stream(server: ChatServer) -> None:
    """llama-server: id and name on every delta, null arguments, usage and timings at the end."""
    parts = [
        {"index": 0, "id": "abc", "type": "function", "function": {"name": "ls", "arguments": a}}
        for a in [None, *CALL_ARGS]
    ]
    server.stream(
        [
            *[chunk({"tool_calls": [p]}) for p in parts],
            chunk(
                {},
                "tool_calls",
                usage={"prompt_tokens": 12, "completion_tokens": 5},
                timings={"predicted_ms": 10.0},
            ),
        ]
    )
    _, done = run(fast(server.base_url), REQUEST)
    (call,) = done.message.tool_calls or []
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "abc",
        "ls",
        {"path": "src"},
    )
    assert done.usage.prompt_tokens == 12


def test_calls_without_index_are_told_apart_by_id(server: ChatServer) -> None:
    server.stream(
        [
            chunk({"tool_calls": [{"id": "a", "function": {"name": "ls", "arguments": "{}"}}]}),
            chunk({"tool_calls": [{"id": "b", "function": {"name": "cat", "arguments": '{"p'}}]}),
            chunk({"tool_calls": [{"function": {"arguments": '": 1}'}}]}),
            chunk({}, "tool_calls"),
        ]
    )
    _, done = run(fast(server.base_url), REQUEST)
    calls = [(c.id, c.function.name, c.function.arguments) for c in done.message.tool_calls or []]
    assert calls == [("a", "ls", "{}"), ("b", "cat", '{"p": 1}')]


def test_missing_arguments_are_an_empty_object(server: ChatServer) -> None:
    server.stream([chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "ls"}}]})])
    _, done = run(fast(server.base_url), REQUEST)
    assert (done.message.tool_calls or [])[0].function.arguments == "{}"


def test_429_and_503_are_retried_then_succeed(server: ChatServer) -> None:
    busy = b'{"error": {"message": "busy"}}'
    server.replies.append((429, {"Retry-After": "0"}, busy))
    server.replies.append((503, {}, busy))
    server.stream([chunk({"content": "ok"}, "stop")])
    text, _ = run(fast(server.base_url), REQUEST)
    assert text == "ok" and len(server.requests) == 3


def test_retries_are_bounded(server: ChatServer) -> None:
    for _ in range(3):
        server.replies.append((500, {}, b'{"error": {"message": "boom"}}'))
    with pytest.raises(UserError, match=r"HTTP 500 \(boom\)"):
        list(fast(server.base_url, max_retries=2).generate(REQUEST))
    assert len(server.requests) == 3


def test_a_400_is_not_retried(server: ChatServer) -> None:
    server.replies.append((400, {}, b'{"error": {"message": "bad tools"}}'))
    with pytest.raises(UserError, match="bad tools"):
        list(fast(server.base_url).generate(REQUEST))
    assert len(server.requests) == 1


def test_a_stream_that_breaks_is_never_retried() -> None:
    """The reply announces more bytes than it sends and the connection drops mid-stream."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.recv(65536)
            event = f"data: {json.dumps(chunk({'content': 'Hel'}))}\n\n".encode()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            conn.sendall(head + f"Content-Length: {len(event) + 500}\r\n\r\n".encode() + event)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    events: list[Any] = []
    with pytest.raises(UserError, match="broke while streaming"):
        for event in fast(url, model="m").generate(REQUEST):
            events.append(event)
    listener.close()
    assert [e.text for e in events] == ["Hel"] and accepted == [1]


def test_connection_refused_is_retried_then_explained() -> None:
    s = ChatServer()
    url = s.base_url
    s.close()
    slept: list[float] = []
    backend = OpenAICompatBackend(url, max_retries=2, retry_backoff=0.1, sleep=slept.append)
    with pytest.raises(UserError, match="cannot reach"):
        list(backend.generate(REQUEST))
    assert len(slept) == 2 and slept[1] > slept[0] * 1.0  # exponential, with jitter


def test_endpoint_from_environment_and_model_from_the_server(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.stream([chunk({"content": "x"}, "stop")])
    backend = OpenAICompatBackend()
    assert backend.base_url == server.base_url
    run(backend, REQUEST)
    # The fake has no /models (it answers GET with 501): no model is sent, the server picks.
    assert "model" not in server.requests[0][1]
