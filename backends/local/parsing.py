"""Parse a local model's raw output into an assistant message: text and tool calls.

The tags come from the tool-call format (:mod:`backends.local.tool_format`); with the Hermes format
a call is written as the built-in ChatML template asks (Qwen2.5 style)::

    <tool_call>
    {"name": "read", "arguments": {"path": "notes.txt"}}
    </tool_call>

An empty closing tag means a call runs to the end of the output (Mistral, Llama 3).
Accepted as well: an unterminated last block (generation stopped before ``</tool_call>``),
a JSON list of calls inside one block, ``arguments`` given as a JSON string instead of an
object, ``parameters`` for ``arguments`` (Llama 3's spelling), and a bare JSON call object
as the whole output. Text outside the blocks is the message content.

Nothing here raises on model output, and nothing malformed is repaired by guessing: a block
whose JSON is broken but whose tool name can be read becomes a call with the block's raw text as
its arguments, so the loop's validation tells the model exactly what was wrong; a block with no
readable name is reported in :attr:`ParsedOutput.error`, and the loop asks the model again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent.messages import AssistantMessage, ToolCall

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass(slots=True)
class ParsedOutput:
    """The message read from generated text, and why any call markup could not be read."""

    message: AssistantMessage
    error: str | None = None  # set when a call block held no readable tool name


def parse_output(text: str, open_tag: str = OPEN, close_tag: str = CLOSE) -> ParsedOutput:
    """The assistant message a model's raw output text stands for."""
    content_parts: list[str] = []
    calls: list[ToolCall] = []
    unreadable: list[ToolCall] = []
    pos = 0
    while True:
        start = text.find(open_tag, pos)
        if start < 0:
            content_parts.append(text[pos:])
            break
        content_parts.append(text[pos:start])
        body_start = start + len(open_tag)
        end = text.find(close_tag, body_start) if close_tag else -1
        body = text[body_start:] if end < 0 else text[body_start:end]
        for call in _calls_from_block(body):
            (calls if call.function.name else unreadable).append(call)
        if end < 0:
            break
        pos = end + len(close_tag)
    content = "".join(content_parts).strip()
    error = None
    if unreadable:
        raw = unreadable[0].function.arguments
        error = f"no tool name could be read from the call {raw[:200]!r}"
    if not calls:
        bare = _bare_call(text) if not unreadable else None
        if bare is not None:
            return ParsedOutput(AssistantMessage(content=None, tool_calls=[bare]))
        return ParsedOutput(AssistantMessage(content=content), error)
    return ParsedOutput(AssistantMessage(content=content or None, tool_calls=calls), error)


def _calls_from_block(body: str) -> list[ToolCall]:
    """One block's calls; a block that is not a well-formed call still yields one ToolCall."""
    raw = body.strip()
    try:
        data = json.loads(raw, strict=False)  # a raw newline in a string is still meant as one
    except (json.JSONDecodeError, RecursionError):
        return [_malformed(raw)]
    if isinstance(data, list) and data and all(_call_from_object(item) for item in data):
        return [c for item in data if (c := _call_from_object(item)) is not None]
    call = _call_from_object(data)
    return [call] if call is not None else [_malformed(raw)]


def _call_from_object(data: Any) -> ToolCall | None:
    """A ToolCall from ``{"name": str, "arguments": object | str}``, or None if it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        return ToolCall.make(data["name"], args)  # already JSON text; validation decodes it
    return ToolCall.make(data["name"], json.dumps(args, ensure_ascii=False))


def _malformed(raw: str) -> ToolCall:
    match = _NAME.search(raw)
    name = ""
    if match:
        try:
            name = json.loads(f'"{match.group(1)}"')
        except json.JSONDecodeError:
            name = ""
    return ToolCall.make(name, raw)


def _bare_call(text: str) -> ToolCall | None:
    """The whole output as one JSON call object, the way some models answer without tags."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        data = json.loads(stripped, strict=False)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or not ({"arguments", "parameters"} & set(data)):
        return None  # a JSON answer that merely has a "name" key is content, not a call
    return _call_from_object(data)
