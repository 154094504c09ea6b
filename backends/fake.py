"""A scripted backend: replays assistant turns from a list (or a JSON file), no model needed.

Shipped for tests and demos. Each turn is an assistant message in the OpenAI wire format, or the
shorthand ``{"content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.backend import BackendEvent, Completion, TextDelta
from agent.errors import UserError
from agent.messages import AssistantMessage, ChatRequest, ToolCall, Usage

Turn = AssistantMessage | Callable[[ChatRequest], AssistantMessage]


class FakeBackend:
    """Replays scripted turns in order; once they run out, it answers with a fixed final text."""

    name = "fake"

    def __init__(
        self, turns: Sequence[Turn] = (), when_done: str = "(the script has no more turns)"
    ) -> None:
        self.turns = list(turns)
        self.when_done = when_done
        self.requests: list[ChatRequest] = []

    @classmethod
    def from_file(cls, path: Path) -> FakeBackend:
        """Load a script: a JSON list of assistant turns."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"script file {path} does not exist") from None
        except json.JSONDecodeError as exc:
            raise UserError(
                f"script file {path} is not valid JSON (line {exc.lineno}: {exc.msg})"
            ) from None
        if not isinstance(data, list):
            raise UserError(f"script file {path} must hold a JSON list of assistant turns")
        return cls([turn_from_json(item, path, i) for i, item in enumerate(data)])

    def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
        index = len(self.requests)
        self.requests.append(request)
        turn = (
            self.turns[index]
            if index < len(self.turns)
            else AssistantMessage(content=self.when_done)
        )
        message = turn(request) if callable(turn) else turn.model_copy(deep=True)
        text = message.content or ""
        for piece in re.findall(r"\S+\s*|\s+", text):
            yield TextDelta(piece)
        prompt_tokens = sum(
            len((getattr(m, "content", "") or "").split()) for m in request.messages
        )
        usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=max(1, len(text.split())))
        reason = "tool_calls" if message.tool_calls else "stop"
        yield Completion(message=message, finish_reason=reason, usage=usage)


def turn_from_json(item: Any, path: Path | str = "<script>", index: int = 0) -> AssistantMessage:
    """One scripted turn from its JSON form (wire format or shorthand)."""
    if isinstance(item, str):
        return AssistantMessage(content=item)
    if not isinstance(item, dict):
        raise UserError(f"{path}: turn {index} must be a string or an object")
    calls = []
    for raw in item.get("tool_calls") or []:
        if isinstance(raw, dict) and "function" not in raw and "name" in raw:
            calls.append(ToolCall.make(raw["name"], raw.get("arguments", {}), raw.get("id")))
        else:
            try:
                calls.append(ToolCall.model_validate(raw))
            except ValidationError as exc:
                raise UserError(
                    f"{path}: turn {index} has an invalid tool call: {exc.errors()[0]['msg']}"
                ) from None
    return AssistantMessage(content=item.get("content"), tool_calls=calls or None)
