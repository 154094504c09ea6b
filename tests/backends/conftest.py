"""Shared fixtures for the backend tests: conversations with tools, and the bundled model."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import (
    AssistantMessage,
    FunctionSpec,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

WEATHER = ToolSpec(
    function=FunctionSpec(
        name="weather",
        description="The weather in a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
)
READ = ToolSpec(
    function=FunctionSpec(
        name="read",
        description="Read a text file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"],
        },
    )
)


@pytest.fixture
def tools() -> list[ToolSpec]:
    """Two tools with small JSON schemas."""
    return [WEATHER, READ]


@pytest.fixture
def conversation() -> list[Message]:
    """A multi-turn conversation with parallel tool calls, results and a follow-up question."""
    return [
        SystemMessage(content="You are a careful assistant."),
        UserMessage(content="What is the weather in Paris and Oslo?"),
        AssistantMessage(
            content=None,
            tool_calls=[
                ToolCall.make("weather", {"city": "Paris"}, "call_1"),
                ToolCall.make("weather", {"city": "Oslo"}, "call_2"),
            ],
        ),
        ToolMessage(tool_call_id="call_1", name="weather", content="sunny, 21 °C"),
        ToolMessage(tool_call_id="call_2", name="weather", content="rain, 9 °C"),
        AssistantMessage(content="Paris is sunny (21 °C); Oslo has rain (9 °C)."),
        UserMessage(content="Now read notes.txt <please>."),
        AssistantMessage(
            content="Reading it.", tool_calls=[ToolCall.make("read", {"path": "notes.txt"}, "c3")]
        ),
        ToolMessage(tool_call_id="c3", name="read", content='line one\n{"json": true}\n'),
        AssistantMessage(content="The file has two lines."),
    ]


@pytest.fixture
def bundled_model() -> Path:
    """The bundled SmolLM2 GGUF, or a skip if the llamacpp extra is not installed."""
    from agent.errors import UserError
    from backends.gguf.default_model import default_model_path

    try:
        return default_model_path()
    except UserError as exc:
        pytest.skip(exc.message)
