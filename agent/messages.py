"""Chat messages and requests in the OpenAI chat-completions wire format.

These are the edge models: anything that arrives as JSON (a session file, an HTTP body, a
script for the fake backend) is validated here. ``to_wire`` gives back the same JSON.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent.provenance import Provenance


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow")

    def to_wire(self) -> dict[str, Any]:
        """The JSON an OpenAI-compatible server takes, with unset optional fields left out."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_record(self) -> dict[str, Any]:
        """The JSON a session file or a trace keeps: the wire form plus clawloop's own labels."""
        return self.to_wire()


class _Labelled(_Wire):
    """A message that may carry a ``provenance``: kept in sessions and traces, never sent to a
    model (a subclass declares the field)."""

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True, exclude={"provenance"})

    def to_record(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class FunctionCall(_Wire):
    """The function part of a tool call: a name and its arguments as a JSON string."""

    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON; raises ``json.JSONDecodeError`` if they are not JSON."""
        return json.loads(self.arguments) if self.arguments.strip() else {}


class ToolCall(_Wire):
    """One tool call requested by the model."""

    id: str = Field(default_factory=lambda: new_call_id())
    type: Literal["function"] = "function"
    function: FunctionCall

    @classmethod
    def make(
        cls, name: str, arguments: dict[str, Any] | str, call_id: str | None = None
    ) -> ToolCall:
        """A tool call from a name and arguments (a dict is encoded as JSON)."""
        args = (
            arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        )
        return cls(id=call_id or new_call_id(), function=FunctionCall(name=name, arguments=args))


def new_call_id() -> str:
    """A fresh tool-call id in the shape OpenAI uses."""
    return "call_" + uuid.uuid4().hex[:24]


class SystemMessage(_Wire):
    """Instructions from whoever runs the agent."""

    role: Literal["system"] = "system"
    content: str
    name: str | None = None


class UserMessage(_Labelled):
    """What the person asked."""

    role: Literal["user"] = "user"
    content: str
    name: str | None = None
    # Set for a chat member who is not an owner: their words do not count as the user's own
    # (agent/dataflow.py). Kept beside the content, never sent to a model, like a result's.
    provenance: Provenance | None = None

    @property
    def from_owner(self) -> bool:
        """Whether these are the owner's own words (no label, or a trusted one)."""
        return self.provenance is None or self.provenance.trusted


class AssistantMessage(_Wire):
    """The model's turn: text, tool calls, or both."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    name: str | None = None

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data.setdefault("content", None)  # servers expect the key, even when null
        return data


class ToolMessage(_Labelled):
    """The result of one tool call, sent back to the model."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str
    name: str | None = None
    # Where the content came from. It lives beside the content, in sessions and traces, and is
    # never sent to a model: nothing in a result's text can claim or change it.
    provenance: Provenance | None = None


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def parse_message(data: dict[str, Any] | str) -> Message:
    """Validate one message from a dict or a JSON string."""
    if isinstance(data, str):
        return MESSAGE_ADAPTER.validate_json(data)
    return MESSAGE_ADAPTER.validate_python(data)


class FunctionSpec(_Wire):
    """A tool's name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolSpec(_Wire):
    """A tool definition as sent in a request's ``tools`` list."""

    type: Literal["function"] = "function"
    function: FunctionSpec


class ResponseFormat(_Wire):
    """Output held to JSON valid for a schema, in the OpenAI wire shape:
    ``{"type": "json_schema", "json_schema": {"name": N, "schema": S, "strict": true}}``."""

    type: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any]

    @classmethod
    def for_schema(cls, schema: dict[str, Any], name: str = "answer") -> ResponseFormat:
        """The format for output valid under ``schema``."""
        return cls(json_schema={"name": name, "schema": schema, "strict": True})

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema the output must be valid under."""
        schema = self.json_schema.get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}


class ChatRequest(_Wire):
    """One stateless request: the whole conversation, the tools, and the decoding settings."""

    model: str | None = None
    messages: list[Message]
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["auto", "none", "required"] | None = None
    # Names among ``tools`` the model may call now (None: all of them). The others stay in the
    # prompt, so a conversation's prompt keeps its prefix (and its KV cache) from step to step.
    # On the wire this is the tools list cut down to these, as OpenAI-compatible servers expect.
    allowed_tools: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: list[str] | str | None = None
    stream: bool | None = None
    # Output constrained to a JSON schema. Only a backend that says it honours this field
    # (agent/backend.py: ``supports_response_format``) may be sent it; the others refuse it.
    response_format: ResponseFormat | None = None

    def to_wire(self) -> dict[str, Any]:
        data = self.model_dump(
            mode="json", exclude_none=True, exclude={"messages", "allowed_tools"}
        )
        data["messages"] = [m.to_wire() for m in self.messages]
        if self.tools is not None:
            data["tools"] = [t.to_wire() for t in self.callable_tools() or []]
        return data

    def callable_tools(self) -> list[ToolSpec] | None:
        """The tools the model may call now: ``tools`` cut down to ``allowed_tools``."""
        if self.tools is None or self.allowed_tools is None:
            return self.tools
        allowed = set(self.allowed_tools)
        return [t for t in self.tools if t.function.name in allowed]

    def stop_list(self) -> list[str]:
        """The stop strings as a list."""
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class Usage(_Wire):
    """Token counts for one request."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
