"""What the local backends share: the server-side steps of the seed.

1. apply the chat template (string work),
2. prefill + decode (the only step that runs the network),
3. parse the output back into an assistant message (string work),

so that the loop receives parsed tool calls exactly as it would from an OpenAI-compatible server.
A local model only has to provide a :class:`Decoder`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent.backend import BackendEvent, Completion, TextDelta
from agent.errors import BackendError
from agent.messages import ChatRequest, ToolSpec, Usage
from backends.local.chat_template import ChatTemplate


@dataclass(slots=True)
class DecodeResult:
    """How decoding ended: sent once, after the last text piece."""

    finish_reason: str = "stop"  # "stop" (end token or stop string), "length", "abort"
    usage: Usage = field(default_factory=Usage)


class Decoder(Protocol):
    """Prefill + decode for one rendered prompt: yields text pieces, then one DecodeResult.

    ``tools`` is given so the decoder can constrain a tool call to the offered tools' schemas.
    A decoder that holds its output to ``request.response_format`` has a true
    ``supports_response_format`` attribute.
    """

    def decode(
        self, prompt: str, request: ChatRequest, stop: list[str], tools: list[ToolSpec] | None
    ) -> Iterator[str | DecodeResult]: ...


class LocalBackend:
    """A backend made of a chat template and a decoder."""

    def __init__(self, name: str, template: ChatTemplate, decoder: Decoder) -> None:
        self.name = name
        self.template = template
        self.decoder = decoder
        self.adapter: Path | None = None  # the LoRA adapter the model runs with, if any
        self.context_tokens: int | None = None  # the model's context, where the decoder knows

    @property
    def supports_response_format(self) -> bool:
        """Whether the decoder holds its output to a request's JSON schema."""
        return getattr(self.decoder, "supports_response_format", False) is True

    def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
        if request.response_format is not None and not self.supports_response_format:
            raise BackendError(
                f"the {self.name} backend cannot hold its output to a JSON schema "
                "(response_format); use the llamacpp backend, or a server that supports it"
            )
        began = time.monotonic()
        shown = request.tools if request.tool_choice != "none" else None
        prompt = self.template.render(request.messages, tools=shown, add_generation_prompt=True)
        tools = request.callable_tools() if shown else None  # what the grammar lets through
        stop = [*self.template.stop_strings, *request.stop_list()]
        fmt = self.template.tool_format
        pieces: list[str] = []
        visible = fmt.stream()
        result = DecodeResult()
        ttft: float | None = None
        for item in self.decoder.decode(prompt, request, stop, tools):
            if isinstance(item, DecodeResult):
                result = item
            elif item:
                if ttft is None:
                    ttft = time.monotonic() - began
                pieces.append(item)
                if text := visible.feed(item):
                    yield TextDelta(text)
        if rest := visible.flush():
            yield TextDelta(rest)
        raw = "".join(pieces)
        parsed = fmt.parse(raw)
        message = parsed.message
        reason = "tool_calls" if message.tool_calls else result.finish_reason
        yield Completion(
            message=message,
            finish_reason=reason,
            usage=result.usage,
            raw_text=raw,
            parse_error=fmt.repair_hint([t.function.name for t in tools or []])
            if parsed.error
            else None,
            ttft_s=ttft,
        )
