"""Every client mistake gets a 4xx in OpenAI's error shape, and the engine keeps serving."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from serve_support import Served, start_server, stop_server

openai = pytest.importorskip("openai")

HELLO = [{"role": "user", "content": "Hello"}]
TOOL = {
    "type": "function",
    "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}},
}


def post(server: Served, body: Any, path: str = "/chat/completions", **kw: Any) -> httpx.Response:
    if isinstance(body, bytes | str):
        return httpx.post(
            server.base_url + path,
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=60,
            **kw,
        )
    return httpx.post(server.base_url + path, json=body, timeout=60, **kw)


def assert_error(response: httpx.Response, status: int, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    if param is not None:
        assert error["param"] == param
    return str(error["message"])


def test_invalid_json_and_schema_violations(server: Served) -> None:
    assert_error(post(server, b"{not json"), 400)
    assert_error(post(server, "[1, 2]"), 400)
    assert_error(post(server, {"model": server.model}), 400, "messages")
    bad_temperature = {"model": server.model, "messages": HELLO, "temperature": "hot"}
    assert_error(post(server, bad_temperature), 400, "temperature")
    assert_error(post(server, {"model": server.model, "messages": HELLO, "n": 2}), 400, "n")
    no_role = {"model": server.model, "messages": [{"content": "hi"}]}
    assert_error(post(server, no_role), 400)


def test_unknown_model_is_a_404(server: Served) -> None:
    api = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        api.chat.completions.create(model="gpt-17", messages=HELLO)
    assert "gpt-17" in str(caught.value)


def test_a_prompt_longer_than_the_context_names_the_counts(server: Served) -> None:
    models = httpx.get(server.base_url + "/models", timeout=10).json()["data"]
    limit = models[0]["max_model_len"]
    long = [{"role": "user", "content": "word " * (limit + 50)}]
    message = assert_error(post(server, {"model": server.model, "messages": long}), 400)
    assert str(limit) in message and "tokens" in message
    assert any(int(n) > limit for n in message.replace(".", " ").split() if n.isdigit())


def test_max_tokens_out_of_range(server: Served) -> None:
    for field in ("max_tokens", "max_completion_tokens"):
        for value in (0, -3, 10**7):
            body = {"model": server.model, "messages": HELLO, field: value}
            assert_error(post(server, body), 400)


def test_malformed_tools_and_tool_history(server: Served) -> None:
    base = {"model": server.model, "messages": HELLO}
    no_name = {"type": "function", "function": {"parameters": {}}}
    assert_error(post(server, {**base, "tools": [no_name]}), 400)
    bad_schema = {"type": "function", "function": {"name": "x", "parameters": {"type": 5}}}
    assert_error(post(server, {**base, "tools": [bad_schema]}), 400)
    unknown = {"type": "function", "function": {"name": "nope"}}
    assert_error(post(server, {**base, "tools": [TOOL], "tool_choice": unknown}), 400)
    assert_error(post(server, {**base, "tool_choice": "required"}), 400, "tool_choice")
    orphan = [*HELLO, {"role": "tool", "tool_call_id": "call_9", "content": "done"}]
    assert_error(post(server, {**base, "messages": orphan}), 400, "messages[1].tool_call_id")
    broken_call = [
        *HELLO,
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
    ]
    assert_error(post(server, {**base, "messages": broken_call}), 400)
    bad_format = {**base, "response_format": {"type": "json_schema", "json_schema": {}}}
    assert_error(post(server, bad_format), 400)


def test_after_all_that_the_engine_still_answers(server: Served) -> None:
    test_invalid_json_and_schema_violations(server)
    test_malformed_tools_and_tool_history(server)
    reply = post(server, {"model": server.model, "messages": HELLO, "max_tokens": 3})
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 3
    assert_error(httpx.get(server.root + "/nowhere", timeout=10), 404)


def test_an_api_key_is_required_and_checked(tmp_path_factory: pytest.TempPathFactory) -> None:
    served = start_server(tmp_path_factory.mktemp("keyed"), api_key="s3cret-key")
    try:
        body = {"model": served.model, "messages": HELLO, "max_tokens": 2}
        assert_error(post(served, body), 401)
        assert_error(post(served, body, headers={"Authorization": "Bearer wrong"}), 401)
        assert httpx.get(served.root + "/metrics", timeout=10).status_code == 401
        api = openai.OpenAI(base_url=served.base_url, api_key="s3cret-key", max_retries=0)
        assert api.chat.completions.create(**body).usage.completion_tokens == 2
    finally:
        stop_server(served)


def test_an_engine_failure_mid_stream_is_an_error_event_then_done() -> None:
    pytest.importorskip("starlette")
    from backends.engine.serve.app import EventStream
    from backends.engine.serve.bridge import EngineFailed

    async def chunks() -> Any:
        yield {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
        raise EngineFailed("the engine failed while generating: device lost")

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(EventStream(chunks())({"type": "http"}, receive, send))
    body = b"".join(m.get("body", b"") for m in sent).decode()
    events = [e.removeprefix("data: ") for e in body.strip().split("\n\n")]
    assert '"content": "hi"' in events[0]
    assert '"error"' in events[1] and "device lost" in events[1]
    assert events[2] == "[DONE]" and sent[-1]["more_body"] is False
