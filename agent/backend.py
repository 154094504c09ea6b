"""The one protocol the loop needs from a model: a stateless ``generate``.

A backend receives the whole conversation every call and keeps nothing between calls. It
streams text as it is produced and ends with one :class:`Completion` holding the parsed
assistant message, exactly as an OpenAI-compatible server returns it.

A backend that can hold its output to ``ChatRequest.response_format`` (a JSON schema) says so
with a true ``supports_response_format`` attribute; one without it would answer unconstrained,
so code that relies on the schema asks :func:`supports_response_format` first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agent.messages import AssistantMessage, ChatRequest, Usage


@dataclass(slots=True)
class TextDelta:
    """A piece of generated text, streamed as it is decoded."""

    text: str


@dataclass(slots=True)
class Completion:
    """The end of one generation: the parsed assistant message and why decoding stopped."""

    message: AssistantMessage
    finish_reason: str = "stop"  # "stop", "length", "tool_calls", "abort"
    usage: Usage = field(default_factory=Usage)
    raw_text: str | None = None  # the model's output before parsing, where the backend has it
    parse_error: str | None = None  # why tool-call markup in raw_text could not be read
    ttft_s: float | None = None  # seconds from the request to the first generated text


BackendEvent = TextDelta | Completion


@runtime_checkable
class Backend(Protocol):
    """Anything that turns a chat request into a streamed assistant message."""

    name: str

    def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
        """Stream the reply to ``request``; the last event is always a :class:`Completion`."""
        ...


def supports_response_format(backend: object) -> bool:
    """Whether ``backend`` constrains its output to a request's ``response_format``."""
    return getattr(backend, "supports_response_format", False) is True
