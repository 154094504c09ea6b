"""A backend for any OpenAI-compatible server: vLLM, SGLang, llama-server, Ollama, OpenAI.

The server applies the chat template and parses tool calls, so this is a plain
:class:`agent.backend.Backend`: it POSTs the request to ``{base_url}/chat/completions`` with
``stream: true`` (over httpx) and turns the server-sent events back into text deltas and one
completion. Servers differ in small ways, all accepted: tool-call deltas are merged by
``index`` (or by ``id`` where a server leaves ``index`` out), missing or null arguments are
empty, a name may be repeated on every delta, usage may come in a chunk with empty ``choices``
or next to the finish reason, and an ``error`` event ends the stream with a clear message.

Connecting is retried with exponential backoff on connection errors, 429 and 5xx (honouring
``Retry-After``); once the reply has started streaming nothing is retried, so no answer is
ever shown twice. The endpoint, key and model come from config or the environment
(``CLAWLOOP_BASE_URL``/``OPENAI_BASE_URL``, ``CLAWLOOP_API_KEY``/``OPENAI_API_KEY``); with no
model configured, the first one the server lists at ``/models`` is used. The key is sent as a
bearer token and never appears in messages or reprs.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.backend import BackendEvent, Completion, TextDelta
from agent.errors import BackendError
from agent.messages import AssistantMessage, ChatRequest, ToolCall, Usage, new_call_id

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
API_KEY_ENV = ("CLAWLOOP_API_KEY", "OPENAI_API_KEY")
BASE_URL_ENV = ("CLAWLOOP_BASE_URL", "OPENAI_BASE_URL")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 30.0  # seconds: a longer Retry-After is not worth blocking the agent for


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Reply:
    """The assistant message as it accumulates from stream chunks."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, _CallParts] = field(default_factory=dict)
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)

    def message(self) -> AssistantMessage:
        calls = [
            ToolCall.make(part.name, "".join(part.arguments) or "{}", part.id or new_call_id())
            for _, part in sorted(self.calls.items())
        ]
        return AssistantMessage(content="".join(self.content) or None, tool_calls=calls or None)


class OpenAICompatBackend:
    """Streams chat completions from an OpenAI-compatible HTTP server."""

    name = "openai"
    # A request's response_format goes to the server as it is (vLLM, SGLang, llama-server and
    # OpenAI honour it). A server that ignores it may answer outside the schema, so code that
    # relies on the schema still checks the answer, as the quarantined reader does.
    supports_response_format = True

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = base_url or next((os.environ[k] for k in BASE_URL_ENV if os.environ.get(k)), None)
        self.base_url = (url or DEFAULT_BASE_URL).rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.retry_backoff = retry_backoff
        self._sleep = sleep
        self._api_key = api_key or next(
            (os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), None
        )
        # Connecting should fail fast; a slow model may take long for its first token.
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)))

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
        body = request.to_wire()
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        if request.model is None:
            model = self.model or self._served_model()
            if model is not None:
                body["model"] = model
        reply = _Reply()
        response = self._open(body)
        kind = response.headers.get("Content-Type") or ""
        try:
            if "json" in kind and "event-stream" not in kind:
                yield from self._whole(response.read(), reply)  # the server ignored "stream"
            else:
                yield from self._events(response, reply, kind)
        except httpx.HTTPError as exc:  # timeouts included
            raise BackendError(
                f"the connection to {self.url} broke while streaming ({_describe(exc)}): "
                "is the server up?"
            ) from None
        finally:
            response.close()
        message = reply.message()
        reason = "tool_calls" if message.tool_calls else reply.finish_reason
        yield Completion(message=message, finish_reason=reason, usage=reply.usage)

    # --- connecting, with retries ----------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _open(self, body: dict[str, Any]) -> httpx.Response:
        """The streaming response, its status checked; retried only before anything streamed."""
        attempt = 0
        while True:
            try:
                req = self._client.build_request(
                    "POST", self.url, json=body, headers=self._headers()
                )
                response = self._client.send(req, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                if attempt < self.max_retries:
                    self._sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                raise BackendError(
                    f"cannot reach {self.url} ({_describe(exc)}): is the server running, and is "
                    "base_url right (it usually ends in /v1)?"
                ) from None
            except httpx.HTTPError as exc:
                raise BackendError(f"cannot reach {self.url} ({_describe(exc)})") from None
            if response.status_code < 400:
                return response
            if response.status_code in RETRY_STATUSES and attempt < self.max_retries:
                delay = _retry_after(response) or self._backoff(attempt)
                response.close()
                self._sleep(delay)
                attempt += 1
                continue
            try:
                detail = response.read()
            finally:
                response.close()
            raise BackendError(_http_problem(self.url, response.status_code, detail))

    def _backoff(self, attempt: int) -> float:
        """Exponential, with jitter so that many agents do not retry in lockstep."""
        return self.retry_backoff * (2**attempt) * (0.5 + random.random() / 2)

    def _served_model(self) -> str | None:
        """The first model the server lists (remembered), or None if it lists none."""
        try:
            response = self._client.get(f"{self.base_url}/models", headers=self._headers())
            data = response.json().get("data") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None  # the chat request will say what is wrong
        if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id"):
            self.model = str(data[0]["id"])
        return self.model

    # --- reading the reply -----------------------------------------------------------------------

    def _events(self, response: httpx.Response, reply: _Reply, kind: str) -> Iterator[TextDelta]:
        events = 0
        for data in _sse_data(response.iter_lines()):
            if data.strip() == "[DONE]":
                break
            events += 1
            yield from self._chunk(_json(data, self.url), reply)
        if events == 0:
            raise BackendError(
                f"{self.url} answered without any chat completion events "
                f"(content type {kind or 'unknown'}): is it an OpenAI-compatible endpoint?"
            )

    def _chunk(self, chunk: dict[str, Any], reply: _Reply) -> Iterator[TextDelta]:
        if "error" in chunk:
            raise BackendError(f"{self.url} reported an error: {_error_text(chunk['error'])}")
        _read_usage(chunk.get("usage"), reply)
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                reply.content.append(text)
                yield TextDelta(text)
            for part in delta.get("tool_calls") or []:
                if isinstance(part, dict):
                    _add_call_part(part, reply)
            if choice.get("finish_reason"):
                reply.finish_reason = str(choice["finish_reason"])

    def _whole(self, raw: bytes, reply: _Reply) -> Iterator[TextDelta]:
        data = _json(raw.decode("utf-8", "replace"), self.url)
        if "error" in data:
            raise BackendError(f"{self.url} reported an error: {_error_text(data['error'])}")
        _read_usage(data.get("usage"), reply)
        choices = data.get("choices") or [{}]
        message = choices[0].get("message") or {}
        reply.finish_reason = str(choices[0].get("finish_reason") or "stop")
        for index, call in enumerate(message.get("tool_calls") or []):
            _add_call_part({**call, "index": index}, reply)
        text = message.get("content")
        if isinstance(text, str) and text:
            reply.content.append(text)
            yield TextDelta(text)


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined with newlines)."""
    buffered: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if buffered:
                yield "\n".join(buffered)
                buffered = []
        elif line.startswith("data:"):
            value = line[5:]
            buffered.append(value[1:] if value.startswith(" ") else value)
        # "event:", "id:", "retry:" and ":" comment lines carry nothing we need
    if buffered:
        yield "\n".join(buffered)


def _add_call_part(part: dict[str, Any], reply: _Reply) -> None:
    index = part.get("index")
    if not isinstance(index, int):
        # No index (some servers): a new id starts a call, anything else continues the last.
        ids = {c.id: i for i, c in reply.calls.items()}
        call_id = part.get("id")
        if call_id and call_id in ids:
            index = ids[call_id]
        elif call_id or not reply.calls:
            index = len(reply.calls)
        else:
            index = max(reply.calls)
    call = reply.calls.setdefault(index, _CallParts())
    if part.get("id"):
        call.id = str(part["id"])
    function = part.get("function") or {}
    name = function.get("name")
    if isinstance(name, str) and name and name != call.name:
        call.name += name  # a name sent in pieces; one repeated on every delta is kept once
    args = function.get("arguments")
    if isinstance(args, str):
        call.arguments.append(args)
    elif args is not None:  # some servers send the arguments object itself
        call.arguments.append(json.dumps(args, ensure_ascii=False))


def _read_usage(usage: Any, reply: _Reply) -> None:
    if not isinstance(usage, dict):
        return
    details = usage.get("prompt_tokens_details") or {}
    reply.usage = Usage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int((details or {}).get("cached_tokens") or 0),
    )


def _json(text: str, url: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise BackendError(
            f"{url} sent something that is not JSON ({text[:80]!r}): is it an "
            "OpenAI-compatible chat completions endpoint?"
        ) from None
    if not isinstance(data, dict):
        raise BackendError(f"{url} sent JSON that is not an object: is it OpenAI-compatible?")
    return data


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value))) if value else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _http_problem(url: str, status: int, raw: bytes) -> str:
    detail = httpx.codes.get_reason_phrase(status) or str(status)
    try:
        error = json.loads(raw.decode("utf-8", "replace")).get("error")
        detail = _error_text(error) if error else detail
    except (json.JSONDecodeError, AttributeError):
        pass  # not a JSON error body: the status line says enough
    hint = {
        401: "check the API key (the api_key option, or CLAWLOOP_API_KEY / OPENAI_API_KEY)",
        403: "check the API key and its permissions",
        404: "check base_url (it usually ends in /v1) and the model name",
        400: "the server rejected the request: check the model name and its tool support",
        422: "the server rejected the request: check the model name and its tool support",
        429: "the server is rate limiting: wait and retry",
    }.get(status, "check the server's log")
    return f"{url} answered HTTP {status} ({detail}): {hint}"


def make_openai_backend(
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    timeout: float = 600.0,
    max_retries: int = 3,
    **_: Any,
) -> OpenAICompatBackend:
    """An OpenAI-compatible backend (keyword options; unknown ones are ignored)."""
    return OpenAICompatBackend(base_url, api_key, model, float(timeout), int(max_retries))
