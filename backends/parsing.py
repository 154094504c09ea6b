"""Parse a local model's raw output into an assistant message: text and tool calls.

Tool calls are written the way the built-in ChatML template asks (Hermes / Qwen2.5 style)::

    <tool_call>
    {"name": "read", "arguments": {"path": "notes.txt"}}
    </tool_call>

Accepted as well: an unterminated last block (generation stopped before ``</tool_call>``),
a JSON list of calls inside one block, ``arguments`` given as a JSON string instead of an
object, ``parameters`` for ``arguments`` (Llama 3's spelling), and a bare JSON call object
as the whole output. Text outside the blocks is the message content.

Nothing here raises on model output, and nothing malformed is repaired by guessing: a block
whose JSON is broken still becomes a tool call, with the name if one can be read (else ``""``)
and the block's raw text as its arguments, so the loop's validation tells the model exactly
what was wrong and it can try again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.messages import AssistantMessage, ToolCall

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def parse_output(text: str) -> AssistantMessage:
    """The assistant message a model's raw output text stands for."""
    content_parts: list[str] = []
    calls: list[ToolCall] = []
    pos = 0
    while True:
        start = text.find(OPEN, pos)
        if start < 0:
            content_parts.append(text[pos:])
            break
        content_parts.append(text[pos:start])
        body_start = start + len(OPEN)
        end = text.find(CLOSE, body_start)
        body = text[body_start:] if end < 0 else text[body_start:end]
        calls.extend(_calls_from_block(body))
        if end < 0:
            break
        pos = end + len(CLOSE)
    content = "".join(content_parts).strip()
    if not calls:
        bare = _bare_call(text)
        if bare is not None:
            return AssistantMessage(content=None, tool_calls=[bare])
        return AssistantMessage(content=content)
    return AssistantMessage(content=content or None, tool_calls=calls)


def _calls_from_block(body: str) -> list[ToolCall]:
    """One block's calls; a block that is not a well-formed call still yields one ToolCall."""
    raw = body.strip()
    try:
        data = json.loads(raw)
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
        data = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or not ({"arguments", "parameters"} & set(data)):
        return None  # a JSON answer that merely has a "name" key is content, not a call
    return _call_from_object(data)
