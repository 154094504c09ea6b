"""A backend for any OpenAI-compatible server: vLLM, SGLang, llama-server, Ollama, OpenAI.

The server applies the chat template and parses tool calls, so this is a plain
:class:`agent.backend.Backend`: it POSTs the request to ``{base_url}/chat/completions`` with
``stream: true`` and turns the server-sent events back into text deltas and one completion
(tool-call deltas accumulated by index). It uses only the standard library (urllib).
The API key is sent as a bearer token and never appears in messages or reprs.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agent.backend import BackendEvent, Completion, TextDelta
from agent.errors import BackendError
from agent.messages import AssistantMessage, ChatRequest, ToolCall, Usage, new_call_id

API_KEY_ENV = ("CLAWLOOP_API_KEY", "OPENAI_API_KEY")


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

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self._api_key = api_key or next(
            (os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), None
        )

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
        body = request.to_wire()
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        if request.model is None and self.model is not None:
            body["model"] = self.model
        response = self._post(body)
        reply = _Reply()
        kind = response.headers.get("Content-Type") or ""
        try:
            if "json" in kind and "event-stream" not in kind:
                yield from self._whole(response.read(), reply)  # the server ignored "stream"
            else:
                events = 0
                for data in _sse_data(response):
                    if data.strip() == "[DONE]":
                        break
                    events += 1
                    yield from self._chunk(_json(data, self.url), reply)
                if events == 0:
                    raise BackendError(
                        f"{self.url} answered without any chat completion events "
                        f"(content type {kind or 'unknown'}): is it an OpenAI-compatible endpoint?"
                    )
        except OSError as exc:  # TimeoutError included
            raise BackendError(
                f"the connection to {self.url} broke while streaming ({exc}): is the server up?"
            ) from None
        finally:
            response.close()
        message = reply.message()
        reason = "tool_calls" if message.tool_calls else reply.finish_reason
        yield Completion(message=message, finish_reason=reason, usage=reply.usage)

    def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            raise BackendError(_http_problem(self.url, exc)) from None
        except urllib.error.URLError as exc:
            raise BackendError(
                f"cannot reach {self.url} ({exc.reason}): is the server running, and is "
                "base_url right (it usually ends in /v1)?"
            ) from None
        except OSError as exc:  # TimeoutError included
            raise BackendError(f"cannot reach {self.url} ({exc}): is the server running?") from None

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


def _sse_data(response: Any) -> Iterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined with newlines)."""
    lines: list[str] = []
    for raw in response:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
        # "event:", "id:", "retry:" and ":" comment lines carry nothing we need
    if lines:
        yield "\n".join(lines)


def _add_call_part(part: dict[str, Any], reply: _Reply) -> None:
    index = part.get("index", len(reply.calls))
    call = reply.calls.setdefault(index if isinstance(index, int) else 0, _CallParts())
    if part.get("id"):
        call.id = str(part["id"])
    function = part.get("function") or {}
    if function.get("name"):
        call.name += str(function["name"])
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


def _http_problem(url: str, exc: urllib.error.HTTPError) -> str:
    detail = str(exc.reason)
    try:
        error = json.loads(exc.read().decode("utf-8", "replace")).get("error")
        detail = _error_text(error) if error else detail
    except (json.JSONDecodeError, AttributeError, OSError):
        pass  # not a JSON error body: the status line says enough
    hint = {
        401: "check the API key (the api_key option, or CLAWLOOP_API_KEY / OPENAI_API_KEY)",
        403: "check the API key and its permissions",
        404: "check base_url (it usually ends in /v1) and the model name",
        400: "the server rejected the request: check the model name and its tool support",
        422: "the server rejected the request: check the model name and its tool support",
        429: "the server is rate limiting: wait and retry",
    }.get(exc.code, "check the server's log")
    return f"{url} answered HTTP {exc.code} ({detail}): {hint}"


def make_openai_backend(
    base_url: str = "http://127.0.0.1:8000/v1",
    api_key: str | None = None,
    model: str | None = None,
    timeout: float = 600.0,
    **_: Any,
) -> OpenAICompatBackend:
    """An OpenAI-compatible backend (keyword options; unknown ones are ignored)."""
    return OpenAICompatBackend(base_url, api_key, model, float(timeout))
