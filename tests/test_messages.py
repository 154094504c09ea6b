"""The wire-format messages: real OpenAI request JSON goes in and comes back out unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from agent.messages import (
    AssistantMessage,
    ChatRequest,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    parse_message,
)

# A request as an OpenAI client sends it, mid-conversation: a tool call and its result.
REQUEST: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What's the weather in Paris? Answer in °C.", "name": "ada"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_def456",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc123", "content": '{"temp_c": 21}'},
        {"role": "tool", "tool_call_id": "call_def456", "content": "14:05", "name": "get_time"},
        {"role": "assistant", "content": "It is 21 °C in Paris at 14:05."},
        {"role": "user", "content": "Thanks!"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "unit": {"type": "string", "enum": ["c", "f"]},
                    },
                    "required": ["city"],
                    "additionalProperties": False,
                },
                "strict": True,
            },
        },
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
    ],
    "tool_choice": "auto",
    "temperature": 0.2,
    "top_p": 0.9,
    "max_tokens": 256,
    "seed": 42,
    "stop": ["\n\n"],
    "stream": True,
    "parallel_tool_calls": True,
    "user": "user-1234",
}


def test_a_real_request_round_trips_unchanged():
    request = ChatRequest.model_validate(REQUEST)
    assert request.to_wire() == {
        **REQUEST,
        "tools": [
            {**REQUEST["tools"][0]},
            {
                "type": "function",
                "function": {**REQUEST["tools"][1]["function"], "description": ""},
            },
        ],
    }
    # Fields clawloop does not model travel along untouched.
    assert request.model_extra == {"parallel_tool_calls": True, "user": "user-1234"}
    again = ChatRequest.model_validate_json(json.dumps(request.to_wire()))
    assert again == request


def test_messages_are_typed_by_role():
    request = ChatRequest.model_validate(REQUEST)
    kinds = [type(m).__name__ for m in request.messages]
    assert kinds == [
        "SystemMessage", "UserMessage", "AssistantMessage", "ToolMessage", "ToolMessage",
        "AssistantMessage", "UserMessage",
    ]  # fmt: skip
    assistant = request.messages[2]
    assert isinstance(assistant, AssistantMessage) and assistant.tool_calls
    assert [c.function.parsed_arguments() for c in assistant.tool_calls] == [{"city": "Paris"}, {}]
    tool = request.messages[3]
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "call_abc123"


def test_each_message_round_trips():
    for data in REQUEST["messages"]:
        assert parse_message(data).to_wire() == data
        assert parse_message(json.dumps(data)).to_wire() == data


def test_assistant_content_key_is_always_sent():
    assert AssistantMessage(tool_calls=[ToolCall.make("f", {})]).to_wire()["content"] is None


def test_tool_call_make_and_arguments():
    call = ToolCall.make("read", {"path": "é.txt"}, "call_1")
    assert call.to_wire() == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": '{"path": "é.txt"}'},
    }
    assert ToolCall.make("f", "  ").function.parsed_arguments() == {}
    assert ToolCall.make("f", {}).id.startswith("call_")
    with pytest.raises(json.JSONDecodeError):
        ToolCall.make("f", "{oops").function.parsed_arguments()


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "wizard", "content": "x"},
        {"role": "tool", "content": "no call id"},
        {"role": "user"},
        {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
    ],
)
def test_invalid_messages_are_rejected(bad: dict):
    with pytest.raises(ValidationError):
        parse_message(bad)


def test_request_settings_are_validated():
    messages: list[Message] = [UserMessage(content="x")]
    for bad in ({"temperature": -1}, {"top_p": 0}, {"max_tokens": 0}, {"tool_choice": "any"}):
        with pytest.raises(ValidationError):
            ChatRequest.model_validate({"messages": messages, **bad})
    assert ChatRequest(messages=messages, stop="END").stop_list() == ["END"]
    assert ChatRequest(messages=messages).stop_list() == []


def test_usage_totals():
    assert Usage(prompt_tokens=3, completion_tokens=4, cached_tokens=2).total_tokens == 7
