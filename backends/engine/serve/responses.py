"""Generated text to OpenAI response bodies and stream chunks.

The raw output is read back into an assistant message by ``backends.local.parsing.parse_output`` and
streamed through ``ContentStream`` (tool-call markup is never content), exactly as the local
backends do. In a stream, each tool call is sent once its block closes: a first delta with
``index``, ``id``, ``type`` and the name (empty arguments), then deltas with only ``index`` and
an arguments fragment.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agent.messages import AssistantMessage, ToolCall
from backends.engine.core.llm_engine import GenerationDelta, GenerationResult
from backends.engine.serve.bridge import EngineFailed
from backends.engine.serve.requests import Prepared

ARGUMENT_FRAGMENT = 16  # characters of arguments per streamed tool-call delta
Tokens = AsyncIterator[GenerationDelta | GenerationResult]


def usage(result: GenerationResult) -> dict[str, Any]:
    """OpenAI's usage object, with the prefix-cache hits as ``cached_tokens``."""
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.prompt_tokens + result.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
    }


def _ended(result: GenerationResult | None) -> GenerationResult:
    """The stream's result; the engine always ends a request's stream with one."""
    if result is None:
        raise EngineFailed("the engine ended a request without a result")
    return result


async def _collect(tokens: Tokens) -> tuple[str, GenerationResult]:
    """A whole (non-streamed) response's text and the result that ended its stream."""
    pieces: list[str] = []
    result: GenerationResult | None = None
    async for item in tokens:
        if isinstance(item, GenerationDelta):
            pieces.append(item.text)
        else:
            result = item
    return "".join(pieces), _ended(result)


def _message(text: str, prepared: Prepared) -> AssistantMessage:
    if not prepared.parse_tool_calls:
        return AssistantMessage(content=text)
    return prepared.tool_format.parse(text).message


def _finish_reason(message: AssistantMessage, result: GenerationResult) -> str:
    return "tool_calls" if message.tool_calls else result.finish_reason


class ChatResponder:
    """Builds one chat completion (whole or streamed) from the engine's outputs."""

    def __init__(self, model: str, prepared: Prepared) -> None:
        self.model = model
        self.prepared = prepared
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())

    async def whole(self, tokens: Tokens) -> dict[str, Any]:
        """The non-streamed response body."""
        text, result = await _collect(tokens)
        message = _message(text, self.prepared)
        wire = message.to_wire()
        wire.pop("name", None)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": wire,
                    "logprobs": None,
                    "finish_reason": _finish_reason(message, result),
                }
            ],
            "usage": usage(result),
        }

    async def chunks(self, tokens: Tokens, include_usage: bool) -> AsyncIterator[dict[str, Any]]:
        """The stream's chunks, without the final ``[DONE]``."""
        yield self._chunk({"role": "assistant", "content": ""})
        fmt = self.prepared.tool_format
        visible = fmt.stream() if self.prepared.parse_tool_calls else None
        text = ""
        sent_calls = 0
        result: GenerationResult | None = None
        async for item in tokens:
            if isinstance(item, GenerationResult):
                result = item
                continue
            text += item.text
            shown = visible.feed(item.text) if visible is not None else item.text
            if shown:
                yield self._chunk({"content": shown})
            close = fmt.close
            if visible is not None and close and close in text[-len(close) - len(item.text) :]:
                done = text[: text.rfind(close) + len(close)]
                closed = fmt.parse(done).message.tool_calls or []
                for index in range(sent_calls, len(closed)):
                    for delta in _call_deltas(index, closed[index]):
                        yield self._chunk({"tool_calls": [delta]})
                sent_calls = max(sent_calls, len(closed))
        result = _ended(result)
        if visible is not None and (rest := visible.flush()):
            yield self._chunk({"content": rest})
        message = _message(text, self.prepared)
        calls = message.tool_calls or []
        for index in range(sent_calls, len(calls)):
            for delta in _call_deltas(index, calls[index]):
                yield self._chunk({"tool_calls": [delta]})
        yield self._chunk({}, _finish_reason(message, result))
        if include_usage:
            yield {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage(result),
            }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }


def _call_deltas(index: int, call: ToolCall) -> list[dict[str, Any]]:
    """The deltas of one tool call: the header, then the arguments in fragments."""
    first = {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.function.name, "arguments": ""},
    }
    args = call.function.arguments
    rest = [
        {"index": index, "function": {"arguments": args[i : i + ARGUMENT_FRAGMENT]}}
        for i in range(0, len(args), ARGUMENT_FRAGMENT)
    ]
    return [first, *rest]


class CompletionResponder:
    """Builds one text completion (whole or streamed)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = "cmpl-" + uuid.uuid4().hex
        self.created = int(time.time())

    async def whole(self, tokens: Tokens) -> dict[str, Any]:
        text, result = await _collect(tokens)
        body = self._body(text, result.finish_reason)
        body["usage"] = usage(result)
        return body

    async def chunks(self, tokens: Tokens, include_usage: bool) -> AsyncIterator[dict[str, Any]]:
        async for item in tokens:
            if isinstance(item, GenerationDelta):
                if item.text:
                    yield self._body(item.text, None)
            else:
                yield self._body("", item.finish_reason)
                if include_usage:
                    body = self._body("", None)
                    body["choices"] = []
                    body["usage"] = usage(item)
                    yield body

    def _body(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
