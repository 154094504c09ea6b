"""The front end's half of a request: engine-core token outputs to text deltas and one result.

This runs wherever the outputs are read (the caller of ``LLMEngine.step``, or each streaming
consumer's own thread or event loop), never inside the step loop: detokenizing and stop-string
matching cost nothing on the forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backends.engine.core.detokenize import IncrementalDetokenizer, StopStringMatcher
from backends.engine.core.engine_core import CoreOutput


@dataclass(slots=True)
class GenerationDelta:
    """New tokens of one request and the text they completed (may be empty)."""

    token_ids: list[int]
    text: str


@dataclass(slots=True)
class GenerationResult:
    """How a request ended, sent once, last."""

    request_id: int
    finish_reason: str  # "stop", "length" or "abort"
    prompt_tokens: int
    cached_tokens: int  # prompt tokens served from the prefix cache
    completion_tokens: int
    token_ids: list[int] = field(default_factory=list)  # every generated token
    text: str = ""  # the whole text, cut before a stop string


@dataclass(slots=True)
class RequestOutput:
    """What one step produced for one request: a delta, and the result if it finished."""

    request_id: int
    delta: GenerationDelta
    result: GenerationResult | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None


class OutputProcessor:
    """One request's detokenizer and stop matcher; turns core outputs into deltas and a result."""

    def __init__(
        self, request_id: int, tokenizer: Any, prompt_ids: list[int], stop_strings: list[str]
    ) -> None:
        self.request_id = request_id
        self.detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids)
        self.stops = StopStringMatcher(stop_strings)
        self.token_ids: list[int] = []
        self.text: list[str] = []
        self.result: GenerationResult | None = None

    def process(self, out: CoreOutput) -> RequestOutput:
        """The delta for ``out``; ``result`` is set once the request ended.

        A stop string ends the request here even though the core has not finished it: the caller
        must then abort it in the core (``stopped_early``).
        """
        text = ""
        reason = out.finish_reason
        last = len(out.token_ids) - 1
        for i, token in enumerate(out.token_ids):
            self.token_ids.append(token)
            if reason is not None and not out.shown and i == last:
                continue  # the end token (earlier ones are verified drafts: text)
            piece, hit = self.stops.feed(self.detokenizer.add(token))
            text += piece
            if hit:
                reason = "stop"
                break
        if reason is not None and reason != "abort":
            text += self.stops.flush()
        self.text.append(text)
        output = RequestOutput(self.request_id, GenerationDelta(list(out.token_ids), text))
        if reason is not None:
            self.result = GenerationResult(
                self.request_id,
                reason,
                out.prompt_tokens,
                out.cached_tokens,
                len(self.token_ids),
                list(self.token_ids),
                "".join(self.text),
            )
            output.result = self.result
        return output

    def stopped_early(self, out: CoreOutput) -> bool:
        """True when this output ended the request (a stop string) but the core still runs it."""
        return self.result is not None and out.finish_reason is None
